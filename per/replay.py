"""Prioritized replay on Reverb: proportional, rank-based and uniform (PER §3.3-3.4).

The table is Reverb's `Prioritized` selector with a `Fifo` remover:

* proportional: the selector's exponent is alpha and an item's priority is
  p = |delta| + epsilon, so Reverb samples P(i) = p_i^alpha / sum_k p_k^alpha;
* uniform: the same code with alpha = 0;
* rank-based: Reverb has no rank selector, so the selector's exponent is 1 and
  the client stores p_i^alpha = rank(i)^-alpha itself (see `RankTracker`).

New items enter at the running maximum priority, tracked here because Reverb
cannot report it (Algorithm 1, line 6). It is the largest priority ever written,
which never falls, where PER §3.2's heap gave the largest one stored now
(README). Importance weights come from the sample's `probability` and
`table_size` (§3.4); with `global_min` weights the proportional variant also
tracks its smallest live priority, which Reverb cannot report either
(`LiveMinimum`).

Storage (issue #12): `add_transition` stores each env frame once, in a
per-stream `TrajectoryWriter` history chunked over `chunk_length` steps so
Reverb's compression works, and each transition item references the frames
of S_{j-1} and S_j, one window of them (see `TransitionWriter`); `add`
stores any list of arrays as a one-step item. Sampling (issue #13) keeps one
Reverb sampler open per batch size (see `PrioritizedReplay`).

Updating an item that the FIFO remover already evicted is a no-op: the
client drops it (its |delta| neither raises the tracked maximum nor enters the
rank tracker), as Reverb would ignore its unknown key in `mutate_priorities`.
An item's age comes from its id, its insertion index, when its writer was the
table's only one. Items written by one of several actor processes carry
`UNKNOWN_INSERTION` instead; the sampling client counts the table's inserts
(`count_inserts`) and takes the count when it first samples such an item as
its insertion index. That is an upper bound: the item is taken for live, and
the rank tracker forgets it, as many inserts after its eviction as it waited
for its first sample. New items hold the maximal priority, so the wait is
short against the capacity (rank-based, alpha 0.7, 8 samples per insert, a
full 10^6 replay: about 30 inserts in expectation).
"""

from __future__ import annotations

import heapq
import queue
import sys
import threading
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np
import reverb
from reverb import trajectory_writer

from common.errors import UsageError
from per import priorities
from per.replay_config import ReplayConfig

# The id of an item whose writer does not know its insertion index (an actor process, one writer of many).
UNKNOWN_INSERTION = -1
# A sampled item starts with Reverb's SampleInfo: key, probability, table_size, priority, times_sampled.
SAMPLE_INFO = 5
UNLIMITED = -1  # A sampler's max_samples: draw until closed.
# Steps of an env stream per Reverb chunk. Longer chunks compress better (a
# chunk of 32 Pong frames costs a fraction of 32 one-frame chunks; see
# results/per/benchmarks/memory.md), but the sampler decompresses every chunk
# an item references, whole: against 32, 16-step chunks took 25% less CPU per
# sample+update of Pong items and 15% less of MinAtar's at 10^5 (none at
# 10^4), for 2-13% more memory per frame (issue #13, on a loaded machine).
CHUNK_LENGTH = 16


def table(config: ReplayConfig, name: str = "replay") -> reverb.Table:
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Prioritized(priority_exponent=config.selector_exponent),
        remover=reverb.selectors.Fifo(),
        max_size=config.capacity,
        rate_limiter=reverb.rate_limiters.MinSize(config.min_size),
    )


class Batch(NamedTuple):
    keys: np.ndarray  # [k] uint64 Reverb item keys.
    data: list[np.ndarray]  # The stored arrays, each [k, ...].
    probabilities: np.ndarray  # [k] P(i).
    weights: np.ndarray  # [k] normalised IS weights.
    table_size: int


class RankTracker:
    """Ranks by last-seen |delta| for the rank-based variant (PER App. B.2.1).

    The paper kept a binary heap and used its array as an approximately sorted
    order, re-sorted every 10^6 steps. We keep |delta| per known key and, every
    `rerank_interval` updates, sort them all and rewrite every priority exactly:
    an item's rank is U + r, where U items have not been sampled yet (they hold
    the maximal priority, rank 1's) and r is its rank among the known. Between
    re-ranks an updated item gets the rank its |delta| would have in the last
    sorted snapshot (a binary search), which is the approximation. The sort
    and the searches run in numpy (issue #13).

    A snapshot covering fewer than half the known items (at first it is empty,
    and every item would get rank 1, i.e. uniform sampling) forces an early
    re-rank, see `is_stale`.

    Between re-ranks the ranks are offset by what the snapshot no longer
    counts: U stays the unsampled count of the last re-rank (items inserted
    since hold rank 1's priority without being counted), and an item whose
    |delta| changed is searched among snapshot entries that include its own
    old one. So an update's rank may be off by the inserts since the last
    re-rank, and may exceed the table's size; `max_rank` keeps the largest
    rank written, for the least likely item's probability (global_min weights).
    """

    def __init__(self, alpha: float, capacity: int):
        self.alpha, self.capacity = alpha, capacity
        self._delta: dict[int, float] = {}
        self._inserted_at: dict[int, int] = {}
        self._snapshot = np.empty(0)  # -|delta| of known items, ascending.
        self._unseen = 0
        self.max_rank = 1  # The largest rank whose priority was written since the last re-rank (or at it).

    def forget_evicted(self, inserted: int) -> None:
        """Drops keys the FIFO remover has evicted (all older than the last `capacity` inserts)."""
        oldest_live = inserted - self.capacity
        for key in [k for k, i in self._inserted_at.items() if i < oldest_live]:
            del self._delta[key], self._inserted_at[key]

    def is_stale(self) -> bool:
        """True while the last sort covers fewer than half the known items.

        Re-ranking whenever the known set has doubled since the last sort costs
        O(n log n) in all while the replay fills (the sorted sizes form a
        geometric series), and keeps every binary search in a snapshot of at
        least half the known items, so ranks are not stuck at 1 until the first
        `rerank_interval` updates have passed.
        """
        return 2 * len(self._snapshot) < len(self._delta)

    def priorities(self, keys: list[int], inserted_at: list[int], abs_delta: np.ndarray) -> list[float]:
        """The stored priorities p_i^alpha = rank(i)^-alpha of items with new |delta|s (PER §3.3)."""
        self._delta.update(zip(keys, abs_delta.tolist()))
        self._inserted_at.update(zip(keys, inserted_at))
        ranks = self._unseen + np.searchsorted(self._snapshot, -abs_delta, side="left") + 1
        self.max_rank = max(self.max_rank, int(ranks.max(initial=0)))
        return self._rank_priorities(ranks.tolist())

    def bytes_per_item(self) -> float:
        """The Python memory this tracker holds per known item: its containers and their entries."""
        entries = [*self._delta.items(), *self._inserted_at.items()]
        size = sum(sys.getsizeof(x) for x in (self._delta, self._inserted_at, self._snapshot))
        size += sum(sys.getsizeof(key) + sys.getsizeof(value) for key, value in entries)
        return size / max(len(self._delta), 1)

    def rerank(self, table_size: int) -> dict[int, float]:
        """Exact priorities for every known live item; equal |delta|s rank in the order they became known."""
        n = len(self._delta)
        keys = np.fromiter(self._delta, np.uint64, n)
        negative = -np.fromiter(self._delta.values(), np.float64, n)
        order = np.argsort(negative, kind="stable")
        self._unseen = max(table_size - n, 0)
        self._snapshot = negative[order]
        self.max_rank = max(self._unseen + n, 1)
        return dict(zip(keys[order].tolist(), self._rank_priorities(range(self._unseen + 1, self._unseen + n + 1))))

    def _rank_priorities(self, ranks: Iterable[int]) -> list[float]:
        """rank^-alpha with Python's pow, as `_min_probability`'s: numpy's can differ in the last bit and so
        push a global_min weight above 1."""
        return [rank**-self.alpha for rank in ranks]


class LiveMinimum:
    """The smallest priority among a proportional replay's live items, for global_min weights.

    Reverb does not report a table's smallest priority, and the smallest ever
    written is no bound to keep: once its item is evicted or written again,
    it would go on shrinking every later weight (an item at |delta| = 0 would
    scale all of them by (epsilon / a typical p)^(alpha beta) for the rest of
    the run). So the client keeps each written item's priority and insertion
    index, and a heap of them; an entry whose item was written again, or
    evicted by the FIFO remover (older than the last `capacity` inserts), is
    dropped when it reaches the top. An item never written holds the running
    maximum priority of its insertion, at least p_1 = 1, so the minimum given
    is at most 1: exact whenever a written item holds it.

    `floor`, from a checkpoint older than this class, is the smallest priority
    that run had written, as (priority, insertion count at the save): a lower
    bound on its live items until the `capacity` inserts after the save have
    evicted them.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.written: dict[int, tuple[float, int]] = {}  # Key -> (priority, insertion index).
        self.floor: tuple[float, int] | None = None
        self._heap: list[tuple[float, int, int]] = []  # (priority, insertion index, key), stale entries too.

    def write(self, keys: list[int], inserted_at: list[int], new: list[float], inserted: int) -> None:
        """Records the priorities `new` of live items `keys`; `inserted`: the replay's insertion count."""
        for key, at, priority in zip(keys, inserted_at, new):
            self.written[key] = (priority, at)
            heapq.heappush(self._heap, (priority, at, key))
        # Mostly stale entries: rebuild from the live items, at most 2 capacity of them (items of several
        # actors count as live up to `capacity` inserts late, `UNKNOWN_INSERTION`), so at most one
        # rebuild per `capacity` writes.
        if len(self._heap) > 3 * self.capacity:
            oldest_live = inserted - self.capacity
            self.restore({k: v for k, v in self.written.items() if v[1] >= oldest_live}, self.floor)

    def restore(self, written: dict[int, tuple[float, int]], floor: tuple[float, int] | None) -> None:
        self.written, self.floor = written, floor
        self._heap = [(priority, at, key) for key, (priority, at) in written.items()]
        heapq.heapify(self._heap)

    def minimum(self, inserted: int) -> float:
        """The smallest live priority, at most 1 (see the class); `inserted`: the replay's insertion count."""
        oldest_live = inserted - self.capacity
        while self._heap:
            priority, at, key = self._heap[0]
            current = self.written.get(key) == (priority, at)
            if current and at >= oldest_live:
                break
            if current:  # Evicted: forgotten, so `written` holds no more items than the heap entries.
                del self.written[key]
            heapq.heappop(self._heap)
        smallest = self._heap[0][0] if self._heap else 1.0
        if self.floor is not None and self.floor[1] > oldest_live:  # Some item of the old run may be live.
            smallest = min(smallest, self.floor[0])
        return min(smallest, 1.0)


class TransitionWriter:
    """Transitions (S_{j-1}, A_{j-1}, R_j, terminal_j, S_j) of N env streams, each frame stored once.

    A state is a stack of the k newest frames (Atari: k = 4 frames of
    [84, 84]; k = 1 when an observation is one frame, as in MinAtar and
    Catch). Stream i has its own `TrajectoryWriter`, whose history holds one
    step per frame: `frame`, and, on the frame that completes S_j, `step`, the
    transition's [id (insertion index), action, reward, terminal] as float64
    (exact for each). Both columns are chunked over `chunk_length` steps, so
    Reverb compresses a chunk of frames, not one frame (issue #12).

    An item has two columns, because each column costs every item about
    200 bytes of server memory (measured, `per.benchmark_memory`) and a
    sampler decompresses each column's chunks on its own (issue #13): `step`,
    and `window`, the references to the frames of S_{j-1} followed by the
    frames S_j adds. S_{j-1} is the window's first k frames and S_j its last
    k. When S_j continues S_{j-1} (S_j[:-1] == S_{j-1}[1:]: every step of a
    game, life losses included) only S_j's newest frame is written, and the
    window holds k + 1 frames. Any other S_j (the first step; a new game the
    env reset itself to, whose stack holds what the env put there) is written
    whole, a window of 2k, so no stack mixes frames of two games. An S_{j-1}
    that is not the stream's last S_j (a caller that skipped steps) is
    written whole too: an item always returns the arrays it was given. (No
    window references a frame twice, which Reverb would reject.)
    """

    def __init__(self, client: reverb.Client, table_name: str, frame_stack: int, chunk_length: int):
        if frame_stack < 1 or chunk_length < 1:
            raise UsageError(f"frame_stack={frame_stack} and chunk_length={chunk_length} must be >= 1")
        self.client, self.table_name = client, table_name
        self.frame_stack, self.chunk_length = frame_stack, chunk_length
        # S_{j-1}'s frames must outlive the writing of a whole new S_j, and a
        # chunk can be no longer than the references the writer keeps.
        self._keep_alive = max(chunk_length, 2 * frame_stack)
        self._writers: dict[int, reverb.TrajectoryWriter] = {}
        self._last: dict[int, tuple[np.ndarray, list]] = {}  # stream -> (S_j, its k frame references)

    def unpack(self, items: Sequence[Sequence[np.ndarray]]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Sampled items' columns -> ([B] ids, the five fields of the transitions, each [B, ...])."""
        # np.array copies a list of equal arrays in one C loop: half np.stack's time (issue #13).
        step = np.array([columns[0] for columns in items])
        states = [self._states(columns) for columns in items]
        observation = np.array([s for s, _ in states])
        next_observation = np.array([s for _, s in states])
        fields = [step[:, 1].astype(np.int32), step[:, 2].astype(np.float32), step[:, 3].astype(np.float32)]
        return step[:, 0].astype(np.int64), [observation, *fields, next_observation]

    def _states(self, columns: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """An item's S_{j-1} and S_j: the ends of its window.

        An item written before issue #13, which a replay checkpoint made then
        holds, has three columns instead: step, S_{j-1} and S_j.
        """
        if len(columns) == 3:
            return columns[1], columns[2]
        window, k = columns[1], self.frame_stack
        return (window[0], window[-1]) if k == 1 else (window[:k], window[-k:])

    def add(self, stream: int, transition: Sequence[Any], item_id: int, priority: float) -> None:
        """Writes transition j of `stream` (its new frames only) and creates its item."""
        observation, action, reward, terminal, next_observation = transition
        writer = self._writer(stream)
        last = self._last.get(stream)
        if last is not None and np.array_equal(last[0], observation):
            state = last[1]  # S_{j-1} is the stream's last S_j: already written.
        else:
            state = [self._append(writer, frame) for frame in self._frames(observation)]
        frames = self._frames(next_observation)
        step = np.array([item_id, action, reward, terminal], np.float64)
        if np.array_equal(frames[:-1], self._frames(observation)[1:]):
            new = [self._append(writer, frames[-1], step)]
            next_state = [*state[1:], *new]
        else:
            new = [self._append(writer, frame) for frame in frames[:-1]]
            new.append(self._append(writer, frames[-1], step))
            next_state = new
        window = trajectory_writer.TrajectoryColumn([*state, *new])
        writer.create_item(self.table_name, priority, [writer.history["step"][-1], window])
        self._last[stream] = (np.array(next_observation), next_state)  # A copy: envs may reuse buffers.

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        self._last.clear()

    def _frames(self, state: np.ndarray) -> np.ndarray:
        """[k, *frame]: a stack's frames; [1, *observation] when k = 1."""
        state = np.asarray(state)
        return state if self.frame_stack > 1 else state[None]

    def _writer(self, stream: int) -> reverb.TrajectoryWriter:
        if stream not in self._writers:
            writer = self.client.trajectory_writer(num_keep_alive_refs=self._keep_alive)
            for column in ("frame", "step"):
                writer.configure((column,), num_keep_alive_refs=self._keep_alive, max_chunk_length=self.chunk_length)
            self._writers[stream] = writer
        return self._writers[stream]

    @staticmethod
    def _append(writer: reverb.TrajectoryWriter, frame: np.ndarray, step: np.ndarray | None = None):
        """Appends a history step (a frame, and the transition's `step` if given); the frame's reference."""
        writer.append({"frame": frame} if step is None else {"frame": frame, "step": step})
        (reference,) = writer.history["frame"][-1]
        return reference


class _Drawn(NamedTuple):
    """A drawn batch, decoded: what `PrioritizedReplay.sample` needs of Reverb's items."""

    keys: np.ndarray  # [k] uint64.
    probabilities: np.ndarray  # [k] P(i).
    ids: np.ndarray  # [k] int64 insertion indices, or UNKNOWN_INSERTION.
    data: list[np.ndarray]  # The stored fields, each [k, ...].
    first: tuple[float, int, float]  # The first item's probability, table size and priority.


def _draw(sampler: Any, batch_size: int, decode: Callable[[list[list[np.ndarray]]], _Drawn]) -> _Drawn:
    """`batch_size` items (each [key, probability, table_size, priority, times_sampled, *its columns]), decoded."""
    return decode([sampler.GetNextTrajectory() for _ in range(batch_size)])


class _Drawer:
    """Batches drawn and decoded one at a time, on request, by one daemon thread, so that the caller can stop
    waiting for a batch, or work meanwhile.

    One thread for the replay's life, because starting one per batch cost about a seventh of a
    MinAtar agent step (the start waits for the new thread to take the GIL). It lives until `stop`
    (the replay's `close`) and keeps the sampler and the replay alive until then. A draw that
    fails raises in the caller's thread once; the next request draws again.
    """

    def __init__(self, sampler: Any, batch_size: int, decode: Callable[[list[list[np.ndarray]]], _Drawn]):
        self._requests: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[_Drawn | Exception] = queue.SimpleQueue()
        self.pending = False  # A batch is requested and not yet taken.
        self.thread = threading.Thread(target=self._run, args=(sampler, batch_size, decode), daemon=True)
        self.thread.start()

    def _run(self, sampler: Any, batch_size: int, decode: Callable[[list[list[np.ndarray]]], _Drawn]) -> None:
        while self._requests.get():
            try:
                self._results.put(_draw(sampler, batch_size, decode))
            except Exception as error:  # Raised in the caller's thread, by `result`.
                self._results.put(error)

    def request(self) -> None:
        """Starts drawing the next batch (at most one is pending)."""
        if not self.pending:
            self.pending = True
            self._requests.put(True)

    def result(self, timeout_s: float | None) -> _Drawn | None:
        """The pending batch; None if it is not complete within `timeout_s` (None: waits for it)."""
        try:
            drawn = self._results.get(timeout=timeout_s)
        except queue.Empty:
            return None
        self.pending = False
        if isinstance(drawn, Exception):
            raise drawn
        return drawn

    def stop(self) -> None:
        """Ends the thread once it is done with the pending batch (one the rate limiter holds back: never)."""
        self._requests.put(False)


class _PriorityWrites:
    """`mutate_priorities` calls made in order by one daemon thread, so that their caller can learn meanwhile.

    An error is raised in the caller's thread by the next `submit` or `wait`.
    """

    def __init__(self, client: reverb.Client, table_name: str):
        self._client, self._table_name = client, table_name
        self._queue: queue.Queue[dict[int, float]] = queue.Queue()
        self._error: Exception | None = None
        self.submitted, self._written = 0, 0
        self._written_changed = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            updates = self._queue.get()
            try:
                if self._error is None:
                    self._client.mutate_priorities(self._table_name, updates=updates)
            except Exception as error:  # Raised in the caller's thread.
                self._error = error
            with self._written_changed:
                self._written += 1
                self._written_changed.notify_all()

    def submit(self, updates: dict[int, float]) -> None:
        self._raise()
        self.submitted += 1
        self._queue.put(updates)

    def wait(self, submitted: int | None = None) -> None:
        """Returns once the first `submitted` updates (default: all) are in the table."""
        count = self.submitted if submitted is None else submitted
        with self._written_changed:
            self._written_changed.wait_for(lambda: self._written >= count)
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error


class PrioritizedReplay:
    """Insert, sample with IS weights, and update priorities of one Reverb table.

    Items are written with `TrajectoryWriter`s, flushed every `flush_every`
    inserts, and sampled by one Reverb sampler per batch size, kept open
    across calls and returning numpy arrays (issue #13: a `TrajectoryDataset`
    read through tf.data cost about twice the time per batch). A sample
    flushes first, so it can draw every item added, unless at most
    `max_unseen` items wait unflushed: a caller whose rate limiter tolerates
    the sampler missing that many of the newest items (the agent) sets it,
    so that flushes do not cut the chunks short. The first sample always
    flushes (the table must reach its minimum size).

    The sampler keeps at most one batch in flight (Reverb draws the next
    batch as this one is taken), so a sample may predate the previous
    batch's priority update by one batch, as in Acme's prioritized DQN, and
    the rate limiter never counts more than a batch of samples the learner
    has not taken, which a checkpoint loses. Call `close` before its server
    stops.

    With other writers (actor processes, Ape-X style): a writer that is not
    the table's only one (`sole_writer=False`) ids its items
    `UNKNOWN_INSERTION`; the sampling client, which writes nothing, learns the
    item layout from `expect_transitions`, counts the table's inserts with
    `count_inserts`, and with `sample_timeout_ms` >= 0 gets None from a
    `sample` whose batch is not complete that long (the rate limiter holds it
    back), so its caller can look up from a stalled replay. The batch goes on
    being drawn by a daemon thread, one per batch size for the replay's life
    (Reverb's Python sampler has no timeout), and the next `sample` of that
    size takes it: no draw is lost.

    With `overlap` (both agents' learners; `per.agent.overlaps_acting` says
    when the one that acts itself may), the replay's work moves off its
    caller's path, as Acme's learners move it (a prefetching dataset, an
    asynchronous priority updater): as a batch is taken, the next one is drawn
    and decoded by that thread, and `update`'s priorities are written in
    order by another. TF's update releases the GIL, so both run while the
    caller learns. A sample may then predate the last three batches' priority
    updates (of one batch size, sampled alone), however slow the writes, not
    one: the sampler's batch in flight was fetched as the batch drawn ahead
    was, which waits only for the writes of the batches before the last
    (almost always long done, so it rarely waits; a `sample_timeout_ms` does
    not bound that wait). The rate limiter counts up to two batches the
    learner has not taken; `flush` (before a checkpoint) waits for every
    priority write.
    """

    def __init__(
        self,
        client: reverb.Client,
        config: ReplayConfig,
        table_name: str = "replay",
        flush_every: int = 256,
        *,
        frame_stack: int = 1,
        chunk_length: int = CHUNK_LENGTH,
        max_unseen: int = 0,
        sole_writer: bool = True,
        sample_timeout_ms: int = -1,
        overlap: bool = False,
    ):
        self.client, self.config, self.table_name = client, config, table_name
        self.max_priority = 1.0  # Algorithm 1, line 2: p_1 = 1.
        global_min = config.variant == "proportional" and config.weight_normalization == "global_min"
        self.live_minimum = LiveMinimum(config.capacity) if global_min else None
        self.inserted = 0
        self._updates, self._flush_every, self._max_unseen, self._unflushed = 0, flush_every, max_unseen, 0
        self._sole_writer, self._sample_timeout_ms, self._overlap = sole_writer, sample_timeout_ms, overlap
        self._priority_writes = _PriorityWrites(client, table_name) if overlap else None
        self._written_before_draw = 0  # With `overlap`: the priority writes the next draw waits for.
        self._rank = RankTracker(config.alpha, config.capacity) if config.variant == "rank" else None
        self._writer = None  # `add`'s.
        self._transitions = TransitionWriter(client, table_name, frame_stack, chunk_length)
        self._observation: tuple[tuple[int, ...], np.dtype] | None = None  # Of `add_transition`'s items.
        self._samplers: dict[int, Any] = {}  # Batch size -> Reverb's sampler.
        self._drawers: dict[int, _Drawer] = {}  # Batch size -> its drawing thread.
        self._inserted_at: dict[int, int] = {}

    def add(self, data: Sequence[Any]) -> None:
        """Stores one item (a list of arrays, each in a one-step chunk) at the maximal priority."""
        row = [np.int64(self.inserted), *(np.asarray(x) for x in data)]
        if self._writer is None:
            self._check_one_layout(self._observation is not None)
            self._writer = self.client.trajectory_writer(num_keep_alive_refs=1)
        self._writer.append(row)
        self._writer.create_item(
            self.table_name, self._new_priority(), [column[-1:] for column in self._writer.history]
        )
        self._count_insert()

    def add_transition(self, transition: Sequence[Any], stream: int = 0) -> None:
        """Stores transition (S_{j-1}, A_{j-1}, R_j, terminal_j, S_j) of env `stream` at the maximal priority.

        Only the frames not yet written for `stream` are stored (see
        `TransitionWriter`); samples return the fields as given.
        """
        self._check_one_layout(self._writer is not None)
        if self._observation is None:
            self.expect_transitions(transition[0])
        item_id = self.inserted if self._sole_writer else UNKNOWN_INSERTION
        self._transitions.add(stream, transition, item_id, self._new_priority())
        self._count_insert()

    def expect_transitions(self, observation: np.ndarray) -> None:
        """Samples `add_transition`'s items, with observations like `observation`, whoever writes them."""
        observation = np.asarray(observation)
        self._observation = observation.shape, observation.dtype

    def count_inserts(self, n: int) -> None:
        """`n` items other clients inserted (actor processes, counted from the table): they age the items."""
        self.inserted += n

    @staticmethod
    def _check_one_layout(other_used: bool) -> None:
        if other_used:
            raise UsageError("a replay holds either add()'s items or add_transition()'s, not both")

    def _new_priority(self) -> float:
        # Rank-based items enter at rank 1, whose stored priority 1^-alpha is 1.
        return 1.0 if self._rank else self.max_priority

    def _count_insert(self) -> None:
        self.inserted += 1
        self._unflushed += 1
        if self._unflushed >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        """Makes every added item visible to samplers, and every priority update so far part of the table."""
        if self._priority_writes is not None:
            self._priority_writes.wait()
        if self._writer is not None:
            self._writer.flush()
        self._transitions.flush()
        self._unflushed = 0

    def sample(self, batch_size: int, beta: float) -> Batch | None:
        """k items with P(i) and IS weights; None if the batch was not complete within `sample_timeout_ms`."""
        if batch_size not in self._samplers or self._unflushed > self._max_unseen:
            self.flush()
        drawn = self._take(batch_size)
        if drawn is None:
            return None
        self._check_observations(drawn.data[0])
        keys, ids = drawn.keys, drawn.ids
        self._inserted_at = dict(zip(keys.tolist(), ids.tolist()))
        for key in keys[ids == UNKNOWN_INSERTION].tolist():
            self._inserted_at[key] = self._first_sampled(key)
        probability, table_size, priority = drawn.first
        weights = priorities.importance_weights(
            drawn.probabilities, table_size, beta, self.config.weight_normalization,
            self._min_probability(priority, probability, table_size),
        )  # fmt: skip
        return Batch(keys, drawn.data, drawn.probabilities, weights, table_size)

    def _decode(self, items: list[list[np.ndarray]]) -> _Drawn:
        """Reverb's items -> keys, P(i), insertion ids and the fields (pure: it may run in a draw's thread)."""
        batch_size = len(items)
        _, probability, table_size, priority = items[0][:4]  # The first item's, as the IS weights take them.
        keys = np.fromiter((item[0] for item in items), np.uint64, batch_size)
        probabilities = np.fromiter((item[1] for item in items), np.float64, batch_size)
        columns = [item[SAMPLE_INFO:] for item in items]
        if self._writer is None:
            ids, data = self._transitions.unpack(columns)
        else:  # `add`'s items: every column has a leading step axis of 1.
            ids, *data = (np.stack(column)[:, 0] for column in zip(*columns))
        return _Drawn(keys, probabilities, ids, data, (float(probability), int(table_size), float(priority)))

    def _take(self, batch_size: int) -> _Drawn | None:
        """A batch from the sampler for `batch_size`; None if not complete within `sample_timeout_ms`."""
        if batch_size not in self._samplers:
            # The pybind sampler that Reverb's own `Client.sample` opens per call; kept open here. At most
            # `batch_size` items in flight: the next batch only.
            self._samplers[batch_size] = self.client._client.NewSampler(self.table_name, UNLIMITED, batch_size)
        if self._sample_timeout_ms < 0 and not self._overlap:
            return _draw(self._samplers[batch_size], batch_size, self._decode)
        if batch_size not in self._drawers:
            self._drawers[batch_size] = _Drawer(self._samplers[batch_size], batch_size, self._decode)
        drawer = self._drawers[batch_size]
        drawer.request()  # A no-op when one is pending (drawn ahead, or left by a timed-out `sample`).
        drawn = drawer.result(None if self._sample_timeout_ms < 0 else self._sample_timeout_ms / 1000)
        if drawn is not None and self._overlap:
            # The next batch is drawn while the caller learns from this one, once the priorities of
            # every batch before the previous one are written (almost always long since), so that
            # how far a sample predates the updates is bounded by batches, not by the writer's lag.
            self._priority_writes.wait(self._written_before_draw)
            self._written_before_draw = self._priority_writes.submitted
            drawer.request()
        return drawn

    def _check_observations(self, observation: np.ndarray) -> None:
        """Sampled S_{j-1} against `expect_transitions`' (a table of another env's items, e.g. a checkpoint's)."""
        if self._observation is not None and (observation.shape[1:], observation.dtype) != self._observation:
            raise UsageError(
                f"the replay table holds observations of shape {observation.shape[1:]} and dtype "
                f"{observation.dtype}; this run's are {self._observation[0]}, {self._observation[1]}"
            )

    def _first_sampled(self, key: int) -> int:
        """An `UNKNOWN_INSERTION` item's insertion index: the insert count when this client first sampled it.

        The rank tracker keeps that count for every key it knows. Without one
        (proportional, uniform), the age only decides whether this sample's
        update is dropped, and an item just sampled is live: the count now.
        """
        known = self._rank._inserted_at if self._rank else {}
        return known.get(key, self.inserted)

    def close(self) -> None:
        """Stops sampling and writing (before the server stops).

        A draw the rate limiter still holds back (left by a timed-out
        `sample`, or drawn ahead with `overlap`) is abandoned: its thread ends
        with the process. The other drawing threads end once their batch in
        flight is drawn.
        """
        for drawer in self._drawers.values():
            drawer.stop()
        self._samplers.clear()
        self._drawers.clear()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._transitions.close()

    def _min_probability(self, priority: float, probability: float, table_size: int) -> float | None:
        if self.config.weight_normalization != "global_min":
            return None
        # sum_k p_k^a = p_i^a / P(i) for any sampled i (the stored priority is p_i).
        exponent = self.config.selector_exponent
        total = priority**exponent / probability
        if self._rank:  # The largest rank: the table's size, or more between re-ranks (`RankTracker`).
            return max(table_size, self._rank.max_rank) ** -self.config.alpha / total
        return self.live_minimum.minimum(self.inserted) ** exponent / total

    def inserted_at(self, keys: np.ndarray) -> np.ndarray:
        """[k] the insertion index of each of the last sample's `keys` (another key: taken as the newest)."""
        get = self._inserted_at.get
        return np.array([get(k, self.inserted) for k in np.asarray(keys).tolist()], np.int64)

    def update(self, keys: np.ndarray, td_errors: np.ndarray) -> None:
        """Sets the priorities of the last sample's items from their new TD errors.

        Items the FIFO remover evicted since that sample are dropped (no-ops);
        a key missing from the last sample counts as live.
        """
        inserted_at = self.inserted_at(keys)
        live = inserted_at >= self.inserted - self.config.capacity  # Older items were evicted.
        keys, inserted_at = np.asarray(keys)[live].tolist(), inserted_at[live]
        abs_delta = np.abs(np.asarray(td_errors, np.float64))[live]
        if len(keys) == 0:
            return
        if self._rank:
            new = self._rank.priorities(keys, inserted_at.tolist(), abs_delta)
        else:
            new = priorities.proportional_priority(abs_delta, self.config.epsilon).tolist()
            if self.live_minimum is not None:
                self.live_minimum.write(keys, inserted_at.tolist(), new, self.inserted)
        updates = dict(zip(keys, new))  # A key sampled twice takes its last |delta|.
        if not self._rank:  # The largest priority written: not a sampled-twice key's first, which is not.
            self.max_priority = max(self.max_priority, max(updates.values()))
        self._mutate(updates)
        self._updates += len(updates)
        if self._rank and (self._updates >= self.config.rerank_interval or self._rank.is_stale()):
            self.rerank()

    def _mutate(self, updates: dict[int, float]) -> None:
        if self._priority_writes is None:
            self.client.mutate_priorities(self.table_name, updates=updates)
        else:
            self._priority_writes.submit(updates)

    def rerank(self) -> None:
        """Rank-based: rewrites every known item's priority from an exact sort."""
        self._rank.forget_evicted(self.inserted)
        size = self.client.server_info()[self.table_name].current_size
        self._mutate(self._rank.rerank(size))
        self._updates = 0
