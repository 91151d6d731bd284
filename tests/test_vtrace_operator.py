"""IMPALA Theorem 1 and Remark 3 on small random MDPs, through the exact operator study."""

import numpy as np
import pytest

from reproduce.impala import vtrace_operator as study_module

STUDY = study_module.Study(num_mdps=3, num_states=8, num_actions=3)


@pytest.fixture(scope="module")
def mdps():
    rng = np.random.default_rng(0)
    return [study_module.random_mdp(rng, STUDY) for _ in range(STUDY.num_mdps)]


@pytest.mark.parametrize("rho_bar", [0.5, 1.0, 10.0, np.inf])
def test_fixed_point_is_the_value_of_pi_rho_bar(mdps, rho_bar):
    for mdp in mdps:
        b, M = study_module.operator(mdp, rho_bar, min(1.0, rho_bar))
        V = np.linalg.solve(np.eye(len(b)) - M, b)
        expected = study_module.value(mdp, study_module.truncated_policy(mdp, rho_bar))
        np.testing.assert_allclose(V, expected, atol=1e-9)


def test_fixed_point_moves_from_v_mu_to_v_pi_as_rho_bar_grows(mdps):
    for mdp in mdps:
        V_pi = study_module.value(mdp, mdp.pi)
        distances = [
            np.abs(study_module.value(mdp, study_module.truncated_policy(mdp, r)) - V_pi).max()
            for r in (1e-3, 0.5, 1.0, 10.0, np.inf)
        ]
        assert distances[-1] < 1e-9 and distances[0] > distances[-1]
        np.testing.assert_allclose(
            study_module.value(mdp, study_module.truncated_policy(mdp, 1e-9)),
            study_module.value(mdp, mdp.mu),
            atol=1e-6,
        )


def test_c_bar_changes_the_modulus_but_not_the_fixed_point(mdps):
    for mdp in mdps:
        fixed_points, moduli = [], []
        for c_bar in (0.0, 0.5, 1.0, 2.0):
            b, M = study_module.operator(mdp, 2.0, c_bar)
            fixed_points.append(np.linalg.solve(np.eye(len(b)) - M, b))
            moduli.append(np.abs(M).sum(1).max())
        for V in fixed_points[1:]:
            np.testing.assert_allclose(V, fixed_points[0], atol=1e-9)
        assert moduli[0] > moduli[-1]  # Longer traces contract faster here.


@pytest.mark.parametrize("rho_bar, c_bar", [(1.0, 1.0), (10.0, 0.5), (np.inf, 1.0), (0.5, 0.0)])
def test_modulus_equals_eta_and_respects_the_bound(mdps, rho_bar, c_bar):
    for mdp in mdps:
        _, M = study_module.operator(mdp, rho_bar, c_bar)
        modulus = np.abs(M).sum(1).max()
        eta, bound = study_module.theorem_1_eta(mdp, rho_bar, c_bar)
        assert modulus == pytest.approx(eta, abs=1e-12)
        assert modulus <= bound + 1e-12 < 1.0
