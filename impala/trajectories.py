"""Unrolls on Reverb: what a step holds, how actors write them, how the learner reads.

Each env an actor drives has its own `TrajectoryWriter`. After every T steps it
creates one item of the last T + 1 steps in the `queue` table, so consecutive
items overlap by one step: the last observation of one unroll (the bootstrap
state) is the first of the next (IMPALA §3, DESIGN "Runtime topology"). The
data are stored once; the overlap is a second reference to the same chunk.

A step holds the observation x_t, `first` (x_t opens an episode), the recurrent
state *before* x_t (LSTM agents only), the action a_t, mu's logits at x_t, and
the reward and `terminal` flag that followed a_t. `episode_return` and
`episode_length` are NaN and 0 except at the step where a game ended, so the
learner can log finished episodes without another channel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import reverb
import tensorflow as tf

QUEUE_TABLE = "queue"


def step_spec(observation_shape, observation_dtype, num_actions: int, state_spec=None) -> dict[str, tf.TensorSpec]:
    """The fields of one step, each as a `tf.TensorSpec` without batch axis."""
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
    return spec


def queue_table(max_size: int) -> reverb.Table:
    """FIFO queue: each unroll is sampled exactly once (IMPALA's learner queue)."""
    return reverb.Table.queue(QUEUE_TABLE, max_size)


class UnrollWriter:
    """Writes the steps of N envs and emits overlapping T + 1-step unrolls."""

    def __init__(self, client: reverb.Client, spec: dict[str, Any], num_envs: int, unroll_length: int):
        self._spec = spec
        self._length = unroll_length
        self._writers = [client.trajectory_writer(num_keep_alive_refs=unroll_length + 1) for _ in range(num_envs)]
        self._steps = 0

    def append(self, steps: dict[str, Any]) -> None:
        """Appends one step for every env (arrays with a leading [N] axis), cast to the spec."""
        steps = tf.nest.map_structure(lambda s, x: np.asarray(x, s.dtype.as_numpy_dtype), self._spec, steps)
        for i, writer in enumerate(self._writers):
            writer.append(tf.nest.map_structure(lambda x, i=i: x[i], steps))
        self._steps += 1
        if self._steps > self._length and (self._steps - 1) % self._length == 0:
            for writer in self._writers:
                window = tf.nest.map_structure(lambda column: column[-(self._length + 1) :], writer.history)
                writer.create_item(QUEUE_TABLE, priority=1.0, trajectory=window)
            for writer in self._writers:
                writer.flush()  # Blocks while the queue is full: Reverb's back-pressure.

    def close(self) -> None:
        for writer in self._writers:
            writer.close()


def dataset(
    address: str, spec: dict[str, tf.TensorSpec], unroll_length: int, batch_size: int, timeout_ms: int = -1
) -> tf.data.Dataset:
    """Batches of B unrolls from the queue: each field [B, T + 1, ...].

    With `timeout_ms` >= 0 the dataset ends when no unroll arrives for that
    long, so a waiting caller regains control (and can handle signals); a
    partial batch is then dropped.
    """
    unroll = tf.nest.map_structure(lambda s: tf.TensorSpec([unroll_length + 1, *s.shape], s.dtype), spec)
    data = reverb.TrajectoryDataset(
        address,
        QUEUE_TABLE,
        dtypes=tf.nest.map_structure(lambda s: s.dtype, unroll),
        shapes=tf.nest.map_structure(lambda s: s.shape, unroll),
        max_in_flight_samples_per_worker=2 * batch_size,
        rate_limiter_timeout_ms=timeout_ms,
    )
    return data.map(lambda sample: sample.data).batch(batch_size, drop_remainder=True).prefetch(1)


def batches(address: str, spec: dict[str, tf.TensorSpec], unroll_length: int, batch_size: int, wait_ms: int):
    """An endless iterator of batches, yielding None after each `wait_ms` without data.

    A learner blocked in the dataset's C++ would never get back to Python to
    notice a stop request while its queue is empty; the None lets it look.
    """
    while True:
        yield from dataset(address, spec, unroll_length, batch_size, timeout_ms=wait_ms)
        yield None


def finished_episodes(batch: dict[str, np.ndarray]) -> list[tuple[float, int]]:
    """(return, length) of games that ended in steps 0..T-1 of each unroll.

    Step T is skipped: it is step 0 of the next unroll, and counted there.
    """
    returns = batch["episode_return"][:, :-1]
    lengths = batch["episode_length"][:, :-1]
    ended = ~np.isnan(returns)
    return list(zip(returns[ended].tolist(), lengths[ended].tolist()))
