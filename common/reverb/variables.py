"""Parameters through a one-slot Reverb table (`tables.variables`).

The learner inserts its flattened variables after every step, evicting the
previous copy; actors sample the single item when they want fresh weights.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import reverb
import tensorflow as tf

from common.reverb.tables import PARAMS


def publish(
    client: reverb.Client, variables: Sequence[tf.Variable], table: str = PARAMS, extras: Sequence[np.ndarray] = ()
) -> None:
    """Writes the variables' current values as the newest parameters, then `extras`.

    `extras`: arrays the readers take with these parameters (PER: the maximal
    priority and epsilon), after the variables in what `fetch` returns.
    """
    client.insert([*(v.numpy() for v in variables), *extras], priorities={table: 1.0})


def fetch(client: reverb.Client, table: str = PARAMS) -> list[np.ndarray]:
    """The newest published parameters, and any `extras` after them (blocks until there are some)."""
    sample = next(client.sample(table, num_samples=1, emit_timesteps=False))
    return [array[0] for array in sample.data]


def assign(variables: Sequence[tf.Variable], values: Sequence[np.ndarray]) -> None:
    for variable, value in zip(variables, values):
        variable.assign(value)
