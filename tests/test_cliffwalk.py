"""The Blind Cliffwalk (PER App. B.1) and the replay variants of the study."""

import random

import pytest

from per import cliffwalk


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
    first = cliffwalk.updates_to_converge("uniform", representation, 6, seed=3)
    assert first == cliffwalk.updates_to_converge("uniform", representation, 6, seed=3)
    assert first != cliffwalk.updates_to_converge("uniform", representation, 6, seed=4)


def median_updates(variant, representation, n, num_seeds=5):
    runs = sorted(cliffwalk.updates_to_converge(variant, representation, n, s) for s in range(num_seeds))
    return runs[num_seeds // 2]


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
