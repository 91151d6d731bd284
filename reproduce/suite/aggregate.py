"""Scores of a suite: per-game table, aggregates with bootstrap intervals, figures.

    python -m reproduce.suite.aggregate SUITE_DIR [--reps 2000]

Reads every evaluated job of SUITE_DIR/suite.json (`<game>_s<seed>/final.json`
and the evaluation of its final checkpoint, `eval_step<N>.json`) and writes
into SUITE_DIR:

* per_game.csv: game,env,seed,frames,score,normalized,episodes (score: the
  evaluation's mean return);
* aggregate.csv: statistic,value,ci_low,ci_high for median, mean, iqm and
  mean_capped of the normalised scores, with 95% stratified-bootstrap
  intervals over seeds (rliable, Agarwal et al. 2021) on the seeds evaluated
  on every game;
* aggregate.md, per_game.png and aggregate.png.
"""

from __future__ import annotations

import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402

from common import cli  # noqa: E402
from common.errors import UsageError  # noqa: E402
from reproduce import write_csv  # noqa: E402
from reproduce.suite import _plan, _stats  # noqa: E402

flags.DEFINE_integer("reps", 2000, "Bootstrap resamples (Agarwal et al. 2021 use 50,000 for final figures).")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise UsageError("expected one suite directory: python -m reproduce.suite.aggregate SUITE_DIR")
    if FLAGS.reps < 1:
        raise UsageError(f"--reps={FLAGS.reps}: must be >= 1")
    logging.set_verbosity(logging.WARNING)  # rliable logs a line per bootstrap at INFO.
    suite_dir = pathlib.Path(argv[1])
    suite = _plan.load_suite(suite_dir)
    if suite is None:
        raise UsageError(f"{suite_dir} has no suite.json: not a suite directory")
    rows, missing = per_game_rows(suite, suite_dir)
    games = [_plan.game(env) for env in suite.games]
    seeds = _stats.complete_seeds(rows, games)
    if not seeds:
        raise UsageError(f"{suite_dir}: no seed is evaluated on every game yet ({len(missing)} job(s) not done)")
    matrix = _stats.score_matrix(rows, games, seeds)
    summary = _stats.aggregates(matrix, FLAGS.reps)
    write_csv(suite_dir / "per_game.csv", rows)
    write_csv(suite_dir / "aggregate.csv", summary)
    _plot_per_game(suite, rows, games, suite_dir / "per_game.png")
    _plot_aggregate(suite, summary, suite_dir / "aggregate.png")
    (suite_dir / "aggregate.md").write_text(_markdown(suite, rows, games, seeds, summary, missing))
    print(f"{suite_dir}: {len(rows)} run(s) on {len(games)} game(s), seeds {seeds} in the aggregates")
    for row in summary:
        print(f"  {row['statistic']:12} {row['value']:.3f}  [{row['ci_low']:.3f}, {row['ci_high']:.3f}]")


def per_game_rows(suite: _plan.Suite, suite_dir: pathlib.Path) -> tuple[list[dict], list[str]]:
    """One row per evaluated job, and the names of the jobs not evaluated yet."""
    rows, missing = [], []
    for job in _plan.jobs(suite):
        evaluated = _plan.evaluation(suite_dir / job.name)
        if evaluated is None:
            missing.append(job.name)
            continue
        final = json.loads((suite_dir / job.name / "final.json").read_text())
        score = evaluated["mean_return"]
        rows.append(
            {
                "game": _plan.game(job.env),
                "env": job.env,
                "seed": job.seed,
                "frames": final["frames"],
                "score": score,
                "normalized": _stats.normalized(suite.agent, job.env, score),
                "episodes": evaluated["episodes"],
            }  # fmt: skip
        )
    return rows, missing


def _title(suite: _plan.Suite) -> str:
    games, seeds = len(suite.games), len(suite.seeds)
    return f"{suite.agent} ({suite.preset}): {games} games x {seeds} seeds, {suite.frames:,} frames per run"


def _plot_per_game(suite: _plan.Suite, rows: list[dict], games: list[str], path: pathlib.Path) -> None:
    """Normalised score per game: each seed a dot, the mean over seeds a bar."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(games) + 2), 3.5))
    for i, game in enumerate(games):
        values = [row["normalized"] for row in rows if row["game"] == game]
        if values:
            ax.bar(i, np.mean(values), color="tab:blue", alpha=0.4)
            ax.plot([i] * len(values), values, "o", color="tab:blue", markersize=4)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="1 = reference score (aggregate.md)")
    ax.set_xticks(range(len(games)), games, rotation=45, ha="right")
    ax.set_ylabel("normalised score")
    ax.set_title(_title(suite), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_aggregate(suite: _plan.Suite, summary: list[dict], path: pathlib.Path) -> None:
    """Each statistic with its 95% bootstrap interval."""
    fig, ax = plt.subplots(figsize=(5, 2.5))
    for i, row in enumerate(summary):
        low, high = row["value"] - row["ci_low"], row["ci_high"] - row["value"]
        ax.errorbar(row["value"], i, xerr=[[low], [high]], fmt="o", color="tab:blue", capsize=4)
    ax.set_yticks(range(len(summary)), [row["statistic"] for row in summary])
    ax.set_xlabel("normalised score (95% stratified-bootstrap CI)")
    ax.set_title(_title(suite), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _markdown(
    suite: _plan.Suite, rows: list[dict], games: list[str], seeds: list[int], summary: list[dict], missing: list[str]
) -> str:
    families = {_plan.family(env) for env in suite.games}
    lines = [
        f"# Suite: {_title(suite)}",
        "",
        f"Games: {', '.join(suite.games)}.",
        f"Seeds {list(suite.seeds)}; evaluation episodes: {suite.eval_episodes or 'the agent protocol default'}.",
        "Score: the evaluation's mean return at the final checkpoint. Normalisation:",
        *[f"- {note}" for note in _stats.normalization_notes(suite.agent, families)],
        "",
        "| game | seeds | mean score | mean normalised |",
        "| --- | --- | --- | --- |",
    ]
    for game in games:
        found = [row for row in rows if row["game"] == game]
        if found:
            score, norm = np.mean([r["score"] for r in found]), np.mean([r["normalized"] for r in found])
            lines.append(f"| {game} | {len(found)} | {score:.2f} | {norm:.3f} |")
    lines += [
        "",
        f"Aggregates over {len(games)} game(s) and seeds {seeds} (those evaluated on every game): median over games",
        "of the mean over seeds, mean, interquartile mean over all runs, and mean with each game capped at 1.0;",
        f"95% percentile intervals from {FLAGS.reps:,} stratified-bootstrap resamples of seeds within each game",
        "(`rliable`, Agarwal et al. 2021).",
        "",
        "| statistic | value | 95% CI |",
        "| --- | --- | --- |",
        *[f"| {r['statistic']} | {r['value']:.3f} | [{r['ci_low']:.3f}, {r['ci_high']:.3f}] |" for r in summary],
    ]
    if missing:
        lines += ["", f"Not evaluated yet, left out: {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    cli.run(main)
