"""LASER's benchmark measurements, without flags (the entry point is `laser.benchmark`).

* `learner_throughput`: a real `MixedLearner` on an in-process Reverb server
  with `agent_tables(config)`, stepping for a timed window after a warm-up.
  The unrolls come from a `Feeder`: a recording of the preset's real env under
  random actions, written through the actors' `unroll_adder` to
  `actor_tables(config)` (queue and replay, each unroll once). The feeder
  does not write while the learner steps: writing costs about as much CPU per
  unroll as learning from it (minatar_laser: ~4 ms an unroll, ~35 ms a step
  of 16), so on a 2-core machine shared with other work a feeder beside the
  learner starved the queue at replay fraction 0 (16 fresh unrolls a step:
  11 steps/s) while it idled on the full queue at 0.875 (2 a step: 24
  steps/s); the window would measure the writer, not the learner. Instead the
  queue is pre-filled with what the learner will take in the window (from the
  warm-up's rate, with a margin) and, should it run low, topped up with the
  clock stopped: the clock runs during `MixedLearner.step` calls only, and
  the learner never waits.
* `replay_memory`: the memory of LASER's replay for `agents` agents, one
  shared table (a server with `sweep_tables`, as `laser.sweep` runs it)
  against a separate table each (one server with a replay per agent, as
  lone `laser.train` runs would each have), each layout's server in a fresh
  spawned process whose resident memory is measured. See `replay_memory`.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import multiprocessing
import pathlib
import queue as queue_lib
import statistics
import time
from typing import Mapping

import numpy as np
import reverb
import tensorflow as tf

from common import envs
from common.reverb import server as reverb_server
from common.reverb import tables
from impala import trajectories
from laser import agent
from laser.config import LaserConfig, sweep_members

LAYOUTS = ("shared", "separate")
PAPER_CAPACITY = 10_000_000  # LASER §5.3 / Fig. 2: a replay of 10M observations.
RECORDING_BYTES = 64 * 2**20  # At most this much of observations in a recording.
MAX_RECORDING_STEPS = 512
WARMUP_STEPS = 5  # Learner steps before the window; the first one compiles.
PREFILL_MARGIN = 1.0  # Unrolls pre-filled: the warm-up's rate x seconds x this (top-ups cover the rest).
# The feeder tops the queue up (clock stopped) when it holds fewer than this many batches,
# so the dataset's prefetch never waits either; a top-up is TOP_UP_S of steps.
LOW_WATER, TOP_UP_S = 4, 2.0
QUEUE_BOUND = 10**7  # The benchmark's queue holds the whole pre-fill (the preset's would block the feeder).
SINK_TABLE = "warmup_sink"  # The memory benchmark's writers warm up into it; it keeps every item.
SINK_CAPACITY = 10**7
MEMORY_STREAMS = 2  # Envs per agent's adder in the memory benchmark (a real actor has envs_per_actor).
CHUNKER_WARMUP_ROUNDS = 48  # Rounds per writer before measuring: chunk lengths tuned (see `replay_memory`).


def record(config: LaserConfig, steps: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """`steps` batched steps ([steps, envs_per_actor, ...] per field) of the preset's env under random actions.

    Each action is drawn from softmax(logits) with logits ~ N(0, 1), and the
    logits are recorded as mu's: incompressible floats, like a network's.
    Fields are an actor's (`impala.actor.Actor`). None: as many steps as
    hold `RECORDING_BYTES` of observations, from T + 1 to `MAX_RECORDING_STEPS`.
    """
    env = envs.make_batched(config.env, config.envs_per_actor, seed=seed, **dict(config.env_options))
    n, num_actions = env.num_envs, env.num_actions
    observation, _ = env.reset()
    if steps is None:
        steps = int(np.clip(RECORDING_BYTES // observation.nbytes, config.unroll_length + 1, MAX_RECORDING_STEPS))
    rng = np.random.default_rng(seed)
    first = np.ones(n, bool)
    episode_return, episode_length = np.zeros(n, np.float32), np.zeros(n, np.int32)
    fields = {k: [] for k in ("observation", "first", "action", "behaviour_logits", "reward", "terminal",
                              "episode_return", "episode_length")}  # fmt: skip
    for _ in range(steps):
        logits = rng.normal(size=(n, num_actions)).astype(np.float32)
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        action = (rng.random((n, 1)) > probs.cumsum(axis=1)).sum(axis=1).clip(max=num_actions - 1).astype(np.int32)
        next_observation, reward, terminated, truncated, info = env.step(action)
        episode_return += reward
        episode_length += 1
        game_over = info["game_over"]
        for name, value in (
            ("observation", observation), ("first", first), ("action", action), ("behaviour_logits", logits),
            ("reward", reward), ("terminal", terminated | truncated),
            ("episode_return", np.where(game_over, episode_return, np.nan).astype(np.float32)),
            ("episode_length", np.where(game_over, episode_length, 0).astype(np.int32)),
        ):  # fmt: skip
            fields[name].append(np.array(value))
        episode_return[game_over], episode_length[game_over] = 0.0, 0
        observation, first = next_observation, terminated | truncated
    env.close()
    return {name: np.stack(values) for name, values in fields.items()}


def recording_spec(recording: Mapping[str, np.ndarray]) -> dict[str, tf.TensorSpec]:
    observation = recording["observation"]
    return trajectories.step_spec(
        observation.shape[2:], tf.as_dtype(observation.dtype), recording["behaviour_logits"].shape[-1]
    )


class Feeder:
    """Writes a recording, cycled from step `offset`, through the actors' adder into `priorities`' tables.

    One `unroll_adder` for the recording's envs, as one actor has: an item of
    T + 1 steps in every table every T steps, for every env.
    """

    def __init__(
        self,
        client: reverb.Client,
        spec: dict[str, tf.TensorSpec],
        config: LaserConfig,
        recording: Mapping[str, np.ndarray],
        priorities: Mapping[str, float],
        offset: int = 0,
        streams: int | None = None,
    ):
        if streams is not None:  # The first `streams` envs of the recording.
            recording = {name: values[:, :streams] for name, values in recording.items()}
        self._recording = recording
        self._length = len(recording["action"])
        self._num_envs = recording["action"].shape[1]
        self._unroll_length = config.unroll_length
        self._adder = trajectories.unroll_adder(client, spec, self._num_envs, config.unroll_length, priorities)
        self._t = offset
        self.cpu_s = 0.0  # This process's CPU time while writing (the adder, and an in-process server's side).

    @property
    def unrolls(self) -> int:
        """Unrolls (items per table) written so far."""
        return self._num_envs * max(0, (self._adder.steps - 1) // self._unroll_length)

    def write(self, unrolls: int) -> None:
        """Writes whole rounds (one unroll per env) until `unrolls` have been written in all."""
        start = time.process_time()
        while self.unrolls < unrolls:
            i = self._t % self._length
            self._adder.append({name: values[i] for name, values in self._recording.items()})
            self._t += 1
        self.cpu_s += time.process_time() - start

    def retarget(self, priorities: Mapping[str, float]) -> None:
        """Sends the next items to `priorities`' tables, through the same writers (their chunk lengths tuned)."""
        self._adder._priorities = dict(priorities)  # SequenceAdder takes its tables at construction only.

    def close(self) -> None:
        self._adder.close()


def learner_throughput(
    base: LaserConfig,
    replay_fraction: float,
    seconds: float,
    recording: Mapping[str, np.ndarray],
    warmup_steps: int = WARMUP_STEPS,
) -> dict:
    """Learner steps/s of a real `MixedLearner` at `replay_fraction`, on a pre-filled queue (module docstring)."""
    config = dataclasses.replace(base, replay_fraction=replay_fraction, queue_size=QUEUE_BOUND)
    dequeued = config.dequeued_per_step
    server = reverb_server.make_server(agent.agent_tables(config))
    address = f"localhost:{server.port}"
    client = reverb.Client(address)
    learner = agent.MixedLearner(config, client, address)
    feeder = Feeder(client, learner.spec, config, recording, agent.actor_tables(config))
    feeder.write(max(warmup_steps * dequeued, config.min_replay_unrolls if config.replay_batch_size else 0))
    learner.start()
    consumed, waits, durations = 0, 0, []
    while len(durations) < warmup_steps:
        start = time.perf_counter()
        if learner.step() is None:
            waits += 1
            continue
        durations.append(time.perf_counter() - start)
        consumed += dequeued
    rate = 1.0 / statistics.median(durations[1:] or durations)  # The first step compiles.
    feeder.write(consumed + dequeued * (math.ceil(PREFILL_MARGIN * rate * seconds) + LOW_WATER))
    replay_size = client.server_info().get(agent.REPLAY_TABLE)
    steps, window_waits, top_ups, elapsed, cpu = 0, 0, 0, 0.0, 0.0
    frames = learner.frames
    while elapsed < seconds:  # The clock runs during learner steps only.
        if feeder.unrolls - consumed < LOW_WATER * dequeued:  # Refilled with the clock stopped.
            top_ups += 1
            feeder.write(consumed + dequeued * (math.ceil(rate * TOP_UP_S) + LOW_WATER))
        wall, process = time.perf_counter(), time.process_time()
        done = learner.step() is not None
        elapsed += time.perf_counter() - wall
        cpu += time.process_time() - process
        if not done:
            window_waits += 1
            continue
        steps += 1
        consumed += dequeued
    frames = learner.frames - frames
    del learner
    gc.collect()
    feeder.close()
    server.stop()
    ms_per_unroll = 1e3 * feeder.cpu_s / feeder.unrolls
    return {
        "replay_fraction": replay_fraction,
        "online_unrolls": config.online_batch_size,
        "replayed_unrolls": config.replay_batch_size,
        "dequeued_per_step": dequeued,
        "unroll_length": config.unroll_length,
        "frames_per_step": config.frames_per_step,
        "seconds": round(elapsed, 2),
        "steps": steps,
        "learner_steps_per_s": round(steps / elapsed, 2),
        "fresh_frames_per_s": round(frames / elapsed),
        "learned_unrolls_per_s": round(steps * config.batch_size / elapsed, 1),
        "waits": window_waits,
        "warmup_waits": waits,
        "top_ups": top_ups,
        "replay_size_at_start": replay_size.current_size if replay_size is not None else 0,
        "process_cpu_cores": round(cpu / elapsed, 2),
        "feeder_ms_per_unroll": round(ms_per_unroll, 2),
        "feeder_bound_steps_per_s": round(1e3 / (dequeued * ms_per_unroll), 2),
    }


def _directory_bytes(path: str) -> int:
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


def memory_tables(members: list[LaserConfig], layout: str) -> list[reverb.Table]:
    """The server's tables: every member's queue and parameters, and one replay or a replay per member.

    `shared` is `laser.sweep`'s server (`sweep_tables`); `separate` has, in
    place of the one replay, member i's own `replay_<i>`, sized as
    `replay_table` sizes the replay of a lone agent. Both have `SINK_TABLE`,
    where writers warm up (`replay_memory`).
    """
    sink = tables.uniform_replay(SINK_TABLE, SINK_CAPACITY)
    if layout == "shared":
        return [*agent.sweep_tables(members), sink]
    found = [table for member in members for table in agent.own_tables(member)]
    for i, member in enumerate(members):
        name, capacity = replay_name(layout, i), member.replay_capacity_unrolls
        found.append(tables.uniform_replay(name, capacity, min_size=member.min_replay_unrolls))
    return [*found, sink]


def replay_name(layout: str, member: int) -> str:
    return agent.REPLAY_TABLE if layout == "shared" else f"{agent.REPLAY_TABLE}_{member}"


def _serve(members, layout, checkpoint_dir, ports, stop) -> None:
    """The spawned server process: the layout's tables until `stop` is set."""
    checkpointer = reverb.checkpointers.DefaultCheckpointer(checkpoint_dir)
    server = reverb.Server(memory_tables(members, layout), checkpointer=checkpointer)
    ports.put(server.port)
    stop.wait()
    server.stop()


class ServerProcess:
    """A Reverb server in a fresh spawned process, and that process's resident memory."""

    def __init__(self, members: list[LaserConfig], layout: str, checkpoint_dir: pathlib.Path):
        context = multiprocessing.get_context("spawn")
        ports, self._stop = context.Queue(), context.Event()
        args = (members, layout, str(checkpoint_dir), ports, self._stop)
        self._process = context.Process(target=_serve, args=args, daemon=True)
        self._process.start()
        try:
            port = ports.get(timeout=300)
        except queue_lib.Empty:
            self._process.kill()
            exitcode = self._process.exitcode
            raise RuntimeError(f"the {layout} server process did not start (exit code {exitcode})") from None
        self.client = reverb.Client(f"localhost:{port}")

    def rss_bytes(self) -> int:
        """VmRSS of the server's process, after a pause for it to settle."""
        time.sleep(0.5)
        for line in pathlib.Path(f"/proc/{self._process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc: the memory benchmark needs Linux")

    def checkpoint_bytes(self) -> int:
        return _directory_bytes(self.client.checkpoint())

    def stop(self) -> None:
        self._stop.set()
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.kill()


def _fill(feeders: list[Feeder], unrolls: int) -> None:
    """Every feeder to `unrolls`, a round (T steps of each env) at a time, interleaved as concurrent actors are."""
    while any(f.unrolls < unrolls for f in feeders):
        for feeder in feeders:
            if feeder.unrolls < unrolls:
                feeder.write(feeder.unrolls + 1)


def replay_memory(
    base: LaserConfig,
    agents: int,
    capacity: int,
    layout: str,
    recording: Mapping[str, np.ndarray],
    directory: pathlib.Path,
    streams: int = MEMORY_STREAMS,
    warmup_rounds: int = CHUNKER_WARMUP_ROUNDS,
) -> dict:
    """Server memory of the replay(s) of `agents` agents, each of `capacity` observations, each full.

    `layout` (see `memory_tables`): `shared`, one replay all agents write to
    (`capacity` observations in all, a little more: whole rounds); `separate`,
    a replay per agent, each agent filling its own. The server runs in a fresh
    spawned process, so the layouts share no allocator state and the writers'
    own memory is not counted. Each agent writes from this process through its
    own `unroll_adder` of `streams` envs (the recording's first), to its replay
    only: its queue would fill and block without a learner, and a queue item is
    a second reference to the replay item's chunks, dropped once dequeued.

    Reverb's writers tune their chunk lengths as they go, and the server's
    memory per observation falls about 6x over a writer's first ~30 rounds (a
    round: one unroll per env); actors write for hours. So each writer first
    writes `warmup_rounds` rounds into `SINK_TABLE`, then the measurement
    starts. The sink keeps its items, so nothing is freed that the fill could
    reuse (with a sink that evicted, the fill's first half looked ~25%
    cheaper than its second). Measured: the server process's resident
    memory (VmRSS) with the replays empty (`empty`, after the warm-up), after
    half and after all of each agent's writes (`half`, `full`).

    `rss_growth_bytes` = full - empty: what the filled replays take, Reverb's
    chunks (compressed), items and indexes, the gRPC buffers that received
    them, and what the allocator keeps; `marginal` = (full - half) per
    observation added. `checkpoint_bytes`: the tables' Reverb checkpoint on
    disk, a lower bound (serialized chunks and items only).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {LAYOUTS}")
    start = time.perf_counter()
    members = sweep_members(dataclasses.replace(base, replay_capacity=capacity), agents)
    server = ServerProcess(members, layout, directory / layout)
    spec, length = recording_spec(recording), len(recording["action"])
    feeders = [
        Feeder(server.client, spec, m, recording, {SINK_TABLE: 1.0}, offset=i * length // agents, streams=streams)
        for i, m in enumerate(members)
    ]
    warmup = warmup_rounds * streams  # Unrolls per writer.
    _fill(feeders, warmup)
    for i, feeder in enumerate(feeders):
        feeder.retarget({replay_name(layout, i): 1.0})
    names = [replay_name(layout, i) for i in range(1 if layout == "shared" else agents)]
    capacity_unrolls = members[0].replay_capacity_unrolls
    per_agent = math.ceil(capacity_unrolls / agents) if layout == "shared" else capacity_unrolls

    def held() -> int:
        info = server.client.server_info()
        return sum(info[name].current_size for name in names)

    rss, items = {"empty": server.rss_bytes()}, {"empty": held()}
    if items["empty"]:
        raise RuntimeError(f"the warm-up wrote {items['empty']} items into the replay; it must write to the sink")
    for phase, unrolls in (("half", math.ceil(per_agent / 2)), ("full", per_agent)):
        _fill(feeders, warmup + unrolls)
        items[phase], rss[phase] = held(), server.rss_bytes()
    for feeder in feeders:
        feeder.close()
    server.client.reset(SINK_TABLE)  # The checkpoint holds the replays (and empty queues) only.
    checkpoint = server.checkpoint_bytes()
    server.stop()
    T = base.unroll_length
    observations = items["full"] * T
    growth = rss["full"] - rss["empty"]
    marginal = (rss["full"] - rss["half"]) / max((items["full"] - items["half"]) * T, 1)
    return {
        "layout": layout,
        "agents": agents,
        "replay_tables": len(names),
        "capacity_observations_per_table": capacity_unrolls * T,
        "streams_per_agent": streams,
        "warmup_unrolls_per_agent": warmup,
        "unrolls_written": sum(f.unrolls - warmup for f in feeders),
        "observations_held": observations,
        "rss_empty_mb": round(rss["empty"] / 1e6, 1),
        "rss_growth_bytes": growth,
        "rss_growth_mb": round(growth / 1e6, 2),
        "bytes_per_observation": round(growth / observations, 1),
        "marginal_bytes_per_observation": round(marginal, 1),
        "checkpoint_bytes": checkpoint,
        "checkpoint_bytes_per_observation": round(checkpoint / observations, 1),
        "raw_bytes_per_observation": raw_bytes_per_step(recording),
        # The layout with every replay at the paper's 10M observations, at the marginal bytes per observation
        # (the growth per observation also carries the fixed costs of starting to write).
        "gb_at_paper_capacity": round(marginal * PAPER_CAPACITY * len(names) / 1e9, 2),
        "seconds": round(time.perf_counter() - start, 1),
    }


def raw_bytes_per_step(recording: Mapping[str, np.ndarray]) -> int:
    """One env step's fields as arrays, uncompressed."""
    return int(sum(values[0, 0].nbytes for values in recording.values()))
