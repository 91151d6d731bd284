"""The Blind Cliffwalk (PER App. B.1) and the replay variants of the study."""

import dataclasses
import math
import random

import pytest

from per import cliffwalk, structures

# Every run below converges within 10,000 updates; a bug that stops convergence fails at the cap, not after
# the study's 5 * 10^7 updates.
CAPPED = dataclasses.replace(cliffwalk.Settings(), max_updates=100_000)


@pytest.mark.parametrize("n", [2, 5, 9])
def test_memory_holds_all_sequences_and_one_reward(n):
    transitions = cliffwalk.memory(n, random.Random(0))
    assert len(transitions) == cliffwalk.replay_size(n) == 2 ** (n + 1) - 2
    rewarding = [t for t in transitions if t[2] == 1.0]
    assert rewarding == [(n - 1, cliffwalk.right_action(n - 1), 1.0, True)]
    # 'Wrong' always ends the episode; 'right' only in the last state.
    assert all(t[3] == (t[1] != cliffwalk.right_action(t[0]) or t[0] == n - 1) for t in transitions)
    # Half the sequences fail at once: 2^(n-1) copies of each first-state transition.
    assert sum(1 for t in transitions if t[0] == 0) == 2**n


def test_true_q_is_discounted_reward_for_right_and_zero_for_wrong():
    q = cliffwalk.true_q(4)
    gamma = 0.75
    assert q[3][cliffwalk.right_action(3)] == 1.0 and q[0][cliffwalk.right_action(0)] == pytest.approx(gamma**3)
    assert q[2][1 - cliffwalk.right_action(2)] == 0.0


@pytest.mark.parametrize("representation", ["tabular", "linear"])
def test_runs_are_repeatable_by_seed(representation):
    first = cliffwalk.updates_to_converge("uniform", representation, 6, 3, CAPPED)
    assert first is not None and first == cliffwalk.updates_to_converge("uniform", representation, 6, 3, CAPPED)
    assert first != cliffwalk.updates_to_converge("uniform", representation, 6, 4, CAPPED)


def median_updates(variant, representation, n, num_seeds=5):
    runs = [cliffwalk.updates_to_converge(variant, representation, n, s, CAPPED) for s in range(num_seeds)]
    assert None not in runs, (variant, representation, runs)
    return sorted(runs)[num_seeds // 2]


def test_prioritisation_orders_the_variants_as_in_the_paper():
    n = 8
    uniform = median_updates("uniform", "tabular", n)
    assert median_updates("oracle", "tabular", n) < median_updates("greedy", "tabular", n) < uniform
    linear_uniform = median_updates("uniform", "linear", n)
    assert 2 * median_updates("rank", "linear", n) < linear_uniform
    assert 2 * median_updates("proportional", "linear", n) < linear_uniform


def test_a_stalled_oracle_is_reported_not_looped():
    assert cliffwalk.updates_to_converge("oracle", "linear", 8, seed=0) is None


def test_unknown_variant_names_the_accepted():
    with pytest.raises(ValueError, match="accepted: uniform, oracle, greedy, proportional, rank"):
        cliffwalk.updates_to_converge("sorted", "tabular", 4, 0)


@pytest.mark.parametrize("representation", ["tabular", "linear"])
def test_q_star_is_the_fixed_point_of_the_q_learning_update(representation):
    """Eq. 2 with App. B.1's gamma = 1 - 1/n: at Q = Q* every transition's TD error is 0."""
    n = 5
    q = cliffwalk.QFunction(n, representation, random.Random(0), cliffwalk.Settings())
    target = cliffwalk.true_q(n)
    q.weights = [[target[s][a] for s in range(n)] for a in range(2)]
    q.bias = [0.0, 0.0]
    for transition in cliffwalk.memory(n, random.Random(0)):
        assert q.td_error(transition) == pytest.approx(0.0, abs=1e-12), transition


def test_a_run_converged_after_its_first_update_reports_one_update():
    settings = dataclasses.replace(cliffwalk.Settings(), mse_threshold=math.inf)
    for variant in cliffwalk.VARIANTS:
        assert cliffwalk.updates_to_converge(variant, "tabular", 3, 0, settings) == 1, variant


def test_proportional_priorities_use_the_proportional_alpha(monkeypatch):
    """p_i^alpha with proportional's own alpha: at alpha 0 every priority written is exactly 1."""
    written = []

    class RecordingTree(structures.SumTree):
        def set(self, index, value):
            written.append(value)
            super().set(index, value)

    monkeypatch.setattr(cliffwalk, "SumTree", RecordingTree)
    settings = dataclasses.replace(cliffwalk.Settings(), alpha_proportional=0.0, alpha_rank=1.0, max_updates=50)
    cliffwalk.updates_to_converge("proportional", "linear", 4, 0, settings)
    assert len(written) > cliffwalk.replay_size(4) and set(written) == {1.0}  # The fill, then write-backs.


def test_the_studys_settings_are_app_b1s_and_table_3s():
    settings = cliffwalk.Settings()
    assert (settings.step_size, settings.init_std, settings.mse_threshold) == (0.25, 0.1, 1e-3)  # App. B.1.
    assert (settings.alpha_proportional, settings.alpha_rank) == (0.6, 0.7)  # Table 3's alphas.


def test_the_memory_is_filled_in_random_order():
    """App. B.1: the 2^n sequences are executed "in random order": the order follows the seed."""
    orders = [cliffwalk.memory(6, random.Random(seed)) for seed in (0, 1)]
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]


def test_median_and_range_are_the_median_min_max_and_nothing_for_an_unconverged_seed():
    assert cliffwalk.median_and_range([9, 1, 2]) == (2.0, 1.0, 9.0)  # The median, not the mean (4).
    assert all(math.isnan(x) for x in cliffwalk.median_and_range([1, None, 3]))  # A capped run has no number.
    assert all(math.isnan(x) for x in cliffwalk.median_and_range([None]))


def test_only_the_linear_representation_has_a_bias_feature():
    """App. B.1: the linear case concatenates a constant bias feature to the one-hot state."""
    settings = cliffwalk.Settings()
    assert cliffwalk.QFunction(4, "tabular", random.Random(0), settings).bias == [0.0, 0.0]
    assert all(b != 0.0 for b in cliffwalk.QFunction(4, "linear", random.Random(0), settings).bias)
