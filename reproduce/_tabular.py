"""Exact tabular-MDP maths shared by the reproduce studies; defines no flags.

Random finite MDPs, exact policy evaluation and the V-trace operator of IMPALA
eq. (5) as an affine map, for `reproduce.impala.vtrace_operator` (IMPALA
App. A) and `reproduce.laser.propositions` (LASER Proposition 1). Not an entry
point: `python -m reproduce` skips modules whose name starts with an underscore.
Equation, theorem and remark numbers are IMPALA's (Espeholt et al. 2018).
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Any

import numpy as np

from common import provenance


@dataclasses.dataclass
class Mdp:
    P: np.ndarray  # [S, A, S]
    r: np.ndarray  # [S, A]
    mu: np.ndarray  # [S, A] behaviour policy
    pi: np.ndarray  # [S, A] target policy
    gamma: float


def random_mdp(
    rng: np.random.Generator, num_states: int, num_actions: int, gamma: float, policy_temperature: float = 1.0
) -> Mdp:
    """Dirichlet(1) transitions, standard normal rewards, softmax policies mu and pi of random logits.

    Logits are standard normal divided by policy_temperature: lower is more peaked.
    """
    S, A = num_states, num_actions
    P = rng.dirichlet(np.ones(S), size=(S, A))
    r = rng.standard_normal((S, A))

    def policy():
        logits = rng.standard_normal((S, A)) / policy_temperature
        return np.exp(logits) / np.exp(logits).sum(1, keepdims=True)

    return Mdp(P=P, r=r, mu=policy(), pi=policy(), gamma=gamma)


def value(mdp: Mdp, policy: np.ndarray) -> np.ndarray:
    """V^policy = (I - gamma P_policy)^-1 r_policy."""
    P_policy = np.einsum("xa,xay->xy", policy, mdp.P)
    r_policy = (policy * mdp.r).sum(1)
    return np.linalg.solve(np.eye(len(r_policy)) - mdp.gamma * P_policy, r_policy)


def truncated_policy(mdp: Mdp, rho_bar: float) -> np.ndarray:
    """pi_rho_bar of eq. (6): min(rho_bar mu, pi), normalised."""
    weights = np.minimum(rho_bar * mdp.mu, mdp.pi)
    return weights / weights.sum(1, keepdims=True)


def operator(mdp: Mdp, rho_bar: float, c_bar: float) -> tuple[np.ndarray, np.ndarray]:
    """(b, M) with R V = b + M V, the V-trace operator of eq. (5).

    R V = V + (I - C)^-1 D(V), with C[x, y] = gamma sum_a mu(a|x) c(x, a) P(y|x, a) and
    D(V)(x) = sum_a mu(a|x) rho(x, a) (r(x, a) + gamma sum_y P(y|x, a) V(y) - V(x)).
    """
    ratio = mdp.pi / mdp.mu
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    S = len(mdp.r)
    C = mdp.gamma * np.einsum("xa,xa,xay->xy", mdp.mu, c, mdp.P)
    trace = np.linalg.inv(np.eye(S) - C)  # sum_t C^t
    P_rho = np.einsum("xa,xa,xay->xy", mdp.mu, rho, mdp.P)
    expected_rho = (mdp.mu * rho).sum(1)
    b = trace @ (mdp.mu * rho * mdp.r).sum(1)
    M = np.eye(S) + trace @ (mdp.gamma * P_rho - np.diag(expected_rho))
    return b, M


def theorem_1_eta(mdp: Mdp, rho_bar: float, c_bar: float) -> tuple[float, float]:
    """(max_x eta(x), 1 - (1 - gamma) beta) of Theorem 1."""
    ratio = mdp.pi / mdp.mu
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    gamma = mdp.gamma
    C = gamma * np.einsum("xa,xa,xay->xy", mdp.mu, c, mdp.P)
    expected_rho = (mdp.mu * rho).sum(1)
    # sum_t gamma^t E[(prod_{i<=t-2} c_i) rho_{t-1}] = 1 + gamma (I - C)^-1 E rho.
    weighted = 1.0 + gamma * np.linalg.solve(np.eye(len(C)) - C, expected_rho)
    eta = 1.0 / gamma - (1.0 / gamma - 1.0) * weighted
    beta = expected_rho.min()
    return float(eta.max()), float(1.0 - (1.0 - gamma) * beta)


def fixed_point(b: np.ndarray, M: np.ndarray, tolerance: float) -> tuple[np.ndarray, list[float]]:
    """Iterates V <- R V from V = 0; returns V and the sup-norm change per iteration."""
    V, changes = np.zeros_like(b), []
    for _ in range(100_000):
        new = b + M @ V
        changes.append(float(np.abs(new - V).max()))
        V = new
        if changes[-1] < tolerance:
            break
    return V, changes


def vtrace_fixed_point(mdp: Mdp, rho_bar: float) -> np.ndarray:
    """The fixed point of the V-trace operator (IMPALA eq. (5)), by a linear solve. [S]

    c_bar = min(1, rho_bar): IMPALA's Theorem 1 needs c_bar <= rho_bar and
    c_bar does not move the fixed point (IMPALA Remark 3).
    """
    b, M = operator(mdp, rho_bar, min(1.0, rho_bar))
    return np.linalg.solve(np.eye(len(b)) - M, b)


def write_provenance(
    out: pathlib.Path, stem: str, study: Any, seed: int, profile: str, start: float, also: tuple[str, ...] = ()
) -> None:
    """out/<stem>.provenance.json for an exact study (a dataclass config, one seed, no frames) whose outputs are
    out/<stem>.* and the files named in `also`; kept when a rerun reproduces them byte for byte, so regenerating
    from a clean checkout leaves git clean (`provenance.write_derived`)."""
    provenance.write_derived(
        out, stem, also, config=dataclasses.asdict(study), seeds=[seed],
        frames=None, wall_time_s=time.time() - start, scale=f"{profile} profile (exact computation)",
    )  # fmt: skip
