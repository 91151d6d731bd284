"""Prioritized Double DQN on Reverb: act, store, sample, learn, write priorities back.

PER Algorithm 1 as the shared loop's `Learner` (`common.loop`). One `step`:

1. act `update_period` agent steps epsilon-greedily and store each
   transition at the running maximum priority (line 6; rank-based: rank 1);
2. once the replay holds `min_replay_size` transitions, sample a minibatch of
   k with P(j) = p_j^alpha / sum_i p_i^alpha and IS weights w_j (lines 9-10);
3. one weighted Double DQN update and, every `target_update_period` updates,
   the target network's copy (lines 11, 13, 15 and 16, `per.learner`);
4. write p_j = |delta_j| + epsilon back for exactly the sampled keys (line 12, with §3.3's epsilon;
   rank-based: their new rank's priority).

The replay ratio (PER: one update of 32 per 4 agent steps, 8 samples per
insert) is Reverb's: the table's `SampleToInsertRatio` rate limiter blocks
a sampler that runs ahead of the inserts and an inserter that runs ahead of
the samples. Here the learner acts itself, so its schedule of `update_period`
inserts per batch of `batch_size` samples is the limiter's ratio, and the
limiter only has to tolerate one batch of drift (`validate` checks it can);
with actors in other processes the limiter alone sets the pace. Where the
limiter tolerates two batches and a chunk per env (every preset does), the
learner that acts itself also draws its next batch while it
learns from this one (`overlaps_acting`), as the Ape-X learner always does.

With `num_actors` > 0 (Ape-X style, Horgan et al. 2018) step 1 moves to
actor processes (`run_actor`, `per.actor.ApexActor`) and `ApexAgent` is the
learner: steps 2-4, and every `PARAMS_PERIOD` agent steps it publishes theta
with the running maximum priority and epsilon (`per.actor.Broadcast`). Its
agent steps, and so frames, the beta schedule, epsilon and `--frames`, are
the transitions the table has received (its rate limiter's insert count);
finished games come through the `episodes` queue.

Each env stream's frames are stored once, in chunks of `per.replay.CHUNK_LENGTH`
steps, and transition items reference them (`per.replay.TransitionWriter`,
issue #12; measured by `per.benchmark_memory`). The writers flush every
chunk's worth of transitions rather than before each sample, so the sampler
may not see the newest chunk yet; the rate limiter must tolerate that many
transitions of drift, or the chunks are shortened until it does
(`chunk_length`).

The compiled update is maths only; Reverb calls, counters and numbers for the
log are here, in Python (Acme style). The learner that acts itself passes the
actor's next observations to the update, whose compiled call returns their
greedy actions under the updated theta too (`Learner.update`'s `act_on`): the
next agent step acts as it would have (but where rounding in another graph
breaks a near-tie), without a forward pass of its own, one TF call fewer per
update (the whole policy, at Young & Tian's one update per agent step).

Sampling from Reverb uses Reverb's own random generator, which takes no seed:
with the same seed, runs act alike until learning starts and then differ in
the minibatches drawn.
"""

from __future__ import annotations

import io
import pathlib
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
import reverb
import tensorflow as tf

from common import envs, loop
from common.errors import UsageError
from common.networks import check_fits_env
from common.reverb import tables
from per import networks, td_errors
from per.actor import Actor, ApexActor, Broadcast, publish, read_episodes, store
from per.config import PerConfig
from per.learner import FIELDS, Learner
from per.replay import CHUNK_LENGTH, PrioritizedReplay

REPLAY_TABLE = "replay"
# Finished games' (return, length), from actor processes to the learner. The
# learner drains it every step, so it never nears this size and an actor
# never waits on it.
EPISODES_TABLE = "episodes"
EPISODES_CAPACITY = 10_000
# Agent steps between copies of theta to the actors: the learner publishes
# every PARAMS_PERIOD agent steps of all actors, an actor copies every
# PARAMS_PERIOD of its own. Ape-X's actors copied every 400 frames, 100 Atari
# agent steps (Horgan et al. 2018). At PER's ratio that is 25 updates, small
# against the target network's period (1,000 updates on MinAtar, 7,500 on
# Atari). Publishing every update would not be free: the MinAtar network's
# 0.8 MB took 2.3 ms to publish here (a loaded machine), half an update.
PARAMS_PERIOD = 100
# Updates between the learner's looks at the table's insert count and the
# finished games (one `server_info`, a gRPC call that cost 0.6 ms here, a
# quarter of an update). Frames, epsilon and beta then advance in steps of
# about 32 agent steps at PER's ratio, and a run may end that many late.
COLLECT_PERIOD = 8
# How long the learner's sample waits on the rate limiter (actors stalled, or
# restarting) before the learner looks up, e.g. at a Ctrl-C, and tries again.
SAMPLE_WAIT_MS = 2_000
# The learner's pause between looks at the table while the actors fill it.
FILL_WAIT_S = 0.05


def replay_table(config: PerConfig) -> reverb.Table:
    """The replay: prioritized (alpha; rank-based stores rank^-alpha itself), FIFO, rate limited."""
    return tables.prioritized_replay(
        REPLAY_TABLE, config.replay_capacity, config.replay_config.selector_exponent,
        min_size=config.min_replay_size, samples_per_insert=config.samples_per_insert,
    )  # fmt: skip


def agent_tables(config: PerConfig) -> list[reverb.Table]:
    """The replay; theta and the `Broadcast` for actor processes; their finished games; the run they serve.

    Declared whatever `num_actors` is, so a run resumed with another number
    of actors (an operational field) finds the tables of its checkpoint.
    """
    return [
        replay_table(config),
        tables.variables(),
        tables.queue(EPISODES_TABLE, EPISODES_CAPACITY),
        tables.run_identity(),
    ]


def rate_limiter_tolerance(config: PerConfig) -> float:
    """How many samples the table's rate limiter lets the sampler run ahead or behind of its ratio."""
    info = replay_table(config).info.rate_limiter_info
    return (info.max_diff - info.min_diff) / 2


def overlaps_acting(config: PerConfig) -> bool:
    """Whether the learner that acts itself draws its next batch while it learns (`PrioritizedReplay`'s overlap).

    Its sampler then holds two batches it has not learned from (the one
    drawn, and Reverb's next in flight), beside a full chunk of every env's
    transitions unflushed: the rate limiter must tolerate that much drift, or
    a draw could wait on inserts that only the waiting loop makes. A replay
    whose limiter is too tight (a small `min_replay_size`) samples in turn.
    """
    drift = 2 * config.batch_size + CHUNK_LENGTH * config.envs_per_actor * config.samples_per_insert
    return not config.num_actors and rate_limiter_tolerance(config) >= drift


def unseen_tolerance(config: PerConfig) -> int:
    """Transitions the sampler may miss (written, not flushed) without the rate limiter blocking the loop.

    Beyond the batches of drift the synchronous loop needs (one, `validate`;
    two when it overlaps, `overlaps_acting`), each unflushed transition holds
    back `samples_per_insert` samples.
    """
    ahead = 2 if overlaps_acting(config) else 1
    return int((rate_limiter_tolerance(config) - ahead * config.batch_size) // config.samples_per_insert)


def chunk_length(config: PerConfig) -> int:
    """Steps per chunk: `CHUNK_LENGTH`, or fewer if the limiter cannot tolerate a chunk of every env unflushed."""
    return max(1, min(CHUNK_LENGTH, unseen_tolerance(config) // config.envs_per_actor))


def frame_stack(config: PerConfig) -> int:
    """k, the frames an observation stacks: Atari's `frame_stack`; 1 (an observation is one frame) elsewhere."""
    return getattr(envs.resolve_options(config.env, **dict(config.env_options)), "frame_stack", 1)


def make_replay(config: PerConfig, client: reverb.Client, **options) -> PrioritizedReplay:
    """The agent's replay client: frames stored once, flushed every chunk of every env stream.

    `options`: `PrioritizedReplay`'s `sole_writer`, `sample_timeout_ms` and `overlap`.
    """
    length = chunk_length(config)
    return PrioritizedReplay(
        client, config.replay_config, REPLAY_TABLE, flush_every=length * config.envs_per_actor,
        frame_stack=frame_stack(config), chunk_length=length, max_unseen=unseen_tolerance(config), **options,
    )  # fmt: skip


def spaces(config: PerConfig) -> tuple[gym.spaces.Box, int]:
    """The env's observation space and number of actions."""
    env = envs.make(config.env, seed=0, **dict(config.env_options))
    space, num_actions = env.observation_space, int(env.action_space.n)
    env.close()
    return space, num_actions


class ReplayState(tf.train.experimental.PythonState):
    """`PrioritizedReplay`'s client-side state in the TF checkpoint.

    Reverb checkpoints the table (items, priorities, the rate limiter's
    counts); what Reverb cannot know lives in the client: the insert count,
    the running maximum priority of Algorithm 1, the rank-based variant's
    |delta| per key and sorted snapshot, and with global_min weights the
    proportional variant's written priorities (`per.replay.LiveMinimum`).
    """

    def __init__(self, replay: PrioritizedReplay):
        self.replay = replay

    def serialize(self) -> bytes:
        r = self.replay
        arrays = {
            "counters": np.array([r.inserted, r._updates], np.int64),
            "priorities": np.array([r.max_priority], np.float64),
        }
        if r.live_minimum is not None:
            written = r.live_minimum.written
            keys = np.fromiter(written, np.uint64, len(written))
            arrays.update(
                min_keys=keys,
                min_written=np.array([written[int(k)] for k in keys], np.float64).reshape(-1, 2),
                min_floor=np.array(r.live_minimum.floor or [], np.float64),
            )
        if r._rank is not None:
            keys = np.fromiter(r._rank._delta, np.uint64, len(r._rank._delta))
            arrays.update(
                rank_keys=keys,
                rank_delta=np.array([r._rank._delta[int(k)] for k in keys], np.float64),
                rank_inserted_at=np.array([r._rank._inserted_at[int(k)] for k in keys], np.int64),
                rank_snapshot=np.array(r._rank._snapshot, np.float64),
                rank_unseen=np.array(r._rank._unseen, np.int64),
                rank_max_rank=np.array(r._rank.max_rank, np.int64),
            )
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    def deserialize(self, string_value: bytes) -> None:
        r = self.replay
        with np.load(io.BytesIO(string_value)) as arrays:
            r.inserted, r._updates = (int(x) for x in arrays["counters"])
            # A checkpoint from before `LiveMinimum` also holds the smallest priority ever written.
            r.max_priority, *smallest = (float(x) for x in arrays["priorities"])
            if r.live_minimum is not None:
                r.live_minimum.restore(*written_priorities(arrays, smallest, r.inserted))
            if r._rank is not None:
                keys = [int(k) for k in arrays["rank_keys"]]
                r._rank._delta = dict(zip(keys, arrays["rank_delta"].tolist()))
                r._rank._inserted_at = dict(zip(keys, arrays["rank_inserted_at"].tolist()))
                r._rank._snapshot = arrays["rank_snapshot"]
                r._rank._unseen = int(arrays["rank_unseen"])
                # A checkpoint from before `max_rank`: the largest rank of its last re-rank.
                default = r._rank._unseen + len(r._rank._snapshot)
                r._rank.max_rank = int(arrays["rank_max_rank"]) if "rank_max_rank" in arrays else max(default, 1)


def written_priorities(arrays: Any, smallest: list[float], inserted: int) -> tuple[dict, tuple | None]:
    """`LiveMinimum.restore`'s arguments from a checkpoint's arrays.

    One saved before `LiveMinimum` kept only the smallest priority ever
    written: it bounds that run's live items until they are evicted.
    """
    if "min_keys" not in arrays:
        return {}, (smallest[0], inserted) if smallest else None
    written = {int(k): (float(p), int(at)) for k, (p, at) in zip(arrays["min_keys"], arrays["min_written"])}
    floor = arrays["min_floor"].tolist()
    return written, (floor[0], int(floor[1])) if floor else None


class Serialized(tf.train.experimental.PythonState):
    """A checkpoint entry for an object with `serialize() -> bytes` and `deserialize(bytes)`."""

    def __init__(self, value: Any):
        self.value = value

    def serialize(self) -> bytes:
        return self.value.serialize()

    def deserialize(self, string_value: bytes) -> None:
        self.value.deserialize(string_value)


class PrioritizedDqn:
    """What both learners share: the networks, the Double DQN learner, the replay client, one update.

    `DqnAgent` acts itself; `ApexAgent` learns from actor processes. With
    `td_error_snapshot_frames` set, the learner also logs the sampled items'
    |delta| for PER App. Fig. 10 into `run_dir` (`per.td_errors`).
    """

    def __init__(
        self, config: PerConfig, client: reverb.Client, seed: int, run_dir: pathlib.Path | None, **replay_options
    ):
        tf.random.set_seed(seed)  # The networks' initial weights.
        space, num_actions = spaces(config)
        self.observation_space = space
        online = networks.make(config, space, num_actions, name="q_network")
        target = networks.make(config, space, num_actions, name="target_q_network")
        self.config, self.client = config, client
        self.learner = Learner(config, online, target)
        self.replay = make_replay(config, client, **replay_options)
        self.replay_state = ReplayState(self.replay)
        self.td_errors = None
        if config.td_error_snapshot_frames and run_dir is not None:
            self.td_errors = td_errors.TdErrorLog(
                run_dir / td_errors.FILE, config.td_error_snapshot_frames, config.replay_capacity
            )
        self._items = 0  # Transitions in the table (set by `start`).

    frames = property(lambda self: self.learner.frames)
    steps = property(lambda self: self.learner.update_count)

    def state(self) -> dict[str, Any]:
        state = {"learner": self.learner, "replay": self.replay_state}
        if self.td_errors is not None:
            state["td_errors"] = Serialized(self.td_errors)
        return state

    def start(self) -> None:
        """After the checkpoint's restore.

        Learning waits for the transitions the table holds, not for those the
        checkpoint counted: a replay checkpoint that is missing or older (a
        run killed between the two saves) refills first instead of waiting
        forever on a sample the rate limiter cannot allow.
        """
        self.learner.restored()
        self._items = self.client.server_info()[REPLAY_TABLE].current_size
        expected = min(self.replay.inserted, self.config.replay_capacity)
        if self._items < expected:
            print(
                f"warning: the replay holds {self._items} transitions, the checkpoint {expected} (its Reverb "
                f"checkpoint is missing or older); learning waits until it holds {self.config.min_replay_size}",
                file=sys.stderr, flush=True,
            )  # fmt: skip

    def learn(self, beta: float, batch, act_on: np.ndarray | None = None) -> tuple[dict[str, float], np.ndarray | None]:
        """Algorithm 1, lines 11-14 and 12's priorities, on a sampled `batch`: the numbers for the log, and
        `act_on`'s greedy actions under the updated theta if given (`Learner.update`)."""
        update = self.learner.update(dict(zip(FIELDS, batch.data)), batch.weights, act_on)
        if self.td_errors is not None:
            self.td_errors.record(batch.keys, update.td_error, self.replay.inserted_at(batch.keys))
            self.td_errors.maybe_snapshot(self.frames, self.replay.inserted, batch.table_size)
        metrics = {
            "loss": update.loss, "epsilon": self.learner.epsilon(),
            "mean_abs_td_error": float(np.abs(update.td_error).mean()),
        }  # fmt: skip
        if self.config.replay != "uniform":  # Uniform replay ignores priorities, and its weights are all 1.
            self.replay.update(batch.keys, update.td_error)
            metrics.update(
                beta=beta, max_priority=self.replay.max_priority, min_importance_weight=float(batch.weights.min())
            )
        return metrics, update.greedy

    def progress(self) -> dict[str, float]:
        progress = {
            "replay": self.client.server_info()[REPLAY_TABLE].current_size,
            "epsilon": round(self.learner.epsilon(), 4),
        }
        if self.config.replay != "uniform":  # Beta anneals for uniform replay too, and weighs nothing.
            progress["beta"] = round(self.learner.beta(), 4)
        return progress

    def before_save(self) -> None:
        self.learner.sync_counters()

    def save_extra(self) -> None:
        """Reverb's tables, into RUN_DIR/replay (the server's checkpointer), with every transition added."""
        self.replay.flush()
        self.client.checkpoint()

    def close(self) -> None:
        self.replay.close()


class DqnAgent(PrioritizedDqn):
    """The loop's learner: the synchronous prioritized Double DQN loop on a Reverb replay."""

    def __init__(
        self, config: PerConfig, client: reverb.Client, seed: int | None = None, run_dir: pathlib.Path | None = None
    ):
        seed = config.seed if seed is None else seed
        super().__init__(config, client, seed, run_dir, overlap=overlaps_acting(config))
        env = envs.make_batched(config.env, config.envs_per_actor, seed=seed, **dict(config.env_options))
        self.actor = Actor(self.learner.network, env, seed)
        self._owed = 0  # Batches to learn (> 0) or to act (< 0) alone first: `_batches_off_centre`.
        # argmax_a Q(S_t, a; theta) of the actor's next observations, from the last update's call (`learn`).
        self._greedy: np.ndarray | None = None

    def start(self) -> None:
        super().start()
        self._owed = self._batches_off_centre() if self.learning_started() else 0

    def _batches_off_centre(self) -> int:
        """Batches by which the replay's rate limiter stands off the centre that this loop keeps it near.

        Actor processes (a sitting with `--actors`) leave the limiter at an
        edge: actors ahead at max_diff, or the learner ahead at min_diff.
        Resumed in one process, the loop's next insert (or draw) would then
        wait for the draw (or insert) that only the loop itself makes after
        it: for ever (seen). Beyond the loop's own drift, the loop first
        learns (or acts) alone as many batches as the limiter is off centre:
        the draws the actors' transitions were owed, or the transitions
        owed to the draws. This loop's own checkpoints stand within two
        batches of the centre (one drawn ahead when sampling overlaps acting),
        and resume as they were.
        """
        info = self.client.server_info()[REPLAY_TABLE].rate_limiter_info
        diff = info.insert_stats.completed * info.samples_per_insert - info.sample_stats.completed
        off = diff - (info.max_diff + info.min_diff) / 2
        return int(off / self.config.batch_size) if abs(off) > 2 * self.config.batch_size else 0

    def act(self) -> list[tuple[float, int]]:
        """`update_period` agent steps, each transition stored; the games that ended."""
        episodes = []
        epsilon = self.learner.epsilon()  # Held for the update_period agent steps before an update.
        for _ in range(self.config.update_period // self.config.envs_per_actor):
            transitions, ended = self.actor.step(epsilon, self._greedy)
            self._greedy = None  # Acted on: the env has moved to new observations.
            store(self.replay, transitions)
            episodes += ended
        self.learner.count_agent_steps(self.config.update_period)
        self._items = min(self._items + self.config.update_period, self.config.replay_capacity)
        return episodes

    def learning_started(self) -> bool:
        # The first batch comes one act() after the replay reached its minimum
        # size, so the limiter has a batch's worth of inserts to allow it.
        return self._items >= self.config.min_replay_size + self.config.update_period

    def step(self) -> loop.Step:
        owed, self._owed = self._owed, self._owed - int(np.sign(self._owed))
        # Draws owed to the actors' transitions (owed > 0): learn before inserting again.
        episodes = [] if owed > 0 else self.act()
        if owed == -1:  # The last of the transitions owed to the draws: let the limiter see them.
            self.replay.flush()
        if owed < 0 or not self.learning_started():
            # The loop needs a finite "loss": 0 while acting alone.
            return loop.Step({"loss": 0.0, "epsilon": self.learner.epsilon()}, episodes)
        beta = self.learner.beta()
        batch = self.replay.sample(self.config.batch_size, beta)
        # The next act() reads theta after this update: its greedy actions come from the update's own call.
        metrics, self._greedy = self.learn(beta, batch, act_on=self.actor.observation)
        return loop.Step(metrics, episodes)


class ApexAgent(PrioritizedDqn):
    """The loop's learner when actor processes act (Ape-X style): sample, update, write priorities, publish.

    Nothing here paces the actors: the replay's rate limiter holds the ratio
    of samples to inserts, blocking whichever side runs ahead. Every
    `COLLECT_PERIOD` updates (every step while the replay fills) it reads the
    table's insert count (one `server_info`), which advances the agent steps
    and the replay's insertion count, and takes the finished games from the
    `episodes` queue; they are logged with the next step that returns (a
    sample that timed out returns None, and keeps them). The replay overlaps
    its sampling and priority writes with the update (`PrioritizedReplay`'s
    `overlap`).
    Transitions the actors insert between a checkpoint's two saves (the
    networks and counters, then Reverb's tables) are in the saved replay but
    in no count: a resumed run counts inserts from its table's count at start.
    """

    def __init__(self, config: PerConfig, client: reverb.Client, run_dir: pathlib.Path | None = None):
        super().__init__(
            config, client, config.seed, run_dir, sole_writer=False, sample_timeout_ms=SAMPLE_WAIT_MS, overlap=True
        )
        space = self.observation_space
        self.replay.expect_transitions(np.zeros(space.shape, space.dtype))
        self._table_inserts = 0  # The rate limiter's insert count, as last read.
        self._published_at = 0  # Agent steps at the last publish.
        self._episodes: list[tuple[float, int]] = []

    def start(self) -> None:
        """After the checkpoint's restore: counts inserts from here on, publishes theta for the actors."""
        super().start()
        self._table_inserts = self._insert_count(self.client.server_info())
        self._publish()

    def step(self) -> loop.Step | None:
        if self._items < self.config.min_replay_size or self.learner.update_count % COLLECT_PERIOD == 0:
            self._collect()
        if self.learner.agent_step_count - self._published_at >= PARAMS_PERIOD:
            self._publish()
        if self._items < self.config.min_replay_size:
            time.sleep(FILL_WAIT_S)  # The actors fill the replay; the loop logs progress meanwhile.
            return loop.Step({"loss": 0.0, "epsilon": self.learner.epsilon()}, self._take_episodes())
        beta = self.learner.beta()
        batch = self.replay.sample(self.config.batch_size, beta)
        if batch is None:  # The limiter held the sample back: the actors are behind, or gone.
            return None
        metrics, _ = self.learn(beta, batch)
        return loop.Step(metrics, self._take_episodes())

    @staticmethod
    def _insert_count(info: dict) -> int:
        return info[REPLAY_TABLE].rate_limiter_info.insert_stats.completed

    def _collect(self) -> None:
        """Counts the transitions the actors inserted since the last look, and takes their finished games."""
        info = self.client.server_info()
        inserts = self._insert_count(info)
        new, self._table_inserts = inserts - self._table_inserts, inserts
        self.learner.count_agent_steps(new)
        self.replay.count_inserts(new)
        self._items = info[REPLAY_TABLE].current_size
        finished = info[EPISODES_TABLE].current_size
        if finished:
            self._episodes += read_episodes(self.client, EPISODES_TABLE, finished)

    def _take_episodes(self) -> list[tuple[float, int]]:
        episodes, self._episodes = self._episodes, []
        return episodes

    def _publish(self) -> None:
        publish(self.client, self.learner.network, Broadcast(self.replay.max_priority, self.learner.epsilon()))
        self._published_at = self.learner.agent_step_count


def make_agent(config: PerConfig, client: reverb.Client, address: str, directory: pathlib.Path) -> PrioritizedDqn:
    warn_if_never_learns(config)
    return ApexAgent(config, client, directory) if config.num_actors else DqnAgent(config, client, run_dir=directory)


def warn_if_never_learns(config: PerConfig) -> None:
    """A budget that ends before the first update (`DqnAgent.learning_started`) is legal, a set-up check say,
    but says so: said once the start can no longer be refused, so that a refusal stays one line."""
    steps = config.total_frames // config.frames_per_step
    first_update = config.min_replay_size + config.update_period
    if steps < first_update:
        print(
            f"warning: total_frames={config.total_frames:,} is {steps:,} agent steps; the first update comes "
            f"after {first_update:,} (min_replay_size + update_period): the learner will not update",
            file=sys.stderr, flush=True,
        )  # fmt: skip


def run_actor(config: PerConfig, client: reverb.Client, seed: int) -> None:
    """An actor process (`common.launch`): acts with `seed`'s envs until the process ends."""
    make_actor(config, client, seed).run()


def make_actor(config: PerConfig, client: reverb.Client, seed: int) -> ApexActor:
    """An actor process's loop: its own envs and copy of the online network, writing into the shared replay."""
    space, num_actions = spaces(config)
    network = networks.make(config, space, num_actions, name="q_network")
    env = envs.make_batched(config.env, config.envs_per_actor, seed=seed, **dict(config.env_options))
    replay = make_replay(config, client, sole_writer=False)
    return ApexActor(Actor(network, env, seed), replay, client, EPISODES_TABLE, PARAMS_PERIOD)


def validate(config: PerConfig) -> None:
    """What the config cannot show alone: the env's observations, and the loop against the rate limiter."""
    check_fits_env(config)
    tolerance = rate_limiter_tolerance(config)
    if not config.num_actors and tolerance < config.batch_size:
        raise UsageError(
            f"min_replay_size={config.min_replay_size} is too small for the replay's rate limiter: it tolerates "
            f"{tolerance:g} samples of drift, and one process that inserts update_period={config.update_period} "
            f"transitions per batch needs a batch ({config.batch_size}) or it blocks itself; raise min_replay_size"
        )
