"""Writers: N env streams into items of one or more Reverb tables.

Each env has its own `TrajectoryWriter`, so each step is stored once. Every
`period` steps the adder creates, in each table it was given, one item of the
last `length` steps of every column. Items of several tables (LASER's queue
and replay) and overlapping items (IMPALA's unrolls of T + 1 steps every T
steps; n-step transitions every step) are references to the same chunks, not
copies (DESIGN "Reverb facts").
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import reverb
import tensorflow as tf

from common.errors import UsageError


class SequenceAdder:
    """Items of the last `length` steps, every `period` steps, into several tables.

    Args:
      client: a Reverb client.
      spec: one step's fields, a nest of `tf.TensorSpec` without batch axis;
        appended arrays are cast to it.
      num_envs: N, the streams written side by side.
      length: steps per item (IMPALA: T + 1; an n-step transition: n + 1).
      period: steps between items (IMPALA: T; transitions: 1).
      priorities: the initial priority of an item in each table, by table name.
    """

    def __init__(
        self,
        client: reverb.Client,
        spec: Any,
        num_envs: int,
        length: int,
        period: int,
        priorities: Mapping[str, float],
    ):
        if length < 1 or period < 1 or not priorities:
            raise UsageError("an adder needs length >= 1, period >= 1 and at least one table")
        self._spec, self._length, self._period = spec, length, period
        self._priorities = dict(priorities)
        self._writers = [client.trajectory_writer(num_keep_alive_refs=length) for _ in range(num_envs)]
        self.steps = 0

    def append(self, steps: Any) -> None:
        """Appends one step for every env: arrays with a leading [N] axis, cast to the spec."""
        steps = tf.nest.map_structure(lambda s, x: np.asarray(x, s.dtype.as_numpy_dtype), self._spec, steps)
        for i, writer in enumerate(self._writers):
            writer.append(tf.nest.map_structure(lambda x, i=i: x[i], steps))
        self.steps += 1
        if self.steps >= self._length and (self.steps - self._length) % self._period == 0:
            for writer in self._writers:
                window = tf.nest.map_structure(lambda column: column[-self._length :], writer.history)
                for table, priority in self._priorities.items():
                    writer.create_item(table, priority=priority, trajectory=window)
            for writer in self._writers:
                writer.flush()  # Blocks while a table is full: Reverb's back-pressure.

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
