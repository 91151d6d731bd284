"""LASER Propositions 1-3 (Schmitt et al. 2020, §2.3, App. C), through the exact study's maths."""

import sys

import numpy as np
import pytest

from reproduce import _tabular
from reproduce.laser import propositions as study_module
from tests.test_cli import run

# App. C's counterexample to Proposition 2: Q* = (2, 5), mu = (0.9, 0.1), rho_bar = 1, initial pi = (0.5, 0.5).
Q, MU, RHO_BAR, PI_0 = np.array([2.0, 5.0]), np.array([0.9, 0.1]), 1.0, np.array([0.5, 0.5])
STUDY = study_module.Study(num_mdps=3)


def _random_bandit(rng, num_actions=3):
    q = rng.uniform(0.0, 1.0, num_actions)
    mu, pi = rng.dirichlet(np.ones(num_actions)), rng.dirichlet(np.ones(num_actions))
    return q, mu, pi


def test_score_is_the_gradient_of_log_softmax():
    rng = np.random.default_rng(0)
    theta, eps = rng.standard_normal(3), 1e-6
    pi = np.exp(theta) / np.exp(theta).sum()
    for a in range(3):
        for j in range(3):
            up, down = theta.copy(), theta.copy()
            up[j], down[j] = up[j] + eps, down[j] - eps
            numeric = (np.log(np.exp(up)[a] / np.exp(up).sum()) - np.log(np.exp(down)[a] / np.exp(down).sum())) / (
                2 * eps
            )
            assert study_module.score(pi)[a, j] == pytest.approx(numeric, abs=1e-8)


def test_distortion_is_eq_10s_omega():
    mu, pi = np.array([0.9, 0.1, 0.0]), np.array([0.5, 0.5, 0.0])
    # min(1, 1 * 0.9 / 0.5), min(1, 0.1 / 0.5); an action pi never takes is not distorted.
    np.testing.assert_allclose(study_module.distortion(mu, pi, 1.0), [1.0, 0.2, 1.0])
    np.testing.assert_allclose(study_module.distortion(mu, pi, 2.0), [1.0, 0.4, 1.0])


@pytest.mark.parametrize("rho_bar", [0.5, 1.0, 3.0])
def test_vtrace_gradient_equals_eq_10s_omega_form(rho_bar):
    # Eq. (10): E_mu[min(pi / mu, rho_bar) Q grad log pi] = E_pi[omega Q grad log pi], written out per action.
    rng = np.random.default_rng(1)
    for _ in range(10):
        q, mu, pi = _random_bandit(rng)
        omega = np.minimum(1.0, rho_bar * mu / pi)
        expected = sum(pi[a] * omega[a] * q[a] * (np.eye(3)[a] - pi) for a in range(3))
        np.testing.assert_allclose(study_module.vtrace_policy_gradient(q, mu, pi, rho_bar), expected, atol=1e-14)


def test_unclipped_vtrace_gradient_is_the_on_policy_gradient():
    # §2.3: the V-trace policy gradient "recovers the naively importance sampled policy gradient for rho_bar -> inf".
    rng = np.random.default_rng(2)
    q, mu, pi = _random_bandit(rng)
    np.testing.assert_allclose(
        study_module.vtrace_policy_gradient(q, mu, pi, np.inf), study_module.on_policy_gradient(q, pi), atol=1e-14
    )
    assert not np.allclose(study_module.vtrace_policy_gradient(q, mu, pi, 1.0), study_module.on_policy_gradient(q, pi))


def test_mixed_gradient_equals_eq_11s_regularised_q():
    # Eq. (11): alpha d^pi E_pi[Q grad log pi] + (1 - alpha) d^mu E_pi[Q^omega grad log pi] = E_pi[Q^alpha grad log pi].
    rng = np.random.default_rng(3)
    for alpha, d_pi, d_mu in [(0.0, 1.0, 1.0), (0.3, 0.5, 2.0), (1.0, 2.0, 0.1)]:
        q, mu, pi = _random_bandit(rng)
        q_alpha = study_module.regularised_q(q, mu, pi, 1.0, alpha, d_pi, d_mu)
        np.testing.assert_allclose(
            study_module.mixed_policy_gradient(q, mu, pi, 1.0, alpha, d_pi, d_mu),
            (pi * q_alpha) @ (np.eye(3) - pi),
            atol=1e-14,
        )


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="expected q"):
        study_module.vtrace_policy_gradient(Q, np.array([0.5, 0.3, 0.2]), PI_0, 1.0)
    with pytest.raises(ValueError, match="mu must be positive"):
        study_module.vtrace_policy_gradient(Q, np.array([1.0, 0.0]), PI_0, 1.0)
    with pytest.raises(ValueError, match="two actions"):
        study_module.converged_policy(np.ones(3), np.ones(3) / 3, 1.0, 0.0)
    with pytest.raises(ValueError, match="outside A"):
        study_module.eq13_ratio(np.ones(2), MU, PI_0, 1.0)
    for phi in (0.0, 1.0):  # mu = 0 on an action pi takes: outside V-trace's assumptions.
        with pytest.raises(ValueError, match=r"phi must be in \(0, 1\)"):
            study_module.left_right_mdp(phi, gamma=0.9)


def test_a_zero_action_value_is_in_the_domain():
    """Q >= 0 is the documented domain: a bandit with a zero-valued action converges like any other."""
    limit = study_module.converged_policy(np.array([0.0, 1.0]), np.array([0.5, 0.5]), 1.0, 0.0)
    np.testing.assert_array_equal(limit, [0.0, 1.0])


# Proposition 1 -----------------------------------------------------------------


@pytest.fixture(scope="module")
def mdps():
    rng = np.random.default_rng(0)
    return [_tabular.random_mdp(rng, num_states=5, num_actions=3, gamma=0.9, policy_temperature=0.5) for _ in range(3)]


@pytest.mark.parametrize("rho_bar", [0.3, 1.0, 5.0])
def test_fixed_point_is_v_of_the_implied_policy_not_v_pi(mdps, rho_bar):
    for mdp in mdps:
        V = _tabular.vtrace_fixed_point(mdp, rho_bar)
        # Eq. (9), written out: min(rho_bar mu, pi), normalised per state.
        weights = np.minimum(rho_bar * mdp.mu, mdp.pi)
        pi_tilde = weights / weights.sum(1, keepdims=True)
        np.testing.assert_allclose(V, _tabular.value(mdp, pi_tilde), atol=1e-10)
        assert rho_bar < study_module.clip_free_rho_bar(mdp)  # So pi~ != pi here, and:
        assert np.abs(V - _tabular.value(mdp, mdp.pi)).max() > 1e-3  # the fixed point is not V^pi.


def test_fixed_point_is_v_pi_once_rho_bar_clips_nothing(mdps):
    for mdp in mdps:
        V_pi = _tabular.value(mdp, mdp.pi)
        for rho_bar in (study_module.clip_free_rho_bar(mdp), np.inf):
            np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, rho_bar), V_pi, atol=1e-10)


@pytest.mark.parametrize("phi", [0.01, 0.2, 0.45])
def test_left_right_example_implies_the_uniform_policy(phi):
    # §2.3: with rho_bar = 1, min(mu, pi) = (phi, phi), so pi~ is uniform and V-trace averages left (1) and right (0).
    mdp = study_module.left_right_mdp(phi, gamma=0.9)
    np.testing.assert_allclose(_tabular.truncated_policy(mdp, 1.0), [[0.5, 0.5]], atol=1e-15)
    np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, 1.0), [0.5], atol=1e-15)
    np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, np.inf), [1.0 - phi], atol=1e-15)


# Proposition 2 -----------------------------------------------------------------


def test_q_omega_at_the_initial_policy_matches_app_c():
    # App. C: "Q^{pi~, omega} = (2 * 1, 5 * 0.2) = (2, 1)".
    np.testing.assert_allclose(study_module.distortion(MU, PI_0, RHO_BAR) * Q, [2.0, 1.0])


def test_vtrace_policy_gradient_converges_to_the_wrong_action():
    # Rest point: Q^omega equal, 2 * 1 = 5 * 0.1 / pi(a*), so pi = (0.75, 0.25); argmax 0, while a* = 1.
    limit = study_module.converged_policy(Q, MU, RHO_BAR, 0.0)
    np.testing.assert_allclose(limit, [0.75, 0.25], atol=1e-14)
    for pi_0 in (PI_0, np.array([0.01, 0.99]), np.array([0.99, 0.01])):  # Also from next to pi*.
        trajectory = study_module.policy_gradient_ascent(Q, MU, pi_0, RHO_BAR, 0.0, learning_rate=1.0, steps=2000)
        np.testing.assert_allclose(trajectory[-1], limit, atol=1e-10)
        assert np.argmax(trajectory[-1]) != np.argmax(Q)


def test_the_trajectory_holds_the_start_and_one_policy_per_step():
    trajectory = study_module.policy_gradient_ascent(Q, MU, PI_0, RHO_BAR, 0.0, learning_rate=1.0, steps=7)
    assert trajectory.shape == (8, 2)
    np.testing.assert_array_equal(trajectory[0], PI_0)


def test_without_clipping_or_with_enough_mu_on_a_star_the_gradient_finds_pi_star():
    # The failure is V-trace's clipping: rho_bar = inf is the on-policy gradient, and with rho_bar = 1 the
    # rest point pi(a*) = mu(a*) Q*(a*) / Q*(a_0) reaches 1 once mu(a*) >= 2 / 5.
    np.testing.assert_array_equal(study_module.converged_policy(Q, MU, np.inf, 0.0), [0.0, 1.0])
    np.testing.assert_array_equal(study_module.converged_policy(Q, np.array([0.6, 0.4]), 1.0, 0.0), [0.0, 1.0])
    on_policy = study_module.policy_gradient_ascent(Q, MU, PI_0, RHO_BAR, 1.0, learning_rate=1.0, steps=2000)
    assert on_policy[-1][1] > 0.999


def test_converged_policy_matches_simulated_dynamics_on_random_bandits():
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(20):
        q, mu, _ = _random_bandit(rng, num_actions=2)
        rho_bar, alpha = rng.uniform(0.5, 2.0), rng.uniform(0.0, 0.5)
        limit = study_module.converged_policy(q, mu, rho_bar, alpha)
        if not 0.05 < limit[0] < 0.95:  # Limits on the boundary are approached only like 1 / t.
            continue
        final = study_module.policy_gradient_ascent(q, mu, PI_0, rho_bar, alpha, learning_rate=0.3, steps=3000)[-1]
        np.testing.assert_allclose(final, limit, atol=1e-5)  # Small random Q gaps: slow (linear) convergence.
        checked += 1
    assert checked >= 5


# Proposition 3 -----------------------------------------------------------------


def test_paper_counterexample_flip_and_bounds():
    # Flip: Q^alpha equal at pi = (1/2, 1/2): 2 = 5 alpha + 5 * 0.2 (1 - alpha), alpha = 1/4.
    # Eq. (13) at pi_0, where Q^omega = (2, 1): (Q^omega(a_0) - Q^omega(a*)) / (Q(a*) - Q(a_0)) = (2 - 1) / 3.
    # Sup over pi, at pi* = (0, 1) where omega = (1, 0.1): (2 - 0.5) / 3 = 1/2, alpha = 1/3; and pi* is
    # reached once Q^alpha(a*) > Q^alpha(a_0) at pi*: 5 alpha + 0.5 (1 - alpha) > 2, alpha > 1/3.
    assert study_module.flip_alpha(Q, MU, RHO_BAR) == pytest.approx(0.25, abs=1e-14)
    assert float(study_module.eq13_ratio(Q, MU, PI_0, RHO_BAR)) == pytest.approx(1 / 3, abs=1e-14)
    ratio, at = study_module.eq13_worst_case(Q, MU, RHO_BAR)
    assert ratio == pytest.approx(0.5, abs=1e-14)
    np.testing.assert_array_equal(at, [0.0, 1.0])
    assert study_module.alpha_for_ratio(ratio) == pytest.approx(1 / 3, abs=1e-14)
    assert study_module.optimal_alpha(Q, MU, RHO_BAR) == pytest.approx(1 / 3, abs=1e-12)


def test_state_distribution_ratio_enters_bound_and_flip_alike():
    # d^mu / d^pi = 2: the flip moves to 5 alpha + 2 (1 - alpha) = 2 alpha + 4 (1 - alpha), alpha = 2/5.
    flip = study_module.flip_alpha(Q, MU, RHO_BAR, d_pi=1.0, d_mu=2.0)
    assert flip == pytest.approx(0.4, abs=1e-12)
    bound = study_module.alpha_for_ratio(float(study_module.eq13_ratio(Q, MU, PI_0, RHO_BAR, d_pi=1.0, d_mu=2.0)))
    assert bound == pytest.approx(flip, abs=1e-12)


def test_the_sup_over_pi_may_lie_at_either_end():
    """App. C mirrored (a* = action 0): the sup is at pi = (1, 0), the grid's other end."""
    ratio, at = study_module.eq13_worst_case(Q[::-1], MU[::-1], RHO_BAR, points=11)
    np.testing.assert_array_equal(at, [1.0, 0.0])
    assert ratio == pytest.approx(0.5, abs=1e-14)  # As App. C's: (2 - 0.5) / 3.


def test_eq_13_sup_bound_is_sufficient_and_ignoring_omega_is_not():
    rng = np.random.default_rng(5)
    failing = 0
    for _ in range(60):
        q, mu, _ = _random_bandit(rng, num_actions=2)
        rho_bar = rng.uniform(0.5, 2.0)
        a_star = int(np.argmax(q))
        if study_module.converged_policy(q, mu, rho_bar, 0.0)[a_star] >= 0.5:
            continue  # V-trace alone already keeps the argmax here.
        failing += 1
        flip = study_module.flip_alpha(q, mu, rho_bar)
        bound = study_module.alpha_for_ratio(study_module.eq13_worst_case(q, mu, rho_bar, points=2001)[0])
        assert bound >= flip - 1e-12
        assert study_module.converged_policy(q, mu, rho_bar, bound + 1e-9)[a_star] > 0.5
        # Two actions: eq. (13) with omega at the uniform policy is exactly the flip.
        at_uniform = study_module.alpha_for_ratio(float(study_module.eq13_ratio(q, mu, PI_0, rho_bar)))
        assert at_uniform == pytest.approx(flip, abs=1e-9)
        # A wrong variant: eq. (13) without V-trace's distortion (omega = 1) asks for no on-policy data at all.
        undistorted = study_module.alpha_for_ratio(float(study_module.eq13_ratio(q, mu, PI_0, np.inf)))
        assert undistorted == 0.0 < flip
        assert study_module.converged_policy(q, mu, rho_bar, undistorted)[a_star] < 0.5
    assert failing >= 5


# The study: its rows and checks -----------------------------------------------


@pytest.fixture(scope="module")
def study_rows():
    return study_module.proposition_1(study_module.Study(num_mdps=2), seed=0)


def _checks(rows: list[dict], study: study_module.Study) -> dict[str, dict]:
    return {c["quantity"]: c for c in study_module.check_proposition_1(rows, study)}


def test_each_mdp_has_one_clip_free_row_at_its_own_max_pi_over_mu(study_rows):
    for mdp in (0, 1):
        flagged = [r for r in study_rows if r["mdp"] == mdp and r["is_clip_free_rho_bar"]]
        assert len(flagged) == 1
        assert flagged[0]["rho_bar"] == flagged[0]["clip_free_rho_bar"]


def test_relative_gaps_are_to_v_pi_and_to_v_mu_respectively(study_rows):
    """Unclipped, the fixed point is V^pi, one ||V^pi - V^mu|| from V^mu."""
    for r in study_rows:
        if r["rho_bar"] == np.inf:
            assert r["relative_gap_to_V_pi"] < 1e-9
            assert r["relative_gap_to_V_mu"] == pytest.approx(1.0, abs=1e-9)


def test_proposition_1s_checks_hold(study_rows):
    checks = _checks(study_rows, study_module.Study(num_mdps=2))
    assert [q for q, c in checks.items() if not c["holds"]] == []


def test_a_bias_at_rounding_level_does_not_count_as_pi_tilde_differing_from_pi(study_rows):
    """The clip-free row's own gap is rounding (~1e-16): below max pi/mu the check asks for more than that."""
    study = study_module.Study(num_mdps=2)
    rounding = [{**r, "gap_to_V_pi": 1e-16} for r in study_rows]
    assert not _checks(rounding, study)["min ||V_fix - V^pi|| over rho_bar < max pi/mu"]["holds"]


def test_the_bias_at_rho_bar_1_is_the_smallest_over_mdps(study_rows):
    """One MDP with no bias at rho_bar = 1 fails the check."""
    changed = [dict(r) for r in study_rows]
    next(r for r in changed if r["rho_bar"] == 1.0)["gap_to_V_pi"] = 0.0
    check = _checks(changed, study_module.Study(num_mdps=2))["min over MDPs ||V_fix - V^pi|| at rho_bar = 1"]
    assert check["value"] == 0.0 and not check["holds"]


def _by_quantity(rows: list[dict]) -> dict[str, dict]:
    return {r["quantity"].split(" (")[0]: r for r in rows}


def test_the_closed_form_rest_point_scales_with_rho_bar():
    """rho_bar mu(a*) Q*(a*) / Q*(a_0): invisible at App. C's rho_bar = 1."""
    rows, _ = study_module.proposition_2(study_module.Study(num_mdps=1, rho_bar=2.0, steps=200, sweep=9))
    row = _by_quantity(rows)["converged pi(a*), V-trace PG"]
    assert row["value"] == pytest.approx(0.5, abs=1e-12) and row["holds"]  # min(1, 2 * 0.1 * 5 / 2).


def test_the_alpha_sweep_keeps_only_behaviours_for_which_vtrace_alone_picks_the_wrong_action():
    """For Q* = (2, 5) those are mu(a*) < 0.2, not every mu that misses pi*."""
    _, extras = study_module.proposition_3(study_module.Study(num_mdps=1, steps=200, sweep=19))
    mu_stars = extras["sweep"][:, 0]
    assert len(mu_stars) and mu_stars.max() < 0.2


def test_above_the_sup_bound_the_dynamics_reach_pi_star():
    rows, _ = study_module.proposition_3(study_module.Study(num_mdps=1, steps=200, sweep=9))
    row = _by_quantity(rows)["converged pi(a*) at alpha = sup bound + 1e-9"]
    assert row["value"] == 1.0 and row["holds"]


def test_a_sweep_with_no_failing_behaviour_fails_its_check_rather_than_crashing():
    """sweep = 3 puts mu(a*) at 0.25, 0.5, 0.75, where V-trace alone keeps the argmax: nothing to test."""
    rows, extras = study_module.proposition_3(study_module.Study(num_mdps=1, steps=50, sweep=3))
    (row,) = [r for r in rows if r["quantity"].startswith("min (sup bound - exact flip) over 0 behaviours")]
    assert np.isnan(row["value"]) and not row["holds"]
    assert extras["sweep"].shape == (0, 4)


# `main` against a results directory (argv[1]), Proposition 3's rows given one failing check.
FAILING = """
import pathlib, sys
import common.results
from common import cli
common.results.RESULTS = pathlib.Path(sys.argv.pop(1))
from reproduce.laser import propositions as m
m.PROFILES["quick"] = m.Study(num_mdps=1, steps=300, sweep=9)
real = m.proposition_3
def proposition_3(study):
    rows, extras = real(study)
    return rows + [m._check("3", "a check that fails", 1.0, "< 0", False)], extras
m.proposition_3 = proposition_3
cli.run(m.main)
"""


def test_a_failing_check_of_proposition_3_exits_1(tmp_path):
    """The exit status counts every proposition's checks."""
    result = run(sys.executable, "-c", FAILING, str(tmp_path), "--profile=quick")
    assert result.returncode == 1, result.stderr
    assert "check(s) failed: " in result.stderr and "a check that fails" in result.stderr
