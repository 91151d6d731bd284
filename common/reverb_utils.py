"""Reverb plumbing shared by the agents: servers, parameter publishing, waiting.

Parameters travel through a `max_size=1` table: the learner inserts its
flattened variables after every step (the newest insert evicts the previous
one), and actors sample the single item at the start of each unroll. The
`MinSize(1)` limiter makes a sample block until the first publish.

The server listens on all interfaces. On one machine keep its port private
(e.g. a firewall); across machines, use a private network.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import reverb
import tensorflow as tf

from common.errors import UsageError

PARAMS_TABLE = "params"


def params_table() -> reverb.Table:
    """The latest-parameters table: one item, sampled any number of times."""
    return reverb.Table(
        name=PARAMS_TABLE,
        sampler=reverb.selectors.Lifo(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


def publish(client: reverb.Client, variables: Sequence[tf.Variable]) -> None:
    """Writes the variables' current values as the newest parameters."""
    client.insert([v.numpy() for v in variables], priorities={PARAMS_TABLE: 1.0})


def fetch(client: reverb.Client) -> list[np.ndarray]:
    """The newest published parameters (blocks until there are some)."""
    sample = next(client.sample(PARAMS_TABLE, num_samples=1, emit_timesteps=False))
    return [array[0] for array in sample.data]


def assign(variables: Sequence[tf.Variable], values: Sequence[np.ndarray]) -> None:
    for variable, value in zip(variables, values):
        variable.assign(value)


def connect(address: str, timeout_s: float) -> reverb.Client:
    """A client for `address`, after checking the server answers within `timeout_s`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"bad Reverb address {address!r}: expected HOST:PORT, e.g. localhost:8000")
    client = reverb.Client(address)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.server_info(timeout=max(1, int(deadline - time.monotonic())))
            return client
        except (reverb.errors.DeadlineExceededError, RuntimeError, ValueError) as error:
            if time.monotonic() >= deadline:
                raise UsageError(
                    f"no Reverb server answered at {address} within {timeout_s:.0f}s ({type(error).__name__}); "
                    "start the server role first or check --replay_address"
                ) from None
            time.sleep(0.5)
