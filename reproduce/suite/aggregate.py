"""Scores of a suite beside the papers': per-game table, aggregates with bootstrap intervals, figures.

    python -m reproduce.suite.aggregate SUITE_DIR [--reps 2000]

Reads every evaluated job of SUITE_DIR/suite.json (`<game>_s<seed>/final.json`
and the evaluation of its final checkpoint, `eval_step<N>.json`) and writes
into SUITE_DIR:

* per_game.csv: game,env,seed,frames,score,normalized,episodes,published,
  published_normalized (score: the evaluation's mean return; published: the
  paper's score of the game for the suite's agent and preset, `_published`,
  normalised as ours; empty where the paper has none);
* aggregate.csv: statistic,value,ci_low,ci_high for median, mean, iqm and
  mean_capped of the normalised scores, with 95% stratified-bootstrap
  intervals over seeds (rliable, Agarwal et al. 2021) on the seeds evaluated
  on every game;
* aggregate.md: the per-game table with the published score beside ours, the
  aggregates, and ours beside the published median and mean over the suite's
  games and over the paper's full set (for IMPALA also under the Video Pinball
  reference its Table 4 means need, `common.scores.VARIANTS`);
* per_game.png (ours and published per game, normalised, log scale) and
  aggregate.png (each statistic with its interval);
* aggregate.provenance.json: the suite, its runs' frames and wall time, each
  run's own provenance and each output's SHA-256, so these files can be
  committed without the runs; an aggregate made again that changes none of
  this keeps it as it was.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402
from matplotlib import ticker  # noqa: E402

from common import cli, provenance, scores  # noqa: E402
from common.errors import UsageError  # noqa: E402
from reproduce import _runs, write_csv  # noqa: E402
from reproduce.suite import _plan, _published, _stats  # noqa: E402

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
    games = suite_games(suite)
    seeds = _stats.complete_seeds(rows, games)
    if not seeds:
        raise UsageError(f"{suite_dir}: no seed is evaluated on every game yet ({len(missing)} job(s) not done)")
    matrix = _stats.score_matrix(rows, games, seeds)
    summary = _stats.aggregates(matrix, FLAGS.reps)
    write_csv(suite_dir / "per_game.csv", rows)
    write_csv(suite_dir / "aggregate.csv", summary)
    comparisons = _comparisons(suite, rows, seeds)
    _plot_per_game(suite, rows, games, suite_dir / "per_game.png")
    _plot_aggregate(suite, summary, comparisons, suite_dir / "aggregate.png")
    markdown = _markdown(suite, rows, games, seeds, summary, missing) + _markdown_published(suite, comparisons)
    (suite_dir / "aggregate.md").write_text(markdown)
    write_provenance(suite, suite_dir, seeds)
    print(f"{suite_dir}: {len(rows)} run(s) on {len(games)} game(s), seeds {seeds} in the aggregates")
    for row in summary:
        print(f"  {row['statistic']:12} {row['value']:.3f}  [{row['ci_low']:.3f}, {row['ci_high']:.3f}]")


def per_game_rows(suite: _plan.Suite, suite_dir: pathlib.Path) -> tuple[list[dict], list[str]]:
    """One row per evaluated job, and the names of the jobs not evaluated yet; all under one evaluation protocol
    (`check_one_protocol`)."""
    rows, missing, episodes = [], [], {}
    for job in _plan.jobs(suite):
        evaluated = _plan.evaluation(suite_dir / job.name)
        if evaluated is None:
            missing.append(job.name)
            continue
        final = json.loads((suite_dir / job.name / "final.json").read_text())
        # A multi-task evaluation scores each level (IMPALA §5.3): a row per level.
        levels = evaluated.get("levels") or {_plan.game(job.env): evaluated}
        for game, env in _plan.scored_games(job.env):
            score = levels[game]["mean_return"]
            published = _published.published(suite.agent, suite.preset, env) or (None, None)
            rows.append({
                "game": game, "env": env, "seed": job.seed, "frames": final["frames"], "score": score,
                "normalized": _stats.normalized(suite.agent, env, score), "episodes": levels[game]["episodes"],
                "published": published[0], "published_normalized": published[1],
            })  # fmt: skip
        episodes[job.name] = (
            _plan.family(job.env),
            {levels[game]["episodes"] for game, _ in _plan.scored_games(job.env)},
        )
    check_one_protocol(suite, episodes, suite_dir)
    return rows, missing


def check_one_protocol(suite: _plan.Suite, episodes: dict[str, tuple[str, set[int]]], suite_dir: pathlib.Path) -> None:
    """A `UsageError` naming the jobs evaluated over another number of episodes than the suite's (`--eval_episodes`;
    0: the agent's protocol, the count most of a family's jobs have): a job re-evaluated by hand would be averaged
    in beside the others without a word."""
    by_family: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for family, counts in episodes.values():
        by_family[family].update(counts)
    expected = {}
    for family, counts in by_family.items():
        top = counts.most_common(2)
        if not suite.eval_episodes and len(top) == 2 and top[0][1] == top[1][1]:  # No majority to name the odd.
            each = "; ".join(
                f"{name}: {', '.join(map(str, sorted(n)))}" for name, (f, n) in episodes.items() if f == family
            )
            raise UsageError(
                f"{suite_dir}: its {family} jobs' final evaluations differ in episodes ({each}); evaluate them again "
                "with one --episodes, or put back the evaluations the suite made"
            )
        expected[family] = suite.eval_episodes or top[0][0]
    odd = [name for name, (family, counts) in episodes.items() if counts != {expected[family]}]
    if odd:
        family, counts = episodes[odd[0]]
        raise UsageError(
            f"{suite_dir / odd[0]}: its final evaluation has {', '.join(map(str, sorted(counts)))} episode(s), the "
            f"suite's {expected[family]}{f' (and {len(odd) - 1} more job(s))' if len(odd) > 1 else ''}; evaluate it "
            f"again with --episodes {expected[family]}, or put back the evaluation the suite made"
        )


def write_provenance(suite: _plan.Suite, suite_dir: pathlib.Path, seeds: list[int]) -> None:
    """aggregate.provenance.json: the suite, its runs' frames and wall time, each run's own record, and each
    output's SHA-256; kept as it is when an aggregate made again changes none of that (`provenance.write_derived`).

    So the aggregate's files can be committed without their (large) run directories.
    """
    names = [_plan.Job(env, seed).name for seed in seeds for env in suite.games]
    finals = [json.loads((suite_dir / name / "final.json").read_text()) for name in names]
    runs = {name: _runs.run_provenance(suite_dir / name) for name in names}
    provenance.write_derived(
        suite_dir, "aggregate", ("per_game.csv", "per_game.png"), config=dataclasses.asdict(suite), seeds=seeds,
        frames=sum(f["frames"] for f in finals), wall_time_s=_runs.wall_time(finals),
        scale=f"suite {suite.suite}: the {len(names)} runs of seeds {seeds}", extra={"run_provenance": runs},
    )  # fmt: skip


def suite_games(suite: _plan.Suite) -> list[str]:
    """The games the aggregates are over: each job's scored games (DMLab-30: its 30 scored levels)."""
    return [game for env in suite.games for game, _ in _plan.scored_games(env)]


def _title(suite: _plan.Suite) -> str:
    games, seeds = len(suite_games(suite)), len(suite.seeds)
    name = suite.suite if len(suite.suite) <= 40 else suite.suite[:37] + "..."
    return f"{name}: {suite.agent} ({suite.preset}), {games} games x {seeds} seeds, {suite.frames:,} frames per run"


def _comparisons(suite: _plan.Suite, rows: list[dict], seeds: list[int]) -> dict[str, list[dict]]:
    """`_published.comparison` rows per env family of the suite, from our mean score per game over `seeds`."""
    result = {}
    for family in sorted({_plan.family(env) for env in suite.games}):
        found = [row for row in rows if row["seed"] in seeds and _plan.family(row["env"]) == family]
        ours = {game: float(np.mean([r["score"] for r in found if r["game"] == game])) for game in _games(found)}
        compared = _published.comparison(suite.agent, suite.preset, family, ours) if ours else []
        if compared:
            result[family] = compared
    return result


def _games(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(row["game"] for row in rows))


def _set_scale(ax: plt.Axes, values: list[float]) -> str:
    """Log scale, or symlog (linear within +-0.1) when a value is <= 0; limits with room for the markers (bars
    start at 0, which a log scale cannot show)."""
    low, high = min(values), max(values)
    if low > 0:
        ax.set_xscale("log")
        ax.set_xlim(low / 2, 2 * high)
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        return "log scale"
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlim(2 * low, 2 * high if high > 0 else 0.1)
    return "symlog scale, linear within ±0.1"


def _plot_per_game(suite: _plan.Suite, rows: list[dict], games: list[str], path: pathlib.Path) -> None:
    """Normalised score per game, ours (each seed a dot, the mean over seeds a bar) and published (a diamond)."""
    shown = [game for game in games if any(row["game"] == game for row in rows)]
    fig, ax = plt.subplots(figsize=(7.5, 1.5 + 0.32 * len(shown)))
    values = []
    for i, game in enumerate(shown):
        found = [row for row in rows if row["game"] == game]
        ours = [row["normalized"] for row in found]
        ax.barh(
            i, np.mean(ours), height=0.6, color="tab:blue", alpha=0.35, label="ours, mean over seeds" if not i else None
        )
        ax.plot(ours, [i] * len(ours), "o", color="tab:blue", markersize=3, label="ours, one seed" if not i else None)
        values += ours
        if found[0]["published_normalized"] is not None:
            values.append(found[0]["published_normalized"])
            ax.plot(
                found[0]["published_normalized"],
                i,
                "D",
                color="tab:orange",
                markersize=5,
                label=_published_label(suite, ax),
            )
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1, label="1 = reference score (aggregate.md)")
    scale = _set_scale(ax, values)
    ax.set_yticks(range(len(shown)), shown, fontsize=8)
    ax.set_ylim(len(shown) - 0.5, -0.5)  # First game on top.
    ax.set_xlabel(f"normalised score ({scale})")
    ax.set_title(_title(suite), fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # Outside: the bars fill the axes.
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _published_label(suite: _plan.Suite, ax: plt.Axes) -> str | None:
    """The legend entry of the published markers, once per axes."""
    if any(line.get_label().startswith("published") for line in ax.get_lines()):
        return None
    labels = {_published.reference(suite.agent, suite.preset, _plan.family(env)) for env in suite.games} - {None}
    return "published: " + "; ".join(sorted(ref.label for ref in labels))


def _plot_aggregate(
    suite: _plan.Suite, summary: list[dict], comparisons: dict[str, list[dict]], path: pathlib.Path
) -> None:
    """Each statistic with its 95% bootstrap interval; when the suite is one env family, the published median
    and mean over the suite's games beside them, one marker per normalisation (`_published.comparison`)."""
    fig, ax = plt.subplots(figsize=(6.5, 3))
    position = {row["statistic"]: i for i, row in enumerate(summary)}
    for i, row in enumerate(summary):
        # The interval drawn from its own ends: with few --reps the point estimate can fall outside it.
        label = "ours (95% stratified-bootstrap CI)" if not i else None
        ax.plot([row["ci_low"], row["ci_high"]], [i, i], "|-", color="tab:blue", markersize=8)
        ax.plot(row["value"], i, "o", color="tab:blue", label=label)
    family, compared = next(iter(comparisons.items())) if len(comparisons) == 1 else ("", [])
    ref = _published.reference(suite.agent, suite.preset, family)
    for protocol, fill in zip(dict.fromkeys(row["protocol"] for row in compared), ("full", "none")):
        rows = [row for row in compared if row["protocol"] == protocol and row["published_suite"] is not None]
        ax.plot(
            [row["published_suite"] for row in rows], [position[row["statistic"]] for row in rows], "D",
            color="tab:orange", fillstyle=fill, label=f"{ref.label}, normalised by {protocol}",
        )  # fmt: skip
    ax.set_yticks(range(len(summary)), [row["statistic"] for row in summary])
    ax.invert_yaxis()
    ax.set_xlabel("normalised score")
    ax.set_title(_title(suite), fontsize=9)
    ax.legend(fontsize=7, loc="best")
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
        *_published_notes(suite),
        "| game | seeds | mean score | mean normalised | published score | published normalised |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for game in games:
        found = [row for row in rows if row["game"] == game]
        if found:
            score, norm = np.mean([r["score"] for r in found]), np.mean([r["normalized"] for r in found])
            published = [
                _number(found[0][key], digits) for key, digits in (("published", 2), ("published_normalized", 3))
            ]
            lines.append(f"| {game} | {len(found)} | {score:.2f} | {norm:.3f} | {' | '.join(published)} |")
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


def _number(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _published_notes(suite: _plan.Suite) -> list[str]:
    """What the published columns are, per env family."""
    lines = []
    for family in sorted({_plan.family(env) for env in suite.games}):
        ref = _published.reference(suite.agent, suite.preset, family)
        if ref is not None:
            lines.append(
                f"- published ({family}): {ref.label}, `results/published/{ref.table}` `{ref.column}`; {ref.note}."
            )
    return ["Published scores, normalised as ours:", *lines, ""] if lines else []


def _markdown_published(suite: _plan.Suite, comparisons: dict[str, list[dict]]) -> str:
    """Ours beside the published median and mean, per env family (`_published.comparison`)."""
    lines = []
    for family, rows in comparisons.items():
        lines += [
            "",
            f"## Beside the paper: {family}",
            "",
            f"Median and mean over games of the normalised score: ours (mean over the seeds above, the suite's "
            f"{family} games), the published column over the suite's games it has, over the paper's full set, and "
            "the aggregate the paper prints.",
            "",
            f"| statistic | normalisation | ours | published, suite's {rows[0]['suite_games']} games "
            f"| published, paper's {rows[0]['paper_games']} games | printed |",
            "| --- | --- | --- | --- | --- | --- |",
            *[
                f"| {r['statistic']} | {r['protocol']} | {_number(r['ours'], 3)} | {_number(r['published_suite'], 3)} "
                f"| {_number(r['published_paper'], 3)} | {_number(r['printed'], 3)} |"
                for r in rows
            ],
            *_variant_notes(rows),
        ]
    return "\n".join(lines) + "\n" if lines else ""


def _variant_notes(rows: list[dict]) -> list[str]:
    """Why a paper-specific normalisation is reported beside ours (`common.scores.VARIANTS`)."""
    if not any(row["protocol"] in scores.VARIANTS for row in rows):
        return []
    return [
        "",
        "`atari_noop_impala` is `atari_noop` with Video Pinball scored from random 0 (human 17667.9), as in",
        "DeepMind's later Atari-57 tables. IMPALA Table 4's means (466.4% shallow, 957.6% deep) are not",
        "reproduced by the no-op table's Video Pinball (random 16256.9: a human-random gap of 1,411 points,",
        "which gives 707% and 1592%); with random 0 they are 466.1% and 957.3%, within 0.4 points. No",
        "published table fits both printed means exactly (that needs a random score between -4790 and -2430).",
        "IMPALA's medians are the same both ways.",
    ]


if __name__ == "__main__":
    cli.run(main)
