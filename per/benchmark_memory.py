"""Benchmark: replay memory per transition, one-step items vs frames stored once (issue #12).

    python -m per.benchmark_memory [--transitions 20000] [--env atari:pong]

One stream of transitions fills two replays side by side. The env (with the
options of its family's prioritized preset; Atari: a life loss is terminal)
is stepped by the agent's `Actor` at epsilon 1, so actions are uniform, and
every transition goes to both:

* `one_step_items`, the storage before issue #12: `PrioritizedReplay.add`,
  an item of one-step chunks of every column, S_{j-1} and S_j in full;
* `frames_once`, the agent's storage (`per.agent.make_replay`,
  `add_transition`): each frame once, in chunks of `chunk_length` steps,
  items referencing the frames of S_{j-1} and S_j.

Each table lives in its own server process, so what is measured is that
process's alone (the env, the networks and the client's arrays are not in it):

* `rss`: the server's resident memory growth over the fill, per transition;
  `rss_marginal`: the same over the second half of the fill, where fixed
  costs have been paid. This is the number reported and extrapolated to
  10^6 transitions: what a full replay costs in RAM, with the compressed
  chunks, the items, the table's indexes and the allocator's overhead.
  Reverb keeps no byte count of its own (its `TableInfo` has none).
* `checkpoint`: the size on disk of the table's Reverb checkpoint, the
  serialized chunks and items only: a lower bound.

Results: stdout and results/per/benchmarks/memory.{csv,md}.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import pathlib
import tempfile
import time

import numpy as np
import reverb
from absl import flags

from common import cli, envs, provenance
from common.errors import UsageError
from common.results import check_keeps_measurement, chosen_dir, write_csv
from common.reverb import tables
from per import agent, networks
from per.actor import Actor
from per.config import PRESETS, PerConfig
from per.replay import PrioritizedReplay

flags.DEFINE_integer("transitions", 20_000, "Transitions to store in each replay (at least 1,000).")
flags.DEFINE_string("env", "atari:pong", "The env whose observations are stored, FAMILY:NAME (not dmlab).")
flags.DEFINE_string(
    "out", None, "Output directory (default results/per/benchmarks, where a measurement under other flags is refused)."
)
FLAGS = flags.FLAGS

TARGET_BYTES_PER_TRANSITION = 2.5e9 / 1e6  # Issue #12: at most 2.5 GB per 10^6 Atari transitions.
PRESET_OF_FAMILY = {"atari": "atari_ddqn_prop", "minatar": "minatar_ddqn_prop", "toy": "toy"}
STORAGES = ("one_step_items", "frames_once")


def _serve(capacity: int, exponent: float, checkpoint_dir: str, ports, stop) -> None:
    """The child process: one prioritized replay table until `stop` is set."""
    table = tables.prioritized_replay(agent.REPLAY_TABLE, capacity, exponent)
    server = reverb.Server([table], checkpointer=reverb.checkpointers.DefaultCheckpointer(checkpoint_dir))
    ports.put(server.port)
    stop.wait()
    server.stop()


class ServerProcess:
    """A Reverb server in a child process, and that process's resident memory."""

    def __init__(self, config: PerConfig, checkpoint_dir: pathlib.Path):
        context = multiprocessing.get_context("spawn")
        ports, self._stop = context.Queue(), context.Event()
        args = (config.replay_capacity, config.replay_config.selector_exponent, str(checkpoint_dir), ports, self._stop)
        self._process = context.Process(target=_serve, args=args, daemon=True)
        self._process.start()
        self.client = reverb.Client(f"localhost:{ports.get(timeout=120)}")

    def rss_bytes(self) -> int:
        time.sleep(0.5)  # Let the server finish the inserts it has acknowledged.
        for line in pathlib.Path(f"/proc/{self._process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc: this benchmark needs Linux")

    def checkpoint_bytes(self) -> int:
        path = pathlib.Path(self.client.checkpoint())
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

    def stop(self) -> None:
        self._stop.set()
        self._process.join(timeout=60)


def benchmark_config(env: str, transitions: int) -> PerConfig:
    """The env family's prioritized preset for `env`, with room for every transition."""
    family, _ = envs.parse(env)
    if family not in PRESET_OF_FAMILY:
        raise UsageError(f"--env={env}: PER has no {family} preset; use one of {', '.join(PRESET_OF_FAMILY)}")
    preset = PRESETS[PRESET_OF_FAMILY[family]]
    return dataclasses.replace(preset, env=env, replay_capacity=max(transitions, preset.replay_capacity))


def measure(config: PerConfig, transitions: int, directory: pathlib.Path) -> list[dict]:
    servers = {name: ServerProcess(config, directory / name) for name in STORAGES}
    replays = {
        "one_step_items": PrioritizedReplay(servers["one_step_items"].client, config.replay_config, agent.REPLAY_TABLE),
        "frames_once": agent.make_replay(config, servers["frames_once"].client),
    }
    add = {"one_step_items": lambda t, stream: replays["one_step_items"].add(t)}
    add["frames_once"] = replays["frames_once"].add_transition
    space, num_actions = agent.spaces(config)
    env = envs.make_batched(config.env, config.envs_per_actor, seed=0, **dict(config.env_options))
    actor = Actor(networks.make(config, space, num_actions, name="q_network"), env, seed=0)
    rss = {name: [server.rss_bytes()] for name, server in servers.items()}
    seconds = dict.fromkeys(STORAGES, 0.0)
    stored, naive_bytes = 0, 0
    for half in (transitions // 2, transitions):
        while stored < half:
            batch, _ = actor.step(1.0)  # Uniform actions.
            for stream, transition in enumerate(batch[: half - stored]):
                naive_bytes = sum(np.asarray(x).nbytes for x in transition)
                for name in STORAGES:
                    start = time.perf_counter()
                    add[name](transition, stream)
                    seconds[name] += time.perf_counter() - start
            stored += len(batch[: half - stored])
        for name in STORAGES:
            replays[name].flush()
            rss[name].append(servers[name].rss_bytes())
    env.close()
    rows = []
    for name in STORAGES:
        size = servers[name].client.server_info()[agent.REPLAY_TABLE].current_size
        if size != transitions:
            raise RuntimeError(f"{name}: the table holds {size} items, not {transitions}")
        before, middle, after = rss[name]
        marginal = (after - middle) / (transitions - transitions // 2)
        rows.append(
            {
                "storage": name,
                "env": config.env,
                "transitions": transitions,
                "chunk_length": agent.chunk_length(config) if name == "frames_once" else 1,
                "naive_bytes_per_transition": naive_bytes,
                "rss_bytes_per_transition": round((after - before) / transitions),
                "rss_marginal_bytes_per_transition": round(marginal),
                "checkpoint_bytes_per_transition": round(servers[name].checkpoint_bytes() / transitions),
                "gb_per_1e6_transitions": round(marginal * 1e6 / 1e9, 2),
                "insert_us_per_transition": round(1e6 * seconds[name] / transitions, 1),
            }
        )
        replays[name].close()
        servers[name].stop()
    return rows


def markdown(rows: list[dict], wall_time_s: float, provenance_name: str) -> str:
    env, transitions = rows[0]["env"], rows[0]["transitions"]
    lines = [
        f"# Replay memory per transition ({env}, {transitions:,} transitions, benchmark scale)",
        "",
        f"Produced by `{provenance.command()}` (see its docstring and `{provenance_name}`).",
        "One stream of transitions (uniform random actions) fills two replays, each table in its own",
        "server process. `RSS`: the server's resident memory growth per transition, over the whole",
        "fill and over its second half (marginal, fixed costs paid): the RAM a replay costs, items,",
        "indexes and allocator overhead included; the marginal one is extrapolated to 10^6.",
        "`checkpoint`: the table's Reverb checkpoint on disk (chunks and items only, a lower bound).",
        "`naive`: S_{j-1} and S_j stored as arrays, uncompressed. `insert µs`: the client's time per",
        "transition, to a server in another process (the agent's server is in-process).",
        "",
        "| storage | chunk length | naive B | RSS B | RSS marginal B | checkpoint B "
        "| GB per 10^6 | target GB | insert µs (gRPC) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['storage']} | {row['chunk_length']} | {row['naive_bytes_per_transition']:,} "
            f"| {row['rss_bytes_per_transition']:,} | {row['rss_marginal_bytes_per_transition']:,} "
            f"| {row['checkpoint_bytes_per_transition']:,} | {row['gb_per_1e6_transitions']:.2f} "
            f"| {TARGET_BYTES_PER_TRANSITION * 1e6 / 1e9:.1f} | {row['insert_us_per_transition']:.1f} |"
        )
    old, new = rows
    ratio = old["rss_marginal_bytes_per_transition"] / max(new["rss_marginal_bytes_per_transition"], 1)
    verdict = "meet" if new["gb_per_1e6_transitions"] <= TARGET_BYTES_PER_TRANSITION * 1e6 / 1e9 else "miss"
    lines += [
        "",
        f"Frames stored once take {ratio:.1f}x less server memory per transition (marginal RSS) than one-step",
        f"items, and {verdict} the issue's target of 2.5 GB per 10^6 transitions by linear extrapolation from",
        f"{transitions:,} (not measured at 10^6 on this machine). Wall time {wall_time_s:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    if FLAGS.transitions < 1_000:
        raise UsageError(f"--transitions={FLAGS.transitions}: must be >= 1000 (the marginal cost needs a fill)")
    config = benchmark_config(FLAGS.env, FLAGS.transitions)
    family, name = envs.parse(FLAGS.env)
    stem = "memory" if FLAGS.env == "atari:pong" else f"memory_{family}_{name}"
    out = chosen_dir("--out", FLAGS.out, "per", "benchmarks")
    check_keeps_measurement(out, stem, "out")
    start = time.time()
    with tempfile.TemporaryDirectory() as directory:
        rows = measure(config, FLAGS.transitions, pathlib.Path(directory))
    wall_time = time.time() - start
    report = markdown(rows, wall_time, f"{stem}.provenance.json")
    print(report)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"{stem}.csv", rows)
    (out / f"{stem}.md").write_text(report)
    provenance.write(
        out, f"{stem}.provenance.json", seeds=[0], frames=FLAGS.transitions * config.frames_per_step,
        config={"transitions": FLAGS.transitions, "env": FLAGS.env, "env_options": dict(config.env_options),
                "envs_per_actor": config.envs_per_actor, "chunk_length": agent.chunk_length(config)},
        wall_time_s=wall_time, scale="benchmark",
    )  # fmt: skip


if __name__ == "__main__":
    cli.run(main)
