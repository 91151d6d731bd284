"""IMPALA's unrolls on Reverb: what a step holds and how the unrolls are cut.

Actors write with `common.reverb.adders.SequenceAdder`: every T steps, one
item of the last T + 1 steps in the `queue` table, so consecutive items
overlap by one step: the last observation of one unroll (the bootstrap state)
is the first of the next (IMPALA §3, DESIGN "Runtime topology"). The data are
stored once; the overlap is a second reference to the same chunk.

A step holds the observation x_t, `first` (x_t opens an episode), the recurrent
state *before* x_t (LSTM agents only), the action a_t, mu's logits at x_t, and
the reward and `terminal` flag that followed a_t. `episode_return` and
`episode_length` are NaN and 0 except at the step where a game ended, so the
learner can log finished episodes without another channel. A multi-task
run's steps also hold `task`, the index of the env's task in the suite
(`common.envs.tasks`), so each finished episode is logged with its level; the
network never sees it (IMPALA §5.3: the model does not know its task).
An actor's steps also hold `policy_version`, the learner step of the
parameters that chose the action, so the learner can report its policy lag
(`PolicyLag`); the maths never reads it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import reverb
import tensorflow as tf

from common.reverb import adders, datasets

QUEUE_TABLE = "queue"
QUEUE_ONLY = {QUEUE_TABLE: 1.0}  # IMPALA's actors write to the queue alone.


def step_spec(
    observation_shape, observation_dtype, num_actions: int, state_spec=None, tasks: bool = False, versions: bool = False
) -> dict[str, tf.TensorSpec]:
    """The fields of one step, each as a `tf.TensorSpec` without batch axis.

    `tasks`: a multi-task run's `task`; `versions`: the acting parameters' `policy_version`.
    """
    spec = {
        "observation": tf.TensorSpec(observation_shape, observation_dtype),
        "first": tf.TensorSpec((), tf.bool),
        "action": tf.TensorSpec((), tf.int32),
        "behaviour_logits": tf.TensorSpec((num_actions,), tf.float32),
        "reward": tf.TensorSpec((), tf.float32),
        "terminal": tf.TensorSpec((), tf.bool),
        "episode_return": tf.TensorSpec((), tf.float32),
        "episode_length": tf.TensorSpec((), tf.int32),
    }
    if state_spec is not None:
        spec["core_state"] = state_spec
    if tasks:
        spec["task"] = tf.TensorSpec((), tf.int32)
    if versions:
        spec["policy_version"] = tf.TensorSpec((), tf.int64)
    return spec


def unroll_adder(
    client: reverb.Client,
    spec: dict[str, tf.TensorSpec],
    num_envs: int,
    unroll_length: int,
    tables: Mapping[str, float] = QUEUE_ONLY,
    episode_tables: Mapping[str, float] | None = None,
    max_episode_length: int = 0,
):
    """Items of T + 1 steps every T steps into `tables` ({name: priority}), for `num_envs` envs.

    Several tables (LASER's queue and replay) reference the same stored steps;
    `episode_tables` get whole episodes of at most `max_episode_length` steps
    (LASER's recomputed LSTM states, App. A.2), from the same steps too.
    """
    return adders.SequenceAdder(
        client, spec, num_envs, unroll_length + 1, unroll_length, dict(tables), episode_tables, max_episode_length
    )


def batches(
    address: str,
    spec: dict[str, tf.TensorSpec],
    unroll_length: int,
    batch_size: int,
    wait_ms: int,
    table: str = QUEUE_TABLE,
):
    """Batches of B unrolls from `table`, each field [B, T + 1, ...]; None after `wait_ms` without data."""
    return datasets.batches(address, table, spec, unroll_length + 1, batch_size, wait_ms)


def finished_episodes(batch: dict[str, np.ndarray], tasks: Sequence[str] = ()) -> list[tuple]:
    """(return, length) of games that ended in steps 0..T-1 of each unroll; (return, length, task) with `tasks`.

    Step T is skipped: it is step 0 of the next unroll, and counted there.
    `tasks` names the batch's `task` indices (a multi-task run's levels).
    """
    returns = batch["episode_return"][:, :-1]
    lengths = batch["episode_length"][:, :-1]
    ended = ~np.isnan(returns)
    episodes = zip(returns[ended].tolist(), lengths[ended].tolist())
    if not tasks:
        return list(episodes)
    names = [tasks[i] for i in batch["task"][:, :-1][ended]]
    return [(*episode, name) for episode, name in zip(episodes, names)]


class PolicyLag:
    """Learner steps between the parameters that acted an unroll and the update that learns from it.

    IMPALA's actors lag the learner by a few updates (§3, "policy-lag"), which
    V-trace corrects (§4): the queue holds unrolls acted before the latest
    updates, and with `publish_every` = k an actor's parameters can be up to
    k - 1 updates older still. An unroll's lag is the learner's step count
    before the update minus the `policy_version` of its first step (the
    parameters of all its learned steps: actors fetch at unroll starts).
    """

    def __init__(self):
        self._recent: list[np.ndarray] = []
        self._count, self._sum, self._max = 0, 0, 0

    def add(self, learner_step: int, policy_version: np.ndarray) -> None:
        """`policy_version` [B, T + 1]: the batch's versions, before the update at `learner_step`."""
        lags = learner_step - policy_version[:, 0]
        self._recent.append(lags)
        self._count += lags.size
        self._sum += int(lags.sum())
        self._max = max(self._max, int(lags.max()))

    def recent(self) -> dict[str, float]:
        """Mean and max lag of the unrolls learned from since the last call (none: {})."""
        if not self._recent:
            return {}
        lags, self._recent = np.concatenate(self._recent), []
        return {"policy_lag": round(float(lags.mean()), 2), "policy_lag_max": int(lags.max())}

    def summary(self) -> dict[str, float]:
        """Mean and max lag over every unroll this process learned from."""
        if not self._count:
            return {}
        return {"policy_lag_mean": round(self._sum / self._count, 3), "policy_lag_max": self._max}
