"""Batches of items from a Reverb table, for a learner."""

from __future__ import annotations

from typing import Any, Iterator

import reverb
import tensorflow as tf


def dataset(
    address: str, table: str, spec: Any, length: int, batch_size: int, timeout_ms: int = -1, with_info: bool = False
) -> tf.data.Dataset:
    """Batches of B items of `length` steps: each field [B, length, ...], the samples' data.

    `spec` is one step's nest of `tf.TensorSpec`. With `timeout_ms` >= 0 the
    dataset ends when no item arrives for that long, so a waiting caller
    regains control (and can handle signals); a partial batch is dropped.
    With `with_info` a batch is (info, data), info a `reverb.SampleInfo` of [B]
    fields (`key`, `probability`, `table_size`, `priority`, ...): what a
    prioritized replay's learner needs for IS weights and priority updates.
    """
    item = tf.nest.map_structure(lambda s: tf.TensorSpec([length, *s.shape], s.dtype), spec)
    data = reverb.TrajectoryDataset(
        address,
        table,
        dtypes=tf.nest.map_structure(lambda s: s.dtype, item),
        shapes=tf.nest.map_structure(lambda s: s.shape, item),
        max_in_flight_samples_per_worker=2 * batch_size,
        rate_limiter_timeout_ms=timeout_ms,
    )
    data = data.map(lambda sample: (sample.info, sample.data) if with_info else sample.data)
    return data.batch(batch_size, drop_remainder=True).prefetch(1)


def batches(
    address: str, table: str, spec: Any, length: int, batch_size: int, wait_ms: int, with_info: bool = False
) -> Iterator[Any]:
    """An endless iterator of batches, yielding None after each `wait_ms` without data.

    A learner blocked in the dataset's C++ would never get back to Python to
    notice a stop request while its table is empty; the None lets it look.
    """
    while True:
        yield from dataset(address, table, spec, length, batch_size, timeout_ms=wait_ms, with_info=with_info)
        yield None
