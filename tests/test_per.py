"""Prioritized replay: the maths, the exact samplers, and Reverb sampled statistically."""

import random

import numpy as np
import pytest
import reverb
from scipy import stats

from common.errors import UsageError
from per import priorities, replay
from per.structures import RankOrder, SumTree

DRAWS = 20_000
P_VALUE = 1e-4  # Chi-square tests reject a correct sampler with this probability.


def assert_frequencies_match(counts, expected_probabilities):
    expected = np.asarray(expected_probabilities) * np.sum(counts)
    assert stats.chisquare(counts, expected).pvalue > P_VALUE, (counts, expected)


# The maths. -----------------------------------------------------------------


def test_sampling_probabilities_follow_eq_1():
    p = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(priorities.sampling_probabilities(p, 0.5), np.sqrt(p) / np.sqrt(p).sum())
    np.testing.assert_allclose(priorities.sampling_probabilities(p, 0.0), [1 / 3] * 3)


def test_rank_priorities_are_one_over_rank_of_abs_td():
    np.testing.assert_allclose(priorities.rank_priorities(np.array([0.1, -3.0, 2.0])), [1 / 3, 1.0, 1 / 2])


def test_importance_weights_match_the_formula():
    P = np.array([0.1, 0.2, 0.05])
    raw = (100 * P) ** -0.5
    np.testing.assert_allclose(priorities.importance_weights(P, 100, 0.5), raw / raw.max())
    global_min = priorities.importance_weights(P, 100, 0.5, "global_min", min_probability=0.01)
    np.testing.assert_allclose(global_min, raw / (100 * 0.01) ** -0.5)
    assert (global_min <= 1.0).all()
    np.testing.assert_allclose(priorities.importance_weights(P, 100, 0.0), [1.0, 1.0, 1.0])


def test_beta_anneals_linearly_to_one():
    assert priorities.beta_schedule(0, 100, 0.4) == pytest.approx(0.4)
    assert priorities.beta_schedule(50, 100, 0.4) == pytest.approx(0.7)
    assert priorities.beta_schedule(100, 100, 0.4) == 1.0 and priorities.beta_schedule(500, 100, 0.4) == 1.0


# The exact samplers. --------------------------------------------------------


@pytest.mark.parametrize("capacity", [1, 3, 5, 1000])  # Not only powers of two.
def test_sum_tree_samples_in_proportion_to_its_values(capacity):
    tree = SumTree(capacity)
    values = np.random.default_rng(capacity).random(capacity) + 0.01
    values[0] = 0.0 if capacity > 1 else 1.0
    for i, v in enumerate(values):
        tree.set(i, float(v))
    assert tree.total == pytest.approx(values.sum())
    rng = random.Random(0)
    counts = np.bincount([tree.sample(rng) for _ in range(DRAWS if capacity < 1000 else 200_000)], minlength=capacity)
    if capacity > 1:
        assert counts[0] == 0  # Zero priority is never drawn.
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
    assert_frequencies_match(by_rank, priorities.sampling_probabilities(1.0 / np.arange(1, size + 1), alpha))
    assert sum(order.rank_probability(k) for k in range(1, size + 1)) == pytest.approx(1.0)


# Reverb. --------------------------------------------------------------------


@pytest.fixture
def make_replay():
    """Builds (server, replay) pairs and closes the replay before its server stops."""
    made = []

    def make(config):
        server = reverb.Server([replay.table(config)])
        made.append((server, replay.PrioritizedReplay(reverb.Client(f"localhost:{server.port}"), config)))
        return made[-1]

    yield make
    for server, buffer in made:
        buffer.close()
        server.stop()


def fill(buffer, n):
    for i in range(n):
        buffer.add([np.array([i], np.int32)])


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


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_reverb_proportional_sampling_matches_p_alpha(alpha, make_replay):
    n = 12
    config = replay.ReplayConfig(alpha=alpha, capacity=100)
    server, buffer = make_replay(config)
    fill(buffer, n)
    td = np.linspace(0.1, 3.0, n)
    set_td_errors(buffer, n, td)
    expected = priorities.sampling_probabilities(priorities.proportional_priority(td, config.epsilon), alpha)
    assert_frequencies_match(sample_counts(buffer, n), expected)


@pytest.mark.parametrize("alpha", [0.5, 0.7, 1.0])
def test_reverb_rank_based_sampling_matches_rank_power_law(alpha, make_replay):
    n = 10
    config = replay.ReplayConfig(variant="rank", alpha=alpha, capacity=100, rerank_interval=10**9)
    server, buffer = make_replay(config)
    fill(buffer, n)
    td = np.random.default_rng(2).permutation(np.linspace(0.1, 5.0, n))
    set_td_errors(buffer, n, td)
    buffer.rerank()  # Exact ranks for everyone.
    expected = priorities.sampling_probabilities(priorities.rank_priorities(td), alpha)
    assert_frequencies_match(sample_counts(buffer, n), expected)


def test_reverb_is_weights_match_the_formula_and_the_batch_maximum_is_one(make_replay):
    server, buffer = make_replay(replay.ReplayConfig(capacity=100))
    fill(buffer, 20)
    set_td_errors(buffer, 20, np.linspace(0.0, 2.0, 20))
    batch = buffer.sample(32, beta=0.6)
    raw = (batch.table_size * batch.probabilities) ** -0.6
    np.testing.assert_allclose(batch.weights, raw / raw.max())
    assert batch.weights.max() == 1.0 and batch.table_size == 20


def test_new_items_enter_at_the_running_maximum_priority(make_replay):
    server, buffer = make_replay(replay.ReplayConfig(capacity=100))
    fill(buffer, 4)
    batch = buffer.sample(4, beta=0.0)
    buffer.update(batch.keys, np.array([0.5, 7.0, 0.25, 2.0]))
    assert buffer.max_priority == pytest.approx(7.0 + 1e-6)
    buffer.add([np.array([99], np.int32)])
    buffer.flush()
    samples = list(buffer.client.sample("replay", num_samples=2000, emit_timesteps=False))
    newest = [s.info.priority for s in samples if int(s.data[1][0][0]) == 99]
    assert newest and newest[0] == pytest.approx(7.0 + 1e-6)  # Not 1.0.


@pytest.mark.parametrize("variant", ["proportional", "rank"])
@pytest.mark.parametrize("normalization", ["batch_max", "global_min"])
def test_zero_td_errors_give_finite_weights(variant, normalization, make_replay):
    config = replay.ReplayConfig(variant=variant, capacity=100, weight_normalization=normalization)
    server, buffer = make_replay(config)
    fill(buffer, 8)
    set_td_errors(buffer, 8, np.zeros(8))
    batch = buffer.sample(16, beta=1.0)
    assert np.isfinite(batch.weights).all() and (batch.weights > 0).all() and (batch.weights <= 1.0).all()


@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_updating_an_evicted_item_is_a_no_op(variant, make_replay):
    server, buffer = make_replay(replay.ReplayConfig(variant=variant, capacity=3))
    fill(buffer, 3)
    batch = buffer.sample(1, beta=0.0)
    fill(buffer, 3)  # The FIFO remover evicts all three originals.
    buffer.update(batch.keys, np.array([9.0]))
    assert buffer.client.server_info()["replay"].current_size == 3
    if variant == "rank":
        buffer.rerank()
        assert buffer._rank._delta == {}  # Forgotten, not re-ranked.


def test_bad_replay_configs_explain_themselves():
    with pytest.raises(UsageError, match="accepted: proportional, rank, uniform"):
        replay.ReplayConfig(variant="sorted")
    with pytest.raises(UsageError, match="global_min weights need epsilon > 0"):
        replay.ReplayConfig(epsilon=0.0, weight_normalization="global_min")
