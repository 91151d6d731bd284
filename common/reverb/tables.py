"""The Reverb tables the agents declare (DESIGN "Runtime topology").

| agent  | tables                                                  |
| ------ | ------------------------------------------------------- |
| IMPALA | `queue` (FIFO, each item sampled once), `params`        |
| LASER  | IMPALA's plus `replay` (uniform or prioritized, FIFO);  |
|        | with recomputed LSTM states `episodes` and `replayed`   |
| PER    | `replay` (prioritized, FIFO eviction), `params` (actors) |

Each agent also declares `run` (`run_<i>` for LASER sweep member i): the
run whose learner uses its other own tables (`common.reverb.server.claim`).
"""

from __future__ import annotations

from typing import Sequence

import reverb

from common.errors import UsageError

PARAMS = "params"
RUN = "run"


def queue(name: str, max_size: int) -> reverb.Table:
    """A FIFO queue: every item is sampled exactly once, in insertion order (IMPALA §3)."""
    return reverb.Table.queue(name, max_size)


def shuffled_queue(name: str, max_size: int) -> reverb.Table:
    """A queue sampled in random order: every item sampled exactly once, uniformly among those waiting.

    LASER's replayer writes consecutive unrolls of one episode (App. B); a
    batch drawn at random from `max_size` of them mixes several episodes.
    Inserts block while it is full, samples while it is empty, as `queue`'s.
    """
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=max_size,
        max_times_sampled=1,
        rate_limiter=reverb.rate_limiters.RateLimiter(
            samples_per_insert=1.0, min_size_to_sample=1, min_diff=0.0, max_diff=float(max_size)
        ),
    )


def variables(name: str = PARAMS) -> reverb.Table:
    """The newest parameters: one item, sampled any number of times.

    The newest insert evicts the previous one; `MinSize(1)` makes a reader
    wait for the first publish.
    """
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Lifo(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


def run_identity(suffix: str = "") -> reverb.Table:
    """The run that a learner's tables serve: one item, the run's id and directory, kept as `variables` keeps
    parameters, and saved with the replay, so a server restored from its tables still names its run."""
    return variables(RUN + suffix)


def identity_table(own: Sequence[reverb.Table]) -> str:
    """The name of the `run_identity` table among a run's own tables."""
    (name,) = [t.info.name for t in own if t.info.name == RUN or t.info.name.startswith(RUN + "_")]
    return name


def _rate_limiter(
    min_size: int, samples_per_insert: float | None, error_buffer: float | None
) -> reverb.rate_limiters.RateLimiter:
    """`MinSize`, or a `SampleToInsertRatio` that holds the replay ratio.

    The ratio limiter blocks inserts too, once they run ahead of the samples
    by more than the error buffer allows: a single-process loop that inserts k
    items between batches needs error_buffer >= k samples_per_insert (one
    batch, measured: 32 runs, 24 blocks for k = 4 at 8 samples per insert).
    The default is 10% of the samples the first `min_size` inserts allow
    (Acme's tolerance), and never less than 8 inserts' worth.
    """
    if min_size < 1:
        raise UsageError(f"min_size={min_size}: must be >= 1")
    if samples_per_insert is None:
        return reverb.rate_limiters.MinSize(min_size)
    if error_buffer is None:
        error_buffer = max(0.1 * min_size * samples_per_insert, 8.0 * samples_per_insert)
    return reverb.rate_limiters.SampleToInsertRatio(samples_per_insert, min_size, error_buffer)


def _replay(
    name: str,
    sampler: reverb.selectors.Selector,
    capacity: int,
    min_size: int = 1,
    samples_per_insert: float | None = None,
    error_buffer: float | None = None,
) -> reverb.Table:
    """A replay table with FIFO eviction; see `_rate_limiter` for the limits."""
    return reverb.Table(
        name=name,
        sampler=sampler,
        remover=reverb.selectors.Fifo(),
        max_size=capacity,
        rate_limiter=_rate_limiter(min_size, samples_per_insert, error_buffer),
    )


def uniform_replay(name: str, capacity: int, **limits) -> reverb.Table:
    """Uniform sampling with FIFO eviction (IMPALA §5.2.2's replay, LASER's shared replay).

    `limits`: `min_size`, `samples_per_insert`, `error_buffer` (see `_rate_limiter`).
    """
    return _replay(name, reverb.selectors.Uniform(), capacity, **limits)


def prioritized_replay(name: str, capacity: int, priority_exponent: float, **limits) -> reverb.Table:
    """P(i) = p_i^alpha / sum_k p_k^alpha (PER eq. 1) with FIFO eviction; `limits` as `uniform_replay`."""
    return _replay(name, reverb.selectors.Prioritized(priority_exponent=priority_exponent), capacity, **limits)
