"""IMPALA Theorem 1 and Remark 3 on small random MDPs, through the exact operator's maths (reproduce._tabular)."""

import numpy as np
import pytest

from reproduce import _tabular
from reproduce.impala import vtrace_operator as study_module

NUM_MDPS, NUM_STATES, NUM_ACTIONS, GAMMA = 3, 8, 3, 0.9


def _random_mdp(rng: np.random.Generator) -> _tabular.Mdp:
    return _tabular.random_mdp(rng, NUM_STATES, NUM_ACTIONS, GAMMA)


@pytest.fixture(scope="module")
def mdps():
    rng = np.random.default_rng(0)
    return [_random_mdp(rng) for _ in range(NUM_MDPS)]


@pytest.mark.parametrize("rho_bar", [0.5, 1.0, 10.0, np.inf])
def test_fixed_point_is_the_value_of_pi_rho_bar(mdps, rho_bar):
    for mdp in mdps:
        V = _tabular.vtrace_fixed_point(mdp, rho_bar)
        expected = _tabular.value(mdp, _tabular.truncated_policy(mdp, rho_bar))
        np.testing.assert_allclose(V, expected, atol=1e-9)


def test_fixed_point_is_v_mu_as_rho_bar_nears_0_and_v_pi_at_infinity(mdps):
    # IMPALA §4.1 / Remark 3; solved from the operator, not from eq. (6).
    for mdp in mdps:
        V_mu, V_pi = _tabular.value(mdp, mdp.mu), _tabular.value(mdp, mdp.pi)
        assert np.abs(V_pi - V_mu).max() > 0.1  # The endpoints are distinguishable.
        np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, np.inf), V_pi, atol=1e-9)
        np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, 1e-6), V_mu, atol=1e-4)


def test_evaluated_policy_moves_monotonically_from_mu_to_pi():
    # Remark 3: for finite rho_bar the operator evaluates a policy "in between mu
    # and pi". Per state, pi_rho_bar's total-variation distance to pi shrinks
    # and its distance to mu grows as rho_bar grows.
    rng = np.random.default_rng(1)
    rho_bars = np.geomspace(1e-4, 1e4, 161)
    for _ in range(5):
        mdp = _random_mdp(rng)
        policies = np.stack([_tabular.truncated_policy(mdp, r) for r in rho_bars])  # [R, S, A]
        to_pi = np.abs(policies - mdp.pi).sum(-1)
        to_mu = np.abs(policies - mdp.mu).sum(-1)
        assert (np.diff(to_pi, axis=0) <= 1e-12).all() and (np.diff(to_mu, axis=0) >= -1e-12).all()
        assert to_pi[-1].max() < 1e-12 and to_mu[0].max() < 1e-3


def test_fixed_point_value_can_leave_the_segment_between_v_mu_and_v_pi():
    # Why the distance of V^{pi_rho_bar} to V^pi is not monotone in rho_bar: one
    # state, three self-loop actions, r = (0, 0, 1), gamma = 0.9. mu and pi both
    # pay 0.01 per step, so V^mu = V^pi = 0.1. At rho_bar = 1, eq. (6) weights
    # min(mu, pi) = (0.01, 0.01, 0.01): the uniform policy, V = (1/3) / 0.1.
    mdp = _tabular.Mdp(
        P=np.ones((1, 3, 1)),
        r=np.array([[0.0, 0.0, 1.0]]),
        mu=np.array([[0.98, 0.01, 0.01]]),
        pi=np.array([[0.01, 0.98, 0.01]]),
        gamma=0.9,
    )
    np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, np.inf), [0.1], atol=1e-12)
    np.testing.assert_allclose(_tabular.vtrace_fixed_point(mdp, 1.0), [10 / 3], atol=1e-12)


def test_c_bar_changes_the_modulus_but_not_the_fixed_point(mdps):
    for mdp in mdps:
        fixed_points, moduli = [], []
        for c_bar in (0.0, 0.5, 1.0, 2.0):
            b, M = _tabular.operator(mdp, 2.0, c_bar)
            fixed_points.append(np.linalg.solve(np.eye(len(b)) - M, b))
            moduli.append(np.abs(M).sum(1).max())
        for V in fixed_points[1:]:
            np.testing.assert_allclose(V, fixed_points[0], atol=1e-9)
        assert moduli[0] > moduli[-1]  # Longer traces contract faster here.


@pytest.mark.parametrize("rho_bar, c_bar", [(1.0, 1.0), (10.0, 0.5), (np.inf, 1.0), (0.5, 0.0)])
def test_modulus_equals_eta_and_respects_the_bound(mdps, rho_bar, c_bar):
    for mdp in mdps:
        _, M = _tabular.operator(mdp, rho_bar, c_bar)
        modulus = np.abs(M).sum(1).max()
        eta, bound = _tabular.theorem_1_eta(mdp, rho_bar, c_bar)
        assert modulus == pytest.approx(eta, abs=1e-12)
        assert modulus <= bound + 1e-12 < 1.0


# The study (`reproduce.impala.vtrace_operator`): its rows and summary ----------

STUDY = study_module.Study(num_mdps=2, num_states=4, num_actions=3)


@pytest.fixture(scope="module")
def study_rows():
    rng = np.random.default_rng(0)
    mdps = [_tabular.random_mdp(rng, STUDY.num_states, STUDY.num_actions, STUDY.gamma, STUDY.policy_temperature)
            for _ in range(STUDY.num_mdps)]  # fmt: skip
    return [row for i, mdp in enumerate(mdps) for row in study_module.analyse(mdp, STUDY, i)]


def test_every_c_bar_up_to_rho_bar_is_analysed(study_rows):
    """Theorem 1 allows c_bar = rho_bar (0.5 with 0.5, 1 with 1)."""
    cases = {(r["rho_bar"], r["c_bar"]) for r in study_rows if r["mdp"] == 0}
    assert cases == {(rb, cb) for rb in STUDY.rho_bars for cb in STUDY.c_bars if cb <= rb}
    assert {(0.5, 0.5), (1.0, 1.0)} <= cases


def test_the_modulus_is_the_operators_sup_norm_theorem_1s_eta(study_rows):
    """Read off the rows of M (the sup norm), not its columns."""
    for r in study_rows:
        assert r["modulus"] == pytest.approx(r["eta"], abs=1e-12)


def test_unclipped_the_fixed_point_is_v_pi_one_gap_from_v_mu(study_rows):
    for r in study_rows:
        if r["rho_bar"] == np.inf:
            assert r["distance_to_V_pi"] < 1e-7 and r["distance_to_V_mu"] == pytest.approx(1.0, abs=1e-7)


def test_c_bars_section_is_at_the_largest_finite_rho_bar(study_rows):
    """At the smallest (0.5) c_bar = 1 is not even allowed."""
    lines = study_module.summarise(study_rows, STUDY, "quick")
    heading = "## 2. c_bar sets the speed, not the fixed point (rho_bar = 10)"
    section = lines[lines.index(heading) :]
    assert sum(line.startswith("| ") and line[2].isdigit() for line in section) == len(STUDY.c_bars)
