"""Linear schedules over a budget that a resumed run may extend.

IMPALA anneals the learning rate linearly to 0 over the frame budget (App. G);
PER anneals beta linearly to 1 over training (§3.4). When a run is resumed with
a larger budget, the schedule continues from the value it has reached and
anneals to its final value at the new budget: no jump at the resume.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf


class LinearSchedule(tf.Module):
    """value(t) goes linearly from `initial` at t = 0 to `final` at t = `end`.

    The anchor (where the current line starts, and its value there) and the
    end are variables, so a checkpoint keeps them. Asking for a value with
    another `end` re-anchors the line at t: value(t) is unchanged, and the
    value reaches `final` at the new end.
    """

    def __init__(self, initial: float, final: float, end: int, name: str | None = None):
        super().__init__(name=name)
        if end < 1:
            raise ValueError(f"end={end}: must be >= 1")
        self.final = float(final)
        self.begin = tf.Variable(0, dtype=tf.int64, trainable=False, name="begin")
        self.begin_value = tf.Variable(float(initial), dtype=tf.float64, trainable=False, name="begin_value")
        self.end = tf.Variable(int(end), dtype=tf.int64, trainable=False, name="end")

    def __call__(self, t: int, end: int | None = None) -> float:
        if end is not None and end != int(self.end.numpy()):
            value = self(t)
            self.begin.assign(min(t, end))
            self.begin_value.assign(value)
            self.end.assign(end)
        return self.frozen()(t)

    def frozen(self) -> Callable[[int], float]:
        """value(t) on the current line, as a plain function that reads no variable.

        Reading three variables costs more than a small network's step on
        these CPUs; a hot loop takes the line once and again after anything
        that moves it (a restore, or a call with another `end`).
        """
        begin, end_, start_value = int(self.begin.numpy()), int(self.end.numpy()), float(self.begin_value.numpy())
        final = self.final

        def value(t: int) -> float:
            if t >= end_:
                return final
            fraction = max(t - begin, 0) / (end_ - begin)
            return start_value + (final - start_value) * fraction

        return value
