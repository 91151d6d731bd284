"""PER's Blind Cliffwalk study: Fig. 1, Fig. 2 left and Fig. 2 right (App. B.1).

Median Q-learning updates until the MSE to Q* is below 1e-3, against the
replay size 2^(n+1) - 2, over 10 seeds, log-log, with a min/max band:

* Fig. 1: tabular, uniform vs the hindsight oracle;
* Fig. 2 left: tabular, greedy TD-error prioritisation vs uniform vs oracle;
* Fig. 2 right: linear, rank-based and proportional vs uniform vs oracle.

Profiles: quick n = 2..10, full n = 2..16. Writes
results/per/<profile>/cliffwalk.{csv,md}, cliffwalk_fig1.png,
cliffwalk_fig2.png and provenance.
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
from common import cli, provenance  # noqa: E402
from per import cliffwalk  # noqa: E402

reproduce.define_flags()
flags.DEFINE_integer("seeds", 10, "Runs per point (App. B.1: 10).", lower_bound=1)
FLAGS = flags.FLAGS

SIZES = {"quick": range(2, 11), "full": range(2, 17)}
FIGURES = {  # figure -> (representation, variants)
    "fig1": ("tabular", ("uniform", "oracle")),
    "fig2_left": ("tabular", ("uniform", "oracle", "greedy")),
    "fig2_right": ("linear", ("uniform", "oracle", "rank", "proportional")),
}
COLOURS = {"uniform": "black", "oracle": "tab:cyan", "greedy": "tab:red", "rank": "tab:red", "proportional": "tab:blue"}


def run(profile: str, seeds: list[int]) -> list[dict]:
    rows, cache = [], {}
    for figure, (representation, variants) in FIGURES.items():
        for variant in variants:
            for n in SIZES[profile]:
                for seed in seeds:
                    key = (representation, variant, n, seed)
                    if key not in cache:  # Fig. 1 and Fig. 2 left share their runs.
                        cache[key] = cliffwalk.updates_to_converge(variant, representation, n, seed)
                    rows.append({
                        "figure": figure, "variant": variant, "n_states": n,
                        "replay_size": cliffwalk.replay_size(n), "seed": seed, "updates": cache[key],
                    })  # fmt: skip
    return rows


def curve(rows: list[dict], figure: str, variant: str) -> tuple[np.ndarray, ...]:
    """Replay sizes and median, min, max updates where every seed converged."""
    sizes, stats = [], []
    for size in sorted({r["replay_size"] for r in rows}):
        values = [
            r["updates"] for r in rows if r["figure"] == figure and r["variant"] == variant and r["replay_size"] == size
        ]
        median, low, high = cliffwalk.median_and_range(values)
        if not np.isnan(median):
            sizes.append(size)
            stats.append((median, low, high))
    return (np.array(sizes), *np.array(stats).T) if stats else (np.array([]),) * 4


def slope(sizes: np.ndarray, medians: np.ndarray) -> float:
    """Least-squares slope of log(updates) against log(replay size), for sizes >= 30."""
    keep = sizes >= 30
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(sizes[keep]), np.log(medians[keep]), 1)[0])


def plot(rows: list[dict], figures: list[str], path, title: str) -> None:
    fig, axes = plt.subplots(1, len(figures), figsize=(5.5 * len(figures), 4.2), squeeze=False)
    for ax, figure in zip(axes[0], figures):
        representation, variants = FIGURES[figure]
        for variant in variants:
            sizes, median, low, high = curve(rows, figure, variant)
            if len(sizes):
                ax.plot(sizes, median, "o-", color=COLOURS[variant], label=variant, ms=3)
                ax.fill_between(sizes, low, high, color=COLOURS[variant], alpha=0.15)
        ax.set(xscale="log", yscale="log", xlabel="replay size (transitions)", ylabel="updates to MSE < 1e-3",
               title=f"{figure.replace('_', ' ')}: {representation}")  # fmt: skip
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def summarise(rows: list[dict], profile: str, seeds: list[int]) -> list[str]:
    sizes = list(SIZES[profile])
    lines = [
        reproduce.heading(
            f"Blind Cliffwalk ({profile} profile: n = {sizes[0]}..{sizes[-1]}, {len(seeds)} seeds)", profile
        ),
        "",
        "PER §3.1-3.3 and App. B.1: Q-learning from a memory of all 2^n action sequences",
        "(replay size 2^(n+1) − 2, one rewarding transition), γ = 1 − 1/n, η = 1/4,",
        "θ ~ N(0, 0.1), until the MSE to Q* is below 1e-3. Medians over seeds.",
        "",
        "| figure | representation | variant | median updates at the largest size | log-log slope | "
        "speed-up over uniform at the largest size |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for figure, (representation, variants) in FIGURES.items():
        uniform_sizes, uniform_median, *_ = curve(rows, figure, "uniform")
        for variant in variants:
            s, median, *_ = curve(rows, figure, variant)
            if not len(s):
                lines.append(f"| {figure} | {representation} | {variant} | did not converge | – | – |")
                continue
            largest = s[-1]
            speedup = (
                uniform_median[uniform_sizes == largest][0] / median[-1] if largest in uniform_sizes else float("nan")
            )
            lines.append(
                f"| {figure} | {representation} | {variant} | {median[-1]:,.0f} (size {largest:,}) "
                f"| {slope(s, median):.2f} | {speedup:.1f}× |"
            )
    stalled = sorted({(r["variant"], r["n_states"]) for r in rows if r["updates"] is None})
    lines += [
        "",
        "## Against the paper",
        "",
        "The paper's figures (no numbers are printed) show uniform replay's updates growing with",
        "the replay size and the oracle staying orders of magnitude below it, the gap widening",
        "with size (an exponential speed-up in n); greedy TD-error prioritisation (Fig. 2 left)",
        "and both stochastic variants (Fig. 2 right) lie between. The slopes above measure the",
        "same: uniform grows about linearly in the replay size (slope near 1), the prioritised",
        "variants more slowly, and the oracle far more slowly still.",
        "",
        "**What limits the oracle.** A literal oracle tries every transition in the memory for every",
        "update, O(2^(n+1)) work each; the memory holds only 2n distinct transitions, and duplicates act",
        "identically, so we try each distinct one once: the tabular oracle costs O(n) per update",
        f"and runs to the largest size of this profile (n = {sizes[-1]}).",
        "With the linear representation the greedy hindsight oracle stalls: the shared bias feature",
        "couples all states of an action, and it reaches points where every available update raises",
        "the error to Q*, so by its own criterion it has no move left. We report those runs as not",
        "converged rather than change the oracle.",
    ]
    if stalled:
        lines.append("Stalled (variant, n): " + ", ".join(f"({v}, {n})" for v, n in stalled) + ".")
    lines += [
        "",
        "App. B.1 gives no α or ε for the stochastic variants: we use α = 0.7 (rank) and 0.6",
        "(proportional) from PER Table 3, ε = 1e-6, and no IS correction (β = 0).",
    ]
    return lines


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    reproduce.refuse_unused(("fresh",), "this study trains no runs to retrain (each start computes it anew)")
    start = time.time()
    seeds = [FLAGS.seed + i for i in range(FLAGS.seeds)]
    out = reproduce.output_dir("per", FLAGS.profile)
    reproduce.check_keeps_seeds(out, "cliffwalk", seeds, f"--seed={FLAGS.seed} --seeds={FLAGS.seeds}")
    rows = run(FLAGS.profile, seeds)
    reproduce.write_csv(out / "cliffwalk.csv", rows)
    plot(rows, ["fig1"], out / "cliffwalk_fig1.png", "PER Fig. 1: uniform vs oracle")
    plot(rows, ["fig2_left", "fig2_right"], out / "cliffwalk_fig2.png", "PER Fig. 2")
    lines = summarise(rows, FLAGS.profile, seeds)
    (out / "cliffwalk.md").write_text("\n".join(lines) + "\n")
    provenance.write(
        out, "cliffwalk.provenance.json", config=dataclasses.asdict(cliffwalk.Settings()), seeds=seeds,
        frames=None, wall_time_s=time.time() - start,
        scale=f"{FLAGS.profile} profile: n = {SIZES[FLAGS.profile][0]}..{SIZES[FLAGS.profile][-1]}",
    )  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    cli.run(main)
