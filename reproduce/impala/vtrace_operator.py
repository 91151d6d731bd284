"""The V-trace operator on random finite MDPs, computed exactly (IMPALA App. A).

No sampling: on a finite MDP with transition tensor P[x, a, y], rewards
r[x, a], behaviour policy mu and target policy pi, the operator of eq. (5) is
affine,

    R V = V + (I - C)^-1 D(V),
    C[x, y] = gamma sum_a mu(a|x) c(x, a) P(y|x, a)          (trace-weighted transitions)
    D(V)(x) = sum_a mu(a|x) rho(x, a) (r(x, a) + gamma sum_y P(y|x, a) V(y) - V(x)),

so R V = b + M V, and its sup-norm contraction modulus is ||M||_inf. We check:

1. the fixed point of R is V^{pi_rho_bar} of eq. (6), and moves from V^mu
   towards V^pi as rho_bar grows (Theorem 1, Remark 3);
2. c_bar changes the contraction speed but never the fixed point (Remark 3);
3. ||M||_inf equals Theorem 1's eta and is at most 1 - (1 - gamma) beta, with
   beta = min_x E_mu rho_0.

The MDPs and the operator are in `reproduce._tabular`, shared with LASER's
Proposition 1 study. Writes `results/impala/<profile>/vtrace_operator.{csv,md,png}` and provenance.
"""

from __future__ import annotations

import dataclasses
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

import reproduce  # noqa: E402
from common import cli  # noqa: E402
from reproduce import _tabular  # noqa: E402

reproduce.define_flags()
FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Study:
    num_mdps: int
    num_states: int
    num_actions: int
    gamma: float = 0.9
    rho_bars: tuple[float, ...] = (0.5, 1.0, 10.0, np.inf)  # The grid.
    c_bars: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0)  # All <= rho_bar = 1 or more.
    policy_temperature: float = 1.0  # Softmax temperature of the random policies.
    tolerance: float = 1e-10  # Sup-norm change that ends fixed-point iteration.


PROFILES = {
    "quick": Study(num_mdps=20, num_states=20, num_actions=4),
    "full": Study(num_mdps=200, num_states=50, num_actions=6),
}


def analyse(mdp: _tabular.Mdp, study: Study, index: int) -> list[dict]:
    V_mu, V_pi = _tabular.value(mdp, mdp.mu), _tabular.value(mdp, mdp.pi)
    gap = np.abs(V_pi - V_mu).max()
    rows = []
    for rho_bar in study.rho_bars:
        for c_bar in study.c_bars:
            if c_bar > rho_bar:  # Theorem 1 assumes rho_bar >= c_bar.
                continue
            b, M = _tabular.operator(mdp, rho_bar, c_bar)
            V, changes = _tabular.fixed_point(b, M, study.tolerance)
            eta, bound = _tabular.theorem_1_eta(mdp, rho_bar, c_bar)
            V_rho_bar = _tabular.value(mdp, _tabular.truncated_policy(mdp, rho_bar))
            rows.append(
                {
                    "mdp": index,
                    "rho_bar": rho_bar,
                    "c_bar": c_bar,
                    "iterations": len(changes),
                    "error_to_V_pi_rho_bar": float(np.abs(V - V_rho_bar).max()),
                    "distance_to_V_mu": float(np.abs(V - V_mu).max() / gap),
                    "distance_to_V_pi": float(np.abs(V - V_pi).max() / gap),
                    "modulus": float(np.abs(M).sum(1).max()),
                    "eta": eta,
                    "bound": bound,
                }
            )
    return rows


def summarise(rows: list[dict], study: Study, profile: str) -> list[str]:
    def stat(key, **where):
        values = [r[key] for r in rows if all(r[k] == v for k, v in where.items())]
        return np.median(values), np.max(values)

    lines = [
        reproduce.heading("The V-trace operator, computed exactly on random MDPs (IMPALA App. A)", profile),
        "",
        f"{study.num_mdps} random MDPs, {study.num_states} states, {study.num_actions} actions, "
        f"gamma {study.gamma}; random softmax policies mu and pi. Exact: no sampling.",
        "Distances are sup-norm, relative to ||V^pi - V^mu||_inf; medians (max) over MDPs.",
        "",
        "## 1. The fixed point is V^{pi_rho_bar} and moves from V^mu to V^pi as rho_bar grows",
        "",
        "| rho_bar | error to V^{pi_rho_bar} (max) | distance to V^mu | distance to V^pi |",
        "| --- | --- | --- | --- |",
    ]
    for rho_bar in study.rho_bars:
        c_bar = min(1.0, rho_bar)
        err = stat("error_to_V_pi_rho_bar", rho_bar=rho_bar, c_bar=c_bar)[1]
        to_mu = stat("distance_to_V_mu", rho_bar=rho_bar, c_bar=c_bar)[0]
        to_pi = stat("distance_to_V_pi", rho_bar=rho_bar, c_bar=c_bar)[0]
        lines.append(f"| {rho_bar:g} | {err:.1e} | {to_mu:.3f} | {to_pi:.3f} |")
    rho_bar = max(r for r in study.rho_bars if np.isfinite(r))
    lines += [
        "",
        f"## 2. c_bar sets the speed, not the fixed point (rho_bar = {rho_bar:g})",
        "",
        "| c_bar | iterations to 1e-10 (median) | modulus \\|\\|M\\|\\| (median) | error to V^{pi_rho_bar} (max) |",
        "| --- | --- | --- | --- |",
    ]
    for c_bar in study.c_bars:
        its = stat("iterations", rho_bar=rho_bar, c_bar=c_bar)[0]
        mod = stat("modulus", rho_bar=rho_bar, c_bar=c_bar)[0]
        err = stat("error_to_V_pi_rho_bar", rho_bar=rho_bar, c_bar=c_bar)[1]
        lines.append(f"| {c_bar:g} | {its:.0f} | {mod:.4f} | {err:.1e} |")
    slack_eta = max(abs(r["modulus"] - r["eta"]) for r in rows)
    slack_bound = max(r["modulus"] - r["bound"] for r in rows)
    lines += [
        "",
        "## 3. Contraction modulus against Theorem 1",
        "",
        f"Over all {len(rows)} (MDP, rho_bar, c_bar) cases: max |modulus − eta| = {slack_eta:.1e}, "
        f"and max (modulus − (1 − (1 − gamma) beta)) = {slack_bound:.3f} "
        f"({'never above the bound' if slack_bound <= 1e-12 else 'ABOVE THE BOUND'}).",
    ]
    return lines


def plot(rows: list[dict], study: Study, path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    finite = [r for r in study.rho_bars if np.isfinite(r)]
    labels = [f"{r:g}" for r in finite] + ["∞"]
    x = np.arange(len(study.rho_bars))
    for key, name in (("distance_to_V_mu", "to V^μ"), ("distance_to_V_pi", "to V^π")):
        medians = [
            np.median([r[key] for r in rows if r["rho_bar"] == rb and r["c_bar"] == min(1.0, rb)])
            for rb in study.rho_bars
        ]
        axes[0].plot(x, medians, "o-", label=f"fixed point {name}")
    axes[0].set(xticks=x, xticklabels=labels, xlabel="ρ̄", ylabel="sup distance / ||V^π − V^μ||",
                title="Fixed point V^{π_ρ̄} moves from V^μ to V^π")  # fmt: skip
    axes[0].legend()
    rho_bar = max(finite)
    for c_bar in study.c_bars:
        its = [r["iterations"] for r in rows if r["rho_bar"] == rho_bar and r["c_bar"] == c_bar]
        axes[1].hist(its, bins=20, alpha=0.6, label=f"c̄ = {c_bar:g}")
    axes[1].set(xlabel="iterations to converge (1e-10)", ylabel="MDPs",
                title=f"c̄ changes speed only (ρ̄ = {rho_bar:g})")  # fmt: skip
    axes[1].legend()
    axes[2].scatter([r["bound"] for r in rows], [r["modulus"] for r in rows], s=8)
    lims = [min(r["modulus"] for r in rows) - 0.01, 1.0]
    axes[2].plot(lims, lims, "k--", lw=1, label="modulus = bound")
    axes[2].set(xlabel="1 − (1 − γ)β", ylabel="measured modulus ||M||∞", title="Theorem 1: modulus ≤ bound")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    reproduce.refuse_unused(("fresh",), "this study trains no runs to retrain (each start computes it anew)")
    out = reproduce.output_dir("impala", FLAGS.profile)
    reproduce.check_keeps_seeds(out, "vtrace_operator", [FLAGS.seed], f"--seed={FLAGS.seed}")
    start = time.time()
    study = PROFILES[FLAGS.profile]
    rng = np.random.default_rng(FLAGS.seed)
    mdps = (
        _tabular.random_mdp(rng, study.num_states, study.num_actions, study.gamma, study.policy_temperature)
        for _ in range(study.num_mdps)
    )
    rows = [row for i, mdp in enumerate(mdps) for row in analyse(mdp, study, i)]
    reproduce.write_csv(out / "vtrace_operator.csv", rows)
    lines = summarise(rows, study, FLAGS.profile)
    (out / "vtrace_operator.md").write_text("\n".join(lines) + "\n")
    plot(rows, study, out / "vtrace_operator.png")
    _tabular.write_provenance(out, "vtrace_operator", study, FLAGS.seed, FLAGS.profile, start)
    print("\n".join(lines))


if __name__ == "__main__":
    cli.run(main)
