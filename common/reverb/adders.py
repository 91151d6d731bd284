"""Writers: N env streams into items of one or more Reverb tables.

Each env has its own `TrajectoryWriter`, so each step is stored once. Every
`period` steps the adder creates, in each table it was given, one item of the
last `length` steps of every column. Items of several tables (LASER's queue
and replay) and overlapping items (IMPALA's unrolls of T + 1 steps every T
steps; n-step transitions every step) are references to the same chunks, not
copies (DESIGN "Reverb facts").

With `episode_priorities` the adder also writes each env's whole episodes (LASER
App. A.2: "we uniformly sample an episode"), again as references to the same
chunks: an episode becomes an item when the env's next one starts, and an
episode longer than `max_episode_length` is cut into segments of that many
steps (the writer keeps only that many steps alive).
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
      episode_priorities: tables that get each whole episode (or segment) as one
        item, by table name; `append` must then say where episodes start.
      max_episode_length: the longest episode item, in steps (with `episode_priorities`).
    """

    def __init__(
        self,
        client: reverb.Client,
        spec: Any,
        num_envs: int,
        length: int,
        period: int,
        priorities: Mapping[str, float],
        episode_priorities: Mapping[str, float] | None = None,
        max_episode_length: int = 0,
    ):
        if length < 1 or period < 1 or not priorities:
            raise UsageError("an adder needs length >= 1, period >= 1 and at least one table")
        if episode_priorities and max_episode_length < 1:
            raise UsageError("an adder of episodes needs max_episode_length >= 1")
        self._spec, self._length, self._period = spec, length, period
        self._priorities = dict(priorities)
        self._episode_priorities, self._max_episode_length = dict(episode_priorities or {}), max_episode_length
        keep_alive = max(length, max_episode_length) if self._episode_priorities else length
        self._writers = [client.trajectory_writer(num_keep_alive_refs=keep_alive) for _ in range(num_envs)]
        self._episode_steps = np.zeros(num_envs, np.int64)  # Steps of each env's open episode (or segment).
        self.steps = 0

    def append(self, steps: Any, starts: np.ndarray | None = None) -> None:
        """Appends one step for every env: arrays with a leading [N] axis, cast to the spec.

        `starts` [N] (with `episode_priorities`): the step opens an episode in that env.
        """
        steps = tf.nest.map_structure(lambda s, x: np.asarray(x, s.dtype.as_numpy_dtype), self._spec, steps)
        if self._episode_priorities:
            self._end_episodes(np.asarray(starts, bool))
        for i, writer in enumerate(self._writers):
            writer.append(tf.nest.map_structure(lambda x, i=i: x[i], steps))
        self.steps += 1
        if self._episode_priorities:
            self._episode_steps += 1
            self._end_episodes(self._episode_steps >= self._max_episode_length)
        if self.steps >= self._length and (self.steps - self._length) % self._period == 0:
            for writer in self._writers:
                window = tf.nest.map_structure(lambda column: column[-self._length :], writer.history)
                for table, priority in self._priorities.items():
                    writer.create_item(table, priority=priority, trajectory=window)
            for writer in self._writers:
                writer.flush()  # Blocks while a table is full: Reverb's back-pressure.

    def _end_episodes(self, ended: np.ndarray) -> None:
        """Writes the open episode of each env in `ended` as one item; the next step opens a new one.

        The items go out with the next flush (every `period` steps): the episode
        tables are replays, which never block.
        """
        for i in np.flatnonzero(ended & (self._episode_steps > 0)):
            writer, n = self._writers[i], int(self._episode_steps[i])
            episode = tf.nest.map_structure(lambda column, n=n: column[-n:], writer.history)
            for table, priority in self._episode_priorities.items():
                writer.create_item(table, priority=priority, trajectory=episode)
            self._episode_steps[i] = 0

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
