"""Prioritized replay: the maths, the exact samplers, and Reverb sampled statistically."""

import dataclasses
import random
import threading
import time

import numpy as np
import pytest
import reverb
from scipy import stats

from common.errors import UsageError
from common.reverb import server as reverb_server
from per import priorities, replay, replay_config
from per.structures import RankOrder, SumTree

DRAWS = 20_000
P_VALUE = 1e-4  # Chi-square tests reject a correct sampler with this probability.


def assert_frequencies_match(counts, expected_probabilities):
    expected = np.asarray(expected_probabilities) * np.sum(counts)
    assert stats.chisquare(counts, expected).pvalue > P_VALUE, (counts, expected)


# The maths. -----------------------------------------------------------------


def test_proportional_priority_is_abs_td_plus_epsilon():
    td = np.array([-2.0, 0.0, 0.5])
    np.testing.assert_array_equal(priorities.proportional_priority(td, 0.25), [2.25, 0.25, 0.75])


def test_importance_weights_match_the_formula():
    P = np.array([0.1, 0.2, 0.05])
    raw = (100 * P) ** -0.5
    np.testing.assert_allclose(priorities.importance_weights(P, 100, 0.5), raw / raw.max())
    # N * P_min = 2, not 1, so the normaliser (N P_min)^-beta is not 1 and a wrong one shows.
    global_min = priorities.importance_weights(P, 100, 0.5, "global_min", min_probability=0.02)
    np.testing.assert_allclose(global_min, raw / (100 * 0.02) ** -0.5)
    # A batch drawn before the latest writes: its item at 0.05 is now less likely than the replay's least.
    stale = priorities.importance_weights(P, 100, 0.5, "global_min", min_probability=0.08)
    np.testing.assert_allclose(stale, raw / (100 * 0.05) ** -0.5)
    np.testing.assert_allclose(priorities.importance_weights(P, 100, 0.0), [1.0, 1.0, 1.0])


# The exact samplers. --------------------------------------------------------


@pytest.mark.parametrize("capacity", [2, 3, 5, 1000])  # Not only powers of two.
def test_sum_tree_samples_in_proportion_to_its_values(capacity):
    tree = SumTree(capacity)
    values = np.random.default_rng(capacity).random(capacity) + 0.01
    values[0] = 0.0
    for i, v in enumerate(values):
        tree.set(i, float(v))
    assert tree.total == pytest.approx(values.sum())
    rng = random.Random(0)
    counts = np.bincount([tree.sample(rng) for _ in range(DRAWS if capacity < 1000 else 200_000)], minlength=capacity)
    assert counts[0] == 0  # Zero priority is never drawn.
    if capacity > 2:  # Two leaves: leaf 0 never drawn is the whole check.
        assert_frequencies_match(counts[1:], values[1:] / values[1:].sum())


def test_rank_order_keeps_ranks_and_samples_the_power_law():
    alpha, size = 0.7, 6
    order = RankOrder(size, alpha)
    deltas = [0.5, 3.0, 0.1, 2.0, 0.0, 1.0]
    for i, d in enumerate(deltas):
        order.update(i, d)
    assert order.ranks() == {1: 1, 3: 2, 5: 3, 0: 4, 2: 5, 4: 6}
    rng = random.Random(1)
    counts = np.bincount([order.sample(rng) for _ in range(DRAWS)], minlength=size)
    by_rank = [counts[i] for i in sorted(order.ranks(), key=order.ranks().get)]
    scaled = np.arange(1, size + 1, dtype=np.float64) ** -alpha  # P(rank r) = r^-alpha / sum_k k^-alpha (eq. 1).
    assert_frequencies_match(by_rank, scaled / scaled.sum())
    np.testing.assert_allclose([order.rank_probability(k) for k in range(1, size + 1)], scaled / scaled.sum())


# Reverb. --------------------------------------------------------------------


@pytest.fixture
def make_replay():
    """Builds (server, replay) pairs and closes the replay before its server stops."""
    made = []

    def make(config, **options):
        server = reverb_server.make_server([replay.table(config)])
        made.append((server, replay.PrioritizedReplay(reverb.Client(f"localhost:{server.port}"), config, **options)))
        return made[-1]

    yield make
    for server, buffer in made:
        buffer.close()
        server.stop()


def fill(buffer, n):
    """Adds items 0..n-1 and flushes: reads that bypass `buffer.sample` (`server_priorities`) see them."""
    for i in range(n):
        buffer.add([np.array([i], np.int32)])
    buffer.flush()


def sample_counts(buffer, n, draws=DRAWS):
    batch = buffer.sample(draws, beta=0.0)
    return np.bincount(batch.data[0][:, 0], minlength=n)


def set_td_errors(buffer, n, td):
    """Samples until every item has been seen once, updating each with td[item]."""
    seen = set()
    while len(seen) < n:
        batch = buffer.sample(64, beta=0.0)
        fresh = [j for j, item in enumerate(batch.data[0][:, 0]) if item not in seen]
        seen.update(int(batch.data[0][j, 0]) for j in fresh)
        buffer.update(batch.keys[fresh], td[batch.data[0][fresh, 0]])


def keys_by_item(buffer, n):
    """Samples, without updating, until every item's key is known: [n] keys, indexed by item."""
    keys = {}
    while len(keys) < n:
        batch = buffer.sample(64, beta=0.0)
        keys.update(zip(batch.data[0][:, 0].tolist(), batch.keys.tolist()))
    return np.array([keys[i] for i in range(n)], np.uint64)


def expected_probabilities(config, td):
    """P(i) = p_i^alpha / sum_k p_k^alpha in float64, from the TD errors set (eq. 1, §3.3)."""
    if config.variant == "rank":
        ranks = 1 + np.argsort(np.argsort(-np.abs(td)))  # Rank 1: the largest |delta|.
        scaled = ranks.astype(np.float64) ** -config.alpha
    else:
        scaled = (np.abs(td) + config.epsilon) ** config.alpha
    return scaled / scaled.sum()


def server_priorities(buffer, live):
    """{insertion index: priority} of the `live` items, read from Reverb's own samples."""
    found = {}
    for _ in range(100):
        for sample in buffer.client.sample("replay", num_samples=256, emit_timesteps=False):
            found[int(sample.data[0][0])] = float(sample.info.priority)
        if len(found) == live:
            return found
    raise AssertionError(f"saw {sorted(found)}, expected {live} live items")


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_reverb_proportional_sampling_matches_p_alpha(alpha, make_replay):
    n = 12
    config = replay_config.ReplayConfig(alpha=alpha, capacity=100)
    server, buffer = make_replay(config)
    fill(buffer, n)
    td = np.linspace(0.1, 3.0, n)
    set_td_errors(buffer, n, td)
    assert_frequencies_match(sample_counts(buffer, n), expected_probabilities(config, td))


@pytest.mark.parametrize("alpha", [0.5, 0.7, 1.0])
def test_reverb_rank_based_sampling_matches_rank_power_law(alpha, make_replay):
    n = 10
    config = replay_config.ReplayConfig(variant="rank", alpha=alpha, capacity=100, rerank_interval=10**9)
    server, buffer = make_replay(config)
    fill(buffer, n)
    td = np.random.default_rng(2).permutation(np.linspace(0.1, 5.0, n))
    set_td_errors(buffer, n, td)
    buffer.rerank()  # Exact ranks for everyone.
    assert_frequencies_match(sample_counts(buffer, n), expected_probabilities(config, td))


def recording_reranks(buffer, value):
    """Makes `buffer.rerank` note `value()` each time it runs; returns the notes, in order."""
    reranks, rerank = [], buffer.rerank
    buffer.rerank = lambda: reranks.append(value()) or rerank()
    return reranks


def documented_rank_priorities(batches, table_size, alpha):
    """{key: p^alpha} after `batches` of (keys, |delta|) updates, from `RankTracker`'s docstring alone.

    An exact re-rank (ranks U + 1.. by |delta|, U = the table's items never updated) whenever the last one
    sorted fewer than half the known keys; between re-ranks an update ranks U + #{last sort's |delta|s
    larger than its own} + 1. No scheduled re-rank: the default interval is never reached here.
    """
    known, sorted_deltas, unseen, priority = {}, [], table_size, {}
    for keys, deltas in batches:
        for key, delta in zip(keys, deltas):
            known[key] = delta
            priority[key] = (unseen + sum(d > delta for d in sorted_deltas) + 1) ** -alpha
        if 2 * len(sorted_deltas) < len(known):
            order = sorted(known, key=lambda k: -known[k])
            unseen, sorted_deltas = table_size - len(known), [known[k] for k in order]
            priority.update({key: (unseen + rank) ** -alpha for rank, key in enumerate(order, start=1)})
    return priority


def test_reverb_rank_based_sampling_follows_ranks_with_the_default_rerank_interval(make_replay):
    """Updates of a few keys at a time, as the learner's: re-ranks only when the last sort grew stale."""
    n = 10
    config = dataclasses.replace(replay_config.PRESETS["rank"], capacity=100)
    assert config.rerank_interval == 10_000  # The default: no scheduled re-rank happens here.
    server, buffer = make_replay(config)
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    td = np.random.default_rng(4).permutation(np.linspace(0.1, 5.0, n))
    reranks = recording_reranks(buffer, lambda: len(buffer._rank._delta))
    batches = [(keys[i : i + 2].tolist(), td[i : i + 2].tolist()) for i in range(0, n, 2)]
    for batch_keys, batch_td in batches:
        buffer.update(np.array(batch_keys, np.uint64), np.array(batch_td))
    assert reranks == [2, 6]  # Stale at 0 of 2 and 2 of 6 known; the last 4 keys rank between re-ranks.
    priority = documented_rank_priorities(batches, n, config.alpha)
    expected = np.array([priority[k] for k in keys.tolist()])
    # Before the fix every item ranked 1 until the first scheduled re-rank: uniform sampling.
    assert stats.chisquare(sample_counts(buffer, n), np.full(n, DRAWS / n)).pvalue < P_VALUE
    assert_frequencies_match(sample_counts(buffer, n), expected / expected.sum())


def test_rank_tracker_between_reranks_ranks_an_update_in_the_last_snapshot():
    """This project's stand-in for App. B.2.1's approximate order: rank(i) = U + #{snapshot items with larger
    |delta|} + 1, p = rank^-alpha (`RankTracker`'s docstring)."""
    alpha, table_size = 0.7, 12
    tracker = replay.RankTracker(alpha, capacity=100)
    known = np.array([0.5, 2.0, 1.0, 4.0, 3.0, 1.0])
    tracker.priorities(list(range(6)), list(range(6)), known)
    assert tracker.is_stale()  # No snapshot yet: every item would rank 1.
    exact = tracker.rerank(table_size)
    unseen = table_size - len(known)  # U: items never sampled hold rank 1's priority, so rank above all.
    # Exact ranks by |delta|, ties in the order the items became known (keys 2 then 5).
    assert exact == {key: (unseen + rank) ** -alpha for rank, key in enumerate([3, 4, 1, 2, 5, 0], start=1)}
    assert not tracker.is_stale()

    new = np.array([5.0, 2.5, 1.0, 0.1])  # Above all, between two, equal to two, below all.
    got = tracker.priorities([0, 1, 6, 7], [0, 1, 6, 7], new)
    larger = [int(np.sum(known > d)) for d in new]  # Against the snapshot of `known`, not the new |delta|s.
    assert larger == [0, 2, 3, 6]
    np.testing.assert_allclose(got, [(unseen + n + 1) ** -alpha for n in larger], rtol=0, atol=0)
    assert not tracker.is_stale()  # 6 sorted of 8 known.
    tracker.priorities([8, 9, 10, 11, 12], [8, 9, 10, 11, 12], np.ones(5))
    assert tracker.is_stale()  # 6 sorted of 13 known: fewer than half.


def test_rank_based_replay_reranks_every_rerank_interval_updates(make_replay):
    n, interval = 10, 25
    config = replay_config.ReplayConfig(variant="rank", alpha=0.7, capacity=100, rerank_interval=interval)
    server, buffer = make_replay(config)
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    buffer.update(keys, np.linspace(0.1, 5.0, n))  # The first snapshot (it was stale): counts restart.
    reranks = recording_reranks(buffer, lambda: buffer._updates)
    for update in range(1, 8):
        buffer.update(keys[:5], np.full(5, float(update)))  # 5 updates per call, never stale.
        assert reranks == [interval] * (update // 5), update


@pytest.mark.parametrize("overlap", [False, True])
def test_a_sampler_kept_open_across_samples_draws_p_alpha(make_replay, overlap):
    """Many batches from one persistent sampler (the learner's use), not one large batch: still eq. 1."""
    n, batch_size = 12, 32
    config = replay_config.ReplayConfig(alpha=0.6, capacity=100)
    server, buffer = make_replay(config, overlap=overlap)
    fill(buffer, n)
    td = np.random.default_rng(6).permutation(np.linspace(0.1, 3.0, n))
    buffer.update(keys_by_item(buffer, n), td)
    items = [buffer.sample(batch_size, beta=0.0).data[0][:, 0] for _ in range(DRAWS // batch_size)]
    assert len(buffer._samplers) == 2  # keys_by_item's and this one's, each reused.
    assert_frequencies_match(np.bincount(np.concatenate(items), minlength=n), expected_probabilities(config, td))


def drawn_for(replays: list, decode) -> bool:
    """Whether a `replay._draw` call (its `decode`, a bound method) is for one of `replays`.

    A test that patches `_draw` counts only its own replay's draws: an earlier test's drawing
    thread, with a batch requested ahead, may still draw after that replay closed (seen in a loaded CI run).
    """
    return getattr(decode, "__self__", None) in replays


def test_overlapped_batches_are_all_drawn_by_one_thread(make_replay, monkeypatch):
    """One drawing thread for the replay's life: a thread started per batch cost a seventh of a MinAtar step."""
    drawn_by, draw, ours = [], replay._draw, []

    def recorded(sampler, batch_size, decode):
        if drawn_for(ours, decode):
            drawn_by.append(threading.get_native_id())
        return draw(sampler, batch_size, decode)

    monkeypatch.setattr(replay, "_draw", recorded)
    server, buffer = make_replay(replay_config.ReplayConfig(alpha=0.6, capacity=100), overlap=True)
    ours.append(buffer)
    fill(buffer, 12)
    for _ in range(10):
        buffer.sample(8, beta=0.0)
    assert len(drawn_by) >= 10 and len(set(drawn_by)) == 1
    assert threading.get_native_id() not in drawn_by  # Drawn off the caller's thread.


def test_a_draw_that_fails_raises_in_the_callers_thread_and_the_next_sample_draws_again(make_replay, monkeypatch):
    draw, failures, ours = replay._draw, [RuntimeError("the sampler failed")], []

    def fail_once(sampler, batch_size, decode):
        if failures and drawn_for(ours, decode):
            raise failures.pop()
        return draw(sampler, batch_size, decode)

    monkeypatch.setattr(replay, "_draw", fail_once)
    server, buffer = make_replay(replay_config.ReplayConfig(alpha=0.6, capacity=100), overlap=True)
    ours.append(buffer)
    fill(buffer, 12)
    with pytest.raises(RuntimeError, match="the sampler failed"):
        buffer.sample(8, beta=0.0)
    assert len(buffer.sample(8, beta=0.0).keys) == 8


def test_close_ends_the_drawing_threads(make_replay):
    server, buffer = make_replay(replay_config.ReplayConfig(alpha=0.6, capacity=100), overlap=True)
    fill(buffer, 12)
    buffer.sample(8, beta=0.0)  # Its thread draws the next batch, which the table allows at once.
    (drawer,) = buffer._drawers.values()
    buffer.close()
    drawer.thread.join(timeout=10)
    assert not drawer.thread.is_alive()


def test_a_sample_predates_the_previous_batchs_update_by_at_most_one_batch(make_replay):
    """The sampler may draw batch n+1 as batch n is taken, before its update; batch n+2 sees that update."""
    n, batch_size = 8, 16
    server, buffer = make_replay(replay_config.ReplayConfig(alpha=1.0, epsilon=0.0, capacity=100))
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    buffer.sample(batch_size, beta=0.0)  # Batch n.
    buffer.update(keys, np.eye(n)[0])  # Only item 0 keeps a priority: the others have P = 0.
    buffer.sample(batch_size, beta=0.0)  # Batch n+1: the sampler's worker thread may have drawn it already.
    for _ in range(3):
        assert set(buffer.sample(batch_size, beta=0.0).data[0][:, 0].tolist()) == {0}


class SlowClient:
    """A client whose priority writes lag well behind their caller, as on a busy machine."""

    def __init__(self, client: reverb.Client, seconds: float):
        self._client, self._seconds = client, seconds

    def mutate_priorities(self, table: str, updates: dict[int, float]) -> None:
        time.sleep(self._seconds)
        self._client.mutate_priorities(table, updates=updates)


def test_overlapped_a_sample_predates_the_last_three_batches_updates_at_most(make_replay):
    """With `overlap` batches n+1 to n+3 may miss batch n's update; n+4 sees it, however far the writes lag.

    Batch n+3's items are fetched by Reverb's sampler (its batch in flight) as batch n+2 is drawn, which
    starts as n+1 is taken and waits for the writes before batch n's. Here each write takes 1 s, far
    longer than the samples.
    """
    n, batch_size = 8, 16
    server, buffer = make_replay(replay_config.ReplayConfig(alpha=1.0, epsilon=0.0, capacity=100), overlap=True)
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    buffer._priority_writes._client = SlowClient(buffer.client, 1.0)
    buffer.sample(batch_size, beta=0.0)  # Batch n.
    buffer.update(keys, np.eye(n)[0])  # Only item 0 keeps a priority: the others have P = 0.
    for _ in range(3):  # Batches n+1 to n+3: drawn, or fetched, before the update was written.
        buffer.sample(batch_size, beta=0.0)
    for _ in range(3):
        assert set(buffer.sample(batch_size, beta=0.0).data[0][:, 0].tolist()) == {0}


@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_overlapped_priority_writes_are_all_in_the_table_in_order_after_a_flush(variant, make_replay):
    """A checkpoint flushes first: it must hold every priority `update` wrote, the last one per key."""
    n = 12
    config = dataclasses.replace(replay_config.PRESETS[variant], capacity=100)
    server, buffer = make_replay(config, overlap=True)
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    submitted, submit = [], buffer._priority_writes.submit
    buffer._priority_writes.submit = lambda updates: submitted.append(dict(updates)) or submit(updates)
    buffer._priority_writes._client = SlowClient(buffer.client, 0.01)
    rng = np.random.default_rng(7)
    for _ in range(3):  # Every key written three times, each write queued behind the others.
        for j in rng.permutation(n):
            buffer.update(keys[j : j + 1], rng.uniform(0.1, 3.0, 1))
    buffer.flush()
    last = {}
    for updates in submitted:
        last.update(updates)
    assert len(submitted) >= 3 * n and set(last) == set(keys.tolist())
    assert server_priorities(buffer, n) == pytest.approx({j: last[int(keys[j])] for j in range(n)})


def test_an_overlapped_priority_write_that_fails_is_raised_in_the_callers_thread():
    class Failing:
        def mutate_priorities(self, table, updates):
            raise RuntimeError(f"{table} is gone")

    writes = replay._PriorityWrites(Failing(), "replay")
    writes.submit({1: 2.0})
    with pytest.raises(RuntimeError, match="replay is gone"):
        writes.wait()
    with pytest.raises(RuntimeError, match="replay is gone"):
        writes.submit({1: 3.0})


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_reverb_is_weights_follow_the_priorities_set(variant, make_replay, overlap):
    n, beta = 20, 0.6
    config = dataclasses.replace(replay_config.PRESETS[variant], capacity=100)
    server, buffer = make_replay(config, overlap=overlap)
    fill(buffer, n)
    td = np.random.default_rng(3).permutation(np.linspace(0.0, 2.0, n))
    buffer.update(keys_by_item(buffer, n), td)
    P = expected_probabilities(config, td)
    batch = buffer.sample(32, beta=beta)  # A new iterator: drawn after the update.
    items = batch.data[0][:, 0]
    np.testing.assert_allclose(batch.probabilities, P[items], rtol=1e-6)
    raw = (n * P[items]) ** -beta  # w = (N P(i))^-beta / max_j w_j (Algorithm 1, line 10).
    np.testing.assert_allclose(batch.weights, raw / raw.max(), rtol=1e-6)
    assert batch.table_size == n


@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_global_min_weights_match_a_float64_computation(variant, make_replay):
    n, beta = 12, 0.7
    config = dataclasses.replace(replay_config.PRESETS[variant], capacity=100, weight_normalization="global_min")
    server, buffer = make_replay(config)
    fill(buffer, n)
    td = np.random.default_rng(5).permutation(np.linspace(0.0, 3.0, n))
    buffer.update(keys_by_item(buffer, n), td)
    P = expected_probabilities(config, td)
    batch = buffer.sample(32, beta=beta)
    expected = (n * P[batch.data[0][:, 0]]) ** -beta / (n * P.min()) ** -beta  # The least likely item weighs 1.
    np.testing.assert_allclose(batch.weights, expected, rtol=1e-6)


def test_global_min_weights_stay_at_most_one_when_a_rank_between_reranks_exceeds_the_table(make_replay):
    """A full rank-based replay: an update below the whole snapshot gets rank N + 1 until the next re-rank."""
    n, alpha = 4, 0.7
    config = replay_config.ReplayConfig(variant="rank", alpha=alpha, capacity=n, weight_normalization="global_min")
    server, buffer = make_replay(config)
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    buffer.update(keys, np.array([0.4, 0.3, 0.2, 0.1]))  # The first snapshot: exact ranks 1..4.
    buffer.update(keys[3:], np.array([0.05]))  # Below every snapshot entry: rank 5 of a table of 4.
    ranks = np.array([1.0, 2.0, 3.0, 5.0])
    P = ranks**-alpha / np.sum(ranks**-alpha)
    batch = buffer.sample(32, beta=1.0)  # A new sampler (`keys_by_item` drew 64s): drawn after the updates.
    items = batch.data[0][:, 0]
    np.testing.assert_allclose(batch.probabilities, P[items], rtol=1e-6)
    # w_i = (N P(i))^-1 / (N P_min)^-1 with P_min the rank-5 item's P: at most 1, not (5/4)^alpha.
    np.testing.assert_allclose(batch.weights, P.min() / P[items], rtol=1e-6)
    assert batch.weights.max() <= 1.0
    # One item a batch: a batch's own minimum cannot stand in for the replay's, which the rank-5 item sets.
    singles = [buffer.sample(1, beta=1.0) for _ in range(20)]
    items = np.array([single.data[0][0, 0] for single in singles])
    assert set(items) != {3}
    np.testing.assert_allclose([single.weights[0] for single in singles], P.min() / P[items], rtol=1e-6)


def test_global_min_weights_follow_the_live_minimum_when_the_smallest_priority_is_rewritten_or_evicted(make_replay):
    """The least likely *live* item weighs 1: not the smallest priority ever written (an item at |delta| = 0 once)."""
    n, beta = 6, 1.0
    config = replay_config.ReplayConfig(capacity=n, weight_normalization="global_min")  # Proportional.
    server, buffer = make_replay(config)
    fill(buffer, n)
    keys = keys_by_item(buffer, n)
    buffer.update(keys, np.array([0.0, 0.2, 0.4, 0.5, 0.6, 0.3]))
    buffer.update(keys[:1], np.array([0.7]))  # Item 0 leaves |delta| = 0: the live minimum is item 1's.

    def check(batch_size, live, p):
        """Weights of a fresh draw (a new batch size: a new sampler) against float64 from the live priorities `p`."""
        P = p**config.alpha / np.sum(p**config.alpha)
        batch = buffer.sample(batch_size, beta=beta)
        rows = [live.index(item) for item in batch.data[0][:, 0]]
        np.testing.assert_allclose(batch.probabilities, P[rows], rtol=1e-6)
        np.testing.assert_allclose(batch.weights, (n * P[rows]) ** -beta / (n * P.min()) ** -beta, rtol=1e-6)

    eps = config.epsilon
    check(32, [0, 1, 2, 3, 4, 5], np.array([0.7, 0.2, 0.4, 0.5, 0.6, 0.3]) + eps)
    for item in (6, 7):  # Evicts items 0 and 1; 6 and 7 enter at the running maximum, still p_1 = 1.
        buffer.add([np.array([item], np.int32)])
    buffer.flush()
    check(16, [2, 3, 4, 5, 6, 7], np.array([0.4 + eps, 0.5 + eps, 0.6 + eps, 0.3 + eps, 1.0, 1.0]))
    assert buffer.live_minimum.minimum(buffer.inserted) == pytest.approx(0.3 + eps)


def test_the_live_minimum_matches_a_brute_force_one_over_random_writes_and_inserts():
    """`LiveMinimum` against the minimum over the live items' last written priorities (never written: 1)."""
    rng = np.random.default_rng(11)
    capacity, inserted = 20, 0
    tracker, last = replay.LiveMinimum(capacity), {}
    for _ in range(400):
        inserted += int(rng.integers(0, 3))
        live = list(range(max(inserted - capacity, 0), inserted))
        if live:
            items = rng.choice(live, size=min(len(live), 4)).tolist()  # Keys are items here; repeats too.
            new = rng.uniform(0.0, 1.5, len(items)).round(2).tolist()
            tracker.write(items, items, new, inserted)
            last.update(zip(items, new))
        expected = min([last[i] for i in range(max(inserted - capacity, 0), inserted) if i in last] + [1.0])
        assert tracker.minimum(inserted) == expected
        assert len(tracker.written) <= len(tracker._heap) <= 3 * capacity  # Not kept for the whole run.


@pytest.mark.parametrize("trend", [1, -1])
def test_the_live_minimum_forgets_evicted_items_whether_they_surface_or_not(trend):
    """Priorities rising (evicted items surface at the top) or falling (they never do), each item written once."""
    capacity = 50
    tracker = replay.LiveMinimum(capacity)
    for item in range(20 * capacity):
        tracker.write([item], [item], [0.5 + trend * item * 1e-4], item + 1)
        oldest = max(item + 1 - capacity, 0)
        assert tracker.minimum(item + 1) == 0.5 + trend * (oldest if trend > 0 else item) * 1e-4
        assert len(tracker.written) <= len(tracker._heap) <= 3 * capacity


def test_the_running_maximum_is_of_the_priorities_written(make_replay):
    """A key sampled twice is written its last |delta|; its first, larger one entered the maximum all the
    same, so new items entered above every priority in the table (one float32 ulp in a CI run's test)."""
    server, buffer = make_replay(replay_config.ReplayConfig(capacity=100))
    fill(buffer, 4)
    key = buffer.sample(4, beta=0.0).keys[0]
    written = []
    mutate = buffer.client.mutate_priorities
    buffer.client.mutate_priorities = lambda table, updates: written.append(updates) or mutate(table, updates)
    buffer.update(np.array([key, key]), np.array([7.0, 2.0]))
    assert written == [{int(key): pytest.approx(2.0 + 1e-6, rel=0, abs=1e-9)}]
    assert buffer.max_priority == pytest.approx(2.0 + 1e-6, rel=0, abs=1e-9)


def test_new_items_enter_at_the_running_maximum_priority(make_replay):
    server, buffer = make_replay(replay_config.ReplayConfig(capacity=100))
    fill(buffer, 4)
    # Four distinct keys: a sample of 4 may hold one twice, which is written its last |delta| only.
    buffer.update(keys_by_item(buffer, 4), np.array([0.5, 7.0, 0.25, 2.0]))
    assert buffer.max_priority == pytest.approx(7.0 + 1e-6, rel=0, abs=1e-9)  # Epsilon (1e-6) included.
    buffer.add([np.array([99], np.int32)])
    buffer.flush()
    samples = list(buffer.client.sample("replay", num_samples=2000, emit_timesteps=False))
    newest = [s.info.priority for s in samples if int(s.data[1][0][0]) == 99]
    assert newest and newest[0] == pytest.approx(7.0 + 1e-6, rel=0, abs=1e-9)  # Not 1.0.


@pytest.mark.parametrize("variant", ["proportional", "rank"])
@pytest.mark.parametrize("normalization", ["batch_max", "global_min"])
def test_zero_td_errors_give_finite_weights(variant, normalization, make_replay):
    config = replay_config.ReplayConfig(variant=variant, capacity=100, weight_normalization=normalization)
    server, buffer = make_replay(config)
    fill(buffer, 8)
    buffer.update(keys_by_item(buffer, 8), np.zeros(8))
    batch = buffer.sample(16, beta=1.0)
    assert np.isfinite(batch.weights).all() and (batch.weights > 0).all() and (batch.weights <= 1.0).all()
    if variant == "rank":  # Ties rank in the order the items became known: item i, updated i-th, ranks i + 1.
        scaled = np.arange(1, 9, dtype=np.float64) ** -config.alpha
        P = scaled / scaled.sum()
    else:
        P = np.full(8, 1 / 8)
    np.testing.assert_allclose(batch.probabilities, P[batch.data[0][:, 0]], rtol=1e-6)
    raw = 1.0 / (8 * batch.probabilities)
    norm = raw.max() if normalization == "batch_max" else 1.0 / (8 * P.min())
    np.testing.assert_allclose(batch.weights, raw / norm, rtol=1e-6)


def client_side(buffer):
    """What the client knows of written priorities: rank-based, |delta| per key; proportional, (p, item) per key."""
    return dict(buffer._rank._delta) if buffer._rank else dict(buffer.live_minimum.written)


@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_updating_an_evicted_item_is_a_no_op(variant, make_replay):
    config = replay_config.ReplayConfig(variant=variant, capacity=4, weight_normalization="global_min")
    server, buffer = make_replay(config)
    fill(buffer, 4)
    keys = keys_by_item(buffer, 4)
    buffer.update(keys, np.array([0.5, 1.5, 2.5, 3.5]))
    stale = buffer.sample(64, beta=0.0)
    while 0 not in stale.data[0][:, 0]:
        stale = buffer.sample(64, beta=0.0)
    fill(buffer, 1)  # The FIFO remover evicts item 0; item 4 enters at the maximal priority.
    tracked = buffer.max_priority, client_side(buffer)
    live = server_priorities(buffer, 4)
    key_0 = stale.keys[list(stale.data[0][:, 0]).index(0)]
    # Key 0 would be a new max and (live) min; item 1, the oldest live one, is updated in the same call: the
    # boundary of `update`'s liveness test. Its |delta| 3.0 stays within [min, max] and moves it from rank
    # 3 to rank 2 of the last snapshot (0.5, 1.5, 2.5, 3.5), so its priority changes in either variant.
    buffer.update(np.array([key_0, key_0, keys[1]], np.uint64), np.array([9.0, 0.0, 3.0]))
    item_1 = 2.0**-config.alpha if buffer._rank else 3.0 + config.epsilon
    if buffer._rank:
        tracked = (tracked[0], {**tracked[1], int(keys[1]): 3.0})
    else:
        tracked = (tracked[0], {**tracked[1], int(keys[1]): (item_1, 1)})
    assert (buffer.max_priority, client_side(buffer)) == tracked
    assert live[1] != pytest.approx(item_1)
    assert server_priorities(buffer, 4) == pytest.approx({**live, 1: item_1})
    buffer.add([np.array([5], np.int32)])  # Evicts item 1; enters at the live maximum, not at 9.
    buffer.flush()
    assert server_priorities(buffer, 4)[5] == pytest.approx(1.0 if buffer._rank else 3.5 + 1e-6)
    if buffer._rank:
        buffer.rerank()
        assert int(key_0) not in buffer._rank._delta  # Forgotten, not re-ranked.


def test_bad_replay_configs_explain_themselves():
    with pytest.raises(UsageError, match="accepted: proportional, rank, uniform"):
        replay_config.ReplayConfig(variant="sorted")
    with pytest.raises(UsageError, match="global_min weights need epsilon > 0"):
        replay_config.ReplayConfig(epsilon=0.0, weight_normalization="global_min")


def test_a_rerank_of_a_full_table_has_no_unseen_items_and_the_largest_rank_is_the_tables():
    """Every item known: ranks 1..n (an unseen item would push all down one); max_rank is U + n."""
    tracker = replay.RankTracker(alpha=1.0, capacity=100)
    tracker.priorities([0, 1], [0, 1], np.array([1.0, 2.0]))
    assert tracker.rerank(table_size=2) == {1: 1.0, 0: 0.5}
    tracker.priorities([2], [2], np.array([3.0]))  # Searched in the snapshot: rank 1, which lowers no max.
    assert tracker.max_rank == 2
    tracker.rerank(table_size=10)
    assert tracker.max_rank == 10  # 7 unseen + 3 known.


def test_equal_deltas_rank_in_the_order_they_became_known():
    """Ties rank as documented, however many: an unstable sort would reshuffle them at every re-rank (n >= 17)."""
    deltas = [float(key % 3) for key in range(30)]
    tracker = replay.RankTracker(alpha=1.0, capacity=100)
    tracker.priorities(list(range(30)), list(range(30)), np.array(deltas))
    order = sorted(range(30), key=lambda key: (-deltas[key], key))  # Largest first, ties by key (known order).
    assert tracker.rerank(table_size=30) == {key: rank**-1.0 for rank, key in enumerate(order, start=1)}


def test_the_live_minimum_is_at_most_one_and_an_old_runs_floor_applies_only_while_it_may_be_live():
    """Weights stay <= 1 (an unwritten item holds >= 1); an old checkpoint's floor lapses after `capacity` inserts."""
    tracker = replay.LiveMinimum(capacity=3)
    tracker.write([0], [0], [2.0], inserted=1)
    assert tracker.minimum(inserted=1) == 1.0
    tracker.restore({0: (0.4, 5)}, floor=(0.01, 5))
    assert tracker.minimum(inserted=7) == 0.01  # Items of the old run (inserted before 5) may be live.
    assert tracker.minimum(inserted=8) == 0.4  # All of them evicted: the floor no longer binds.
    tracker.restore({0: (0.1, 5)}, floor=(0.5, 5))
    assert tracker.minimum(inserted=6) == 0.1  # A floor above a live priority does not raise the minimum.


def test_a_transition_writer_refuses_a_chunk_length_below_one():
    """A chunk of 0 steps is no chunk: refused as a usage error, not a Reverb crash later."""
    with pytest.raises(UsageError, match="chunk_length=0"):
        replay.TransitionWriter(None, "replay", frame_stack=1, chunk_length=0)


def test_an_update_of_a_key_not_in_the_last_sample_counts_as_live(make_replay):
    """A key the last sample did not hold is taken as the newest (live), not as inserted at 0 and dropped."""
    server, buffer = make_replay(replay_config.ReplayConfig(capacity=2))
    fill(buffer, 6)  # Items 4 and 5 live: inserted 6 > capacity.
    first = buffer.sample(1, beta=0.0).keys
    while True:
        other = buffer.sample(1, beta=0.0)
        if other.keys[0] != first[0]:
            break
    buffer.update(first, np.array([5.0]))  # Not in the last sample.
    assert buffer.max_priority == pytest.approx(5.0 + replay_config.ReplayConfig().epsilon, rel=0, abs=1e-9)


def test_a_key_updated_twice_in_one_call_takes_its_last_delta(make_replay):
    """`update` with a key sampled twice: the later |delta| is its priority (the documented rule)."""
    server, buffer = make_replay(replay_config.ReplayConfig(capacity=1, alpha=1.0))
    fill(buffer, 1)
    (key,) = keys_by_item(buffer, 1)
    buffer.update(np.array([key, key]), np.array([5.0, 1.0]))
    (sample,) = buffer.client.sample("replay", num_samples=1, emit_timesteps=False)
    assert float(sample.info.priority) == pytest.approx(1.0 + replay_config.ReplayConfig().epsilon, rel=0, abs=1e-9)


def test_a_stored_next_state_is_a_copy_so_an_env_reusing_its_buffer_changes_nothing(make_replay):
    """An env that writes its next observation into the array it returned must not change what the replay stored.

    Here the caller then passes a state that is not the stream's last one (a skipped step), equal to the buffer's
    new content: taken for the last one, the item would return the old frame as its S_{j-1}.
    """
    server, buffer = make_replay(replay_config.ReplayConfig(capacity=8))
    reused = np.array([1.0, 1.0], np.float32)
    buffer.add_transition((np.zeros(2, np.float32), 0, 0.0, 0.0, reused))
    reused[:] = 5.0  # The env's next observation, in the same array.
    buffer.add_transition((reused.copy(), 1, 0.0, 0.0, np.full(2, 6.0, np.float32)))
    observation, action, _, _, next_observation = buffer.sample(32, beta=0.0).data
    second = action == 1
    assert second.any() and (observation[second] == 5.0).all() and (next_observation[second] == 6.0).all()


def test_items_are_flushed_every_flush_every_inserts(make_replay):
    """`flush_every=4`: the 4th insert makes all four visible to other samplers (one insert late cuts chunks short)."""
    server, buffer = make_replay(replay_config.ReplayConfig(capacity=8), flush_every=4)
    for item in range(4):
        buffer.add([np.array([item], np.int32)])
    assert buffer.client.server_info()["replay"].current_size == 4
