"""Prioritized Double DQN on Reverb: act, store, sample, learn, write priorities back.

PER Algorithm 1 as the shared loop's `Learner` (`common.loop`). One `step`:

1. act `update_period` agent steps epsilon-greedily and store each
   transition at the running maximum priority (line 6; rank-based: rank 1);
2. once the replay holds `min_replay_size` transitions, sample a minibatch of
   k with P(j) = p_j^alpha / sum_i p_i^alpha and IS weights w_j (lines 9-10);
3. one weighted Double DQN update (lines 11-14, `per.learner`);
4. write p_j = |delta_j| + epsilon back for exactly the sampled keys (line 12;
   rank-based: their new rank's priority).

The replay ratio (PER: one update of 32 per 4 agent steps, 8 samples per
insert) is Reverb's: the table's `SampleToInsertRatio` rate limiter blocks
a sampler that runs ahead of the inserts and an inserter that runs ahead of
the samples. Here the learner acts itself, so its schedule of `update_period`
inserts per batch of `batch_size` samples is the limiter's ratio, and the
limiter only has to tolerate one batch of drift (`validate` checks it can);
with actors in other processes the limiter alone sets the pace.

Each env stream's frames are stored once, in chunks of `CHUNK_LENGTH`
steps, and transition items reference them (`per.replay.TransitionWriter`,
issue #12; measured by `per.benchmark_memory`). The writers flush every
chunk's worth of transitions rather than before each sample, so the sampler
may not see the newest chunk yet; the rate limiter must tolerate that many
transitions of drift, or the chunks are shortened until it does
(`chunk_length`).

The compiled update is maths only; Reverb calls, counters and numbers for the
log are here, in Python (Acme style). Sampling from Reverb uses Reverb's own
random generator, which takes no seed: with the same seed, runs act alike
until learning starts and then differ in the minibatches drawn.
"""

from __future__ import annotations

import io
import pathlib
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import reverb
import tensorflow as tf

from common import envs, loop
from common.errors import UsageError
from common.networks import check_fits_env
from common.reverb import tables
from per import networks
from per.actor import Actor
from per.config import PerConfig
from per.learner import FIELDS, Learner
from per.replay import PrioritizedReplay

REPLAY_TABLE = "replay"
# Steps of an env stream per Reverb chunk. Longer chunks compress better (a
# chunk of 32 Pong frames costs a fraction of 32 one-frame chunks); see
# results/per/benchmarks/memory.md.
CHUNK_LENGTH = 32


def replay_table(config: PerConfig) -> reverb.Table:
    """The replay: prioritized (alpha; rank-based stores rank^-alpha itself), FIFO, rate limited."""
    return tables.prioritized_replay(
        REPLAY_TABLE, config.replay_capacity, config.replay_config.selector_exponent,
        min_size=config.min_replay_size, samples_per_insert=config.samples_per_insert,
    )  # fmt: skip


def rate_limiter_tolerance(config: PerConfig) -> float:
    """How many samples the table's rate limiter lets the sampler run ahead or behind of its ratio."""
    info = replay_table(config).info.rate_limiter_info
    return (info.max_diff - info.min_diff) / 2


def unseen_tolerance(config: PerConfig) -> int:
    """Transitions the sampler may miss (written, not flushed) without the rate limiter blocking the loop.

    Beyond the batch of drift the synchronous loop needs (`validate`), each
    unflushed transition holds back `samples_per_insert` samples.
    """
    return int((rate_limiter_tolerance(config) - config.batch_size) // config.samples_per_insert)


def chunk_length(config: PerConfig) -> int:
    """Steps per chunk: `CHUNK_LENGTH`, or fewer if the limiter cannot tolerate a chunk of every env unflushed."""
    return max(1, min(CHUNK_LENGTH, unseen_tolerance(config) // config.envs_per_actor))


def frame_stack(config: PerConfig) -> int:
    """k, the frames an observation stacks: Atari's `frame_stack`; 1 (an observation is one frame) elsewhere."""
    return getattr(envs.resolve_options(config.env, **dict(config.env_options)), "frame_stack", 1)


def make_replay(config: PerConfig, client: reverb.Client) -> PrioritizedReplay:
    """The agent's replay client: frames stored once, flushed every chunk of every env stream."""
    length = chunk_length(config)
    return PrioritizedReplay(
        client, config.replay_config, REPLAY_TABLE, flush_every=length * config.envs_per_actor,
        frame_stack=frame_stack(config), chunk_length=length, max_unseen=unseen_tolerance(config),
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
    the running maximum (and minimum) priority of Algorithm 1, and the
    rank-based variant's |delta| per key and sorted snapshot.
    """

    def __init__(self, replay: PrioritizedReplay):
        self.replay = replay

    def serialize(self) -> bytes:
        r = self.replay
        arrays = {
            "counters": np.array([r.inserted, r._updates], np.int64),
            "priorities": np.array([r.max_priority, r.min_priority], np.float64),
        }
        if r._rank is not None:
            keys = np.fromiter(r._rank._delta, np.uint64, len(r._rank._delta))
            arrays.update(
                rank_keys=keys,
                rank_delta=np.array([r._rank._delta[int(k)] for k in keys], np.float64),
                rank_inserted_at=np.array([r._rank._inserted_at[int(k)] for k in keys], np.int64),
                rank_snapshot=np.array(r._rank._snapshot, np.float64),
                rank_unseen=np.array(r._rank._unseen, np.int64),
            )
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    def deserialize(self, string_value: bytes) -> None:
        r = self.replay
        with np.load(io.BytesIO(string_value)) as arrays:
            r.inserted, r._updates = (int(x) for x in arrays["counters"])
            r.max_priority, r.min_priority = (float(x) for x in arrays["priorities"])
            if r._rank is not None:
                keys = [int(k) for k in arrays["rank_keys"]]
                r._rank._delta = dict(zip(keys, arrays["rank_delta"].tolist()))
                r._rank._inserted_at = dict(zip(keys, arrays["rank_inserted_at"].tolist()))
                r._rank._snapshot = arrays["rank_snapshot"].tolist()
                r._rank._unseen = int(arrays["rank_unseen"])


class DqnAgent:
    """The loop's learner: the synchronous prioritized Double DQN loop on a Reverb replay."""

    def __init__(self, config: PerConfig, client: reverb.Client, seed: int | None = None):
        seed = config.seed if seed is None else seed
        tf.random.set_seed(seed)  # The networks' initial weights.
        space, num_actions = spaces(config)
        online = networks.make(config, space, num_actions, name="q_network")
        target = networks.make(config, space, num_actions, name="target_q_network")
        self.config, self.client = config, client
        self.learner = Learner(config, online, target)
        self.replay = make_replay(config, client)
        self.replay_state = ReplayState(self.replay)
        env = envs.make_batched(config.env, config.envs_per_actor, seed=seed, **dict(config.env_options))
        self.actor = Actor(online, env, seed)
        self._items = 0  # Transitions in the table (set by `start`).

    frames = property(lambda self: self.learner.frames)
    steps = property(lambda self: self.learner.update_count)

    def state(self) -> dict[str, Any]:
        return {"learner": self.learner, "replay": self.replay_state}

    def start(self) -> None:
        """After the checkpoint's restore; nothing to publish: the learner acts itself.

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

    def act(self) -> list[tuple[float, int]]:
        """`update_period` agent steps, each transition stored; the games that ended."""
        episodes = []
        epsilon = self.learner.epsilon()  # Held for the update_period agent steps before an update.
        for _ in range(self.config.update_period // self.config.envs_per_actor):
            transitions, ended = self.actor.step(epsilon)
            for stream, transition in enumerate(transitions):
                self.replay.add_transition(transition, stream)
            self.learner.count_agent_steps(len(transitions))
            self._items = min(self._items + len(transitions), self.config.replay_capacity)
            episodes += ended
        return episodes

    def learning_started(self) -> bool:
        # The first batch comes one act() after the replay reached its minimum
        # size, so the limiter has a batch's worth of inserts to allow it.
        return self._items >= self.config.min_replay_size + self.config.update_period

    def step(self) -> loop.Step:
        episodes = self.act()
        if not self.learning_started():
            # The loop needs a finite "loss": 0 until learning starts.
            return loop.Step({"loss": 0.0, "epsilon": self.learner.epsilon()}, episodes)
        beta = self.learner.beta()
        batch = self.replay.sample(self.config.batch_size, beta)
        update = self.learner.update(dict(zip(FIELDS, batch.data)), batch.weights)
        if self.config.replay != "uniform":  # Uniform replay ignores priorities.
            self.replay.update(batch.keys, update.td_error)
        metrics = {
            "loss": update.loss, "epsilon": self.learner.epsilon(), "beta": beta,
            "mean_abs_td_error": float(np.abs(update.td_error).mean()), "max_priority": self.replay.max_priority,
            "min_importance_weight": float(batch.weights.min()),
        }  # fmt: skip
        return loop.Step(metrics, episodes)

    def progress(self) -> dict[str, float]:
        return {
            "replay": self.client.server_info()[REPLAY_TABLE].current_size,
            "epsilon": round(self.learner.epsilon(), 4),
            "beta": round(self.learner.beta(), 4),
        }

    def save_extra(self) -> None:
        """Reverb's tables, into RUN_DIR/replay (the server's checkpointer), with every transition added."""
        self.replay.flush()
        self.client.checkpoint()

    def close(self) -> None:
        self.replay.close()


def make_agent(config: PerConfig, client: reverb.Client, address: str, directory: pathlib.Path) -> DqnAgent:
    return DqnAgent(config, client)


def validate(config: PerConfig) -> None:
    """What the config cannot show alone: the env's observations, and the loop against the rate limiter."""
    if config.num_actors:
        raise UsageError(
            f"num_actors={config.num_actors}: actor processes are not implemented for PER yet; "
            "use --actors 0 (the learner acts itself)"
        )
    check_fits_env(config)
    tolerance = rate_limiter_tolerance(config)
    if tolerance < config.batch_size:
        raise UsageError(
            f"min_replay_size={config.min_replay_size} is too small for the replay's rate limiter: it tolerates "
            f"{tolerance:g} samples of drift, and one process that inserts update_period={config.update_period} "
            f"transitions per batch needs a batch ({config.batch_size}) or it blocks itself; raise min_replay_size"
        )
