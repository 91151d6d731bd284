"""LASER on Reverb: IMPALA's actors and queue, plus one replay fed by the same writes.

Topology (Algorithm 1):

* actors write each unroll once, to both `queue` and `replay` (one
  `TrajectoryWriter`, two items referencing the same chunks);
* `replay` is uniform with FIFO removal, sized in observations
  (`LaserConfig.replay_capacity`);
* the learner takes B_online unrolls from the queue, in queue order, and
  B_replay sampled uniformly from the replay, and learns on their
  concatenation, online first (`laser.learner`).

With `replay_priority="critic_loss"` (App. A.2) the replay samples by
priority instead; the learner weights each replayed unroll by its IS weight
and writes the unrolls' new priorities back after the update
(`laser.priorities`).

With `recompute_replay_state` (LSTM agents; App. A.2, App. B) actors write
whole episodes to `episodes` instead of unrolls to `replay`; a replayer thread
in the learner's process samples them uniformly, recomputes their LSTM states
with the newest parameters and writes unrolls to `replayed`, from which the
learner takes its B_replay (`laser.replayer`).

With pure replay (fraction 1) the learner still dequeues one fresh unroll
per step, to pace the actors and to count frames and episodes, but learns
from the replay only. Without replay (fraction 0) this is IMPALA.
"""

from __future__ import annotations

import threading
from typing import Iterator

import numpy as np
import reverb
import tensorflow as tf

from common import loop
from common.reverb import datasets, tables
from impala import agent as impala_agent
from impala import trajectories
from laser.config import LaserConfig
from laser.learner import Learner
from laser.priorities import CriticLossPriorities
from laser.replayer import EPISODES_TABLE, REPLAYED_TABLE, Replayer, sampled_episodes

REPLAY_TABLE = "replay"


def queue_table(config: LaserConfig) -> str:
    """The agent's own queue: `queue`, or `queue_<i>` for sweep member i."""
    return trajectories.QUEUE_TABLE + ("" if config.sweep_member < 0 else f"_{config.sweep_member}")


def params_table(config: LaserConfig) -> str:
    """The agent's own parameters: `params`, or `params_<i>` for sweep member i."""
    return tables.PARAMS + ("" if config.sweep_member < 0 else f"_{config.sweep_member}")


def own_tables(config: LaserConfig) -> list[reverb.Table]:
    """The tables one agent does not share: its queue, its parameters and the run they serve."""
    member = "" if config.sweep_member < 0 else f"_{config.sweep_member}"
    return [
        tables.queue(queue_table(config), config.queue_size), tables.variables(params_table(config)),
        tables.run_identity(member),
    ]  # fmt: skip


def replay_table(config: LaserConfig) -> reverb.Table:
    """FIFO, sized in unrolls from the capacity in observations; one per sweep.

    Uniform, or P(i) proportional to p_i^alpha with `replay_priority="critic_loss"`.
    """
    capacity, min_size = config.replay_capacity_unrolls, config.min_replay_unrolls
    if config.replay_priority == "critic_loss":
        return tables.prioritized_replay(REPLAY_TABLE, capacity, config.priority_exponent, min_size=min_size)
    return tables.uniform_replay(REPLAY_TABLE, capacity, min_size=min_size)


def recompute_tables(config: LaserConfig) -> list[reverb.Table]:
    """Whole episodes, at most `replay_capacity` observations (App. A.2), and the replayer's unrolls."""
    episodes = tables.uniform_replay(
        EPISODES_TABLE, config.replay_capacity_episodes, min_size=config.min_replay_episodes
    )  # fmt: skip
    return [episodes, tables.shuffled_queue(REPLAYED_TABLE, config.queue_size)]


def agent_tables(config: LaserConfig) -> list[reverb.Table]:
    if not config.replay_batch_size:
        return own_tables(config)
    return own_tables(config) + (recompute_tables(config) if config.recompute_replay_state else [replay_table(config)])


def unshared_tables(config: LaserConfig) -> list[reverb.Table]:
    """The tables only this agent writes: a sweep member's queue and parameters; a lone agent's every table."""
    return agent_tables(config) if config.sweep_member < 0 else own_tables(config)


def sweep_tables(configs: list[LaserConfig]):
    """Every member's queue and parameters, and the one replay they share."""
    found = [table for config in configs for table in own_tables(config)]
    if configs[0].replay_batch_size:
        found.append(replay_table(configs[0]))
    return found


def actor_tables(config: LaserConfig) -> dict[str, float]:
    """Where actors write each unroll, at which priority.

    Uniform replay ignores the priority; in a prioritized one 1.0 is the maximum
    (the learner's priorities are normalised, `laser.priorities`), where PER puts new items.
    """
    if config.replay_batch_size and not config.recompute_replay_state:
        return {queue_table(config): 1.0, REPLAY_TABLE: 1.0}
    return {queue_table(config): 1.0}


def run_actor(config: LaserConfig, client: reverb.Client, seed: int) -> None:
    """Acts; with `recompute_replay_state`, whole episodes go to `episodes` instead of unrolls to `replay`."""
    episodes = {EPISODES_TABLE: 1.0} if config.recompute_replay_state else None
    impala_agent.run_actor(
        config, client, seed, actor_tables(config), params_table(config), episodes, config.max_replay_episode_steps
    )  # fmt: skip


class MixedLearner(impala_agent.QueueLearner):
    """The loop's learner: one update per mixed batch of online and replayed unrolls."""

    learner_class = Learner
    _accepted: float | None = None
    # Sums over this process's updates, for final.json (as IMPALA's policy lag: a resumed run's last sitting).
    _accepted_sum, _accepted_updates = 0.0, 0

    def __init__(self, config: LaserConfig, client: reverb.Client, address: str):
        self.queue_table, self.params_table = queue_table(config), params_table(config)
        self.priorities = None
        if config.prioritized_replay:
            self.priorities = CriticLossPriorities(client, REPLAY_TABLE, config.importance_sampling_exponent)
        super().__init__(config, client, address)
        self._replayer_error = None

    def start(self) -> None:
        super().start()
        if self.config.recompute_replay_state:  # After the first publish: the replayer needs parameters.
            threading.Thread(target=self._replay, daemon=True, name="replayer").start()

    def _replay(self) -> None:
        """App. B's Replayer Thread, with its own copy of the network; errors surface in `step`."""
        try:
            network, spec = impala_agent.build_agent(self.config)
            replayer = Replayer(self.config, self._client, network, self.params_table)
            replayer.run(sampled_episodes(self._client, spec, replayer.episodes_per_pass))
        except Exception as error:  # noqa: BLE001 - handed to the learner's thread.
            self._replayer_error = error

    def batches(self) -> Iterator[tuple[dict, dict] | None]:
        """(fresh, replayed) pairs, or None after a wait (so the loop can look at signals).

        A fresh batch is held while the replay cannot serve yet, so no online
        unroll is dropped. A prioritized replay's batch is (info, unrolls),
        info the samples' keys and probabilities.
        """
        c, wait = self.config, impala_agent.SAMPLE_WAIT_MS
        fresh_batches = trajectories.batches(
            self._address, self.spec, c.unroll_length, c.dequeued_per_step, wait, self.queue_table
        )
        replay_batches = None
        if c.replay_batch_size:
            replay_batches = datasets.batches(
                self._address, REPLAYED_TABLE if c.recompute_replay_state else REPLAY_TABLE, self.spec,
                c.unroll_length + 1, c.replay_batch_size, wait, with_info=c.prioritized_replay,
            )  # fmt: skip
        while True:
            fresh = next(fresh_batches)
            if fresh is None:
                yield None
                continue
            replayed = None
            while replay_batches is not None and (replayed := next(replay_batches)) is None:
                yield None
            yield fresh, replayed

    def step(self) -> loop.Step | None:
        if self._replayer_error is not None:
            raise RuntimeError("the replayer thread failed") from self._replayer_error
        pair = next(self._batches)
        if pair is None:
            return None
        fresh, replayed = pair
        metrics = self._learn(fresh, replayed)
        self._publish_if_due()
        self._accepted = metrics["replay_accepted"]
        self._accepted_sum += self._accepted
        self._accepted_updates += 1
        episodes = trajectories.finished_episodes({k: fresh[k].numpy() for k in ("episode_return", "episode_length")})
        return loop.Step(metrics, episodes)

    def _learn(self, fresh: dict, replayed) -> dict[str, float]:
        """One update; with prioritized replay, IS-weighted, then the sampled unrolls' new priorities."""
        online = self.config.online_batch_size
        if self.priorities is None:
            return self.learner.step(mix(fresh, replayed, online))
        info, replayed = replayed
        weights = self.priorities.importance_weights(info)
        metrics = self.learner.step(mix(fresh, replayed, online), np.concatenate([np.ones(online), weights]))
        priorities = self.priorities.update(info.key.numpy(), self.learner.critic_losses[online:])
        return {**metrics, "importance_weight_min": float(weights.min()), "priority_mean": float(priorities.mean())}

    def progress(self) -> dict[str, float]:
        info = self._client.server_info()
        found = {"queue": info[self.queue_table].current_size}
        # The loop's line has its own "episodes" (finished ones): the stored ones are "replay_episodes".
        for table, key in ((REPLAY_TABLE, "replay"), (EPISODES_TABLE, "replay_episodes"), (REPLAYED_TABLE, "replayed")):
            if table in info:
                found[key] = info[table].current_size
        if self._trust_region_on_replay() and self._accepted is not None:
            found["accepted"] = round(self._accepted, 3)  # Replayed steps the trust region kept, last batch.
        return found

    def summary(self) -> dict[str, float]:
        """IMPALA's policy lag and, with a trust region on replay, the share of replayed steps it accepted (§4.3),
        averaged over this process's updates: how much of the replay the rejected steps' zeroed gradient cost."""
        found = super().summary()
        if self._trust_region_on_replay() and self._accepted_updates:
            found["replay_accepted_mean"] = round(self._accepted_sum / self._accepted_updates, 4)
        return found

    def _trust_region_on_replay(self) -> bool:
        return bool(self.config.replay_batch_size and self.config.trust_region)


def mix(fresh: dict, replayed: dict | None, num_online: int) -> dict:
    """The learner's batch: the first `num_online` fresh unrolls, then the replayed ones."""
    if replayed is None:
        return fresh
    return tf.nest.map_structure(lambda f, r: tf.concat([f[:num_online], r], axis=0), fresh, replayed)


def make_learner(config: LaserConfig, client: reverb.Client, address: str, directory) -> MixedLearner:
    return MixedLearner(config, client, address)
