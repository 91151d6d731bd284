"""Uniform, rank-based and proportional Double DQN on the 5 MinAtar games; PER App. Fig. 10 and 12.

The reduced-scale analogue of PER §4 (Fig. 4 and 7, Tables 6/7): the same
agent and replay variants (`per.train`, presets `minatar_ddqn`, `_rank`,
`_prop`), on MinAtar instead of Atari, beside Young & Tian 2019's DQN.

    python -m reproduce.per.minatar --profile full       # 2M frames a run, 5 games x 3 variants
    python -m reproduce.per.minatar --profile full --jobs 2   # the same, two runs at a time
    python -m reproduce.per.minatar --profile full --games breakout --variants rank
    python -m reproduce.per.minatar --profile full --games breakout --variants rank_full_is,rank_no_is
    python -m reproduce.per.minatar --profile full --games breakout --variants uniform_every_4
    python -m reproduce.per.minatar --profile full --games seaquest --variants uniform_small_step
    python -m reproduce.per.minatar --profile full --games freeway --variants rank_full_step --frames 1e6
    python -m reproduce.per.minatar --profile full --games freeway --variants uniform,proportional --frames 5e6 --extend
    python -m reproduce.per.minatar --profile quick      # smoke scale: one game, 15K frames a run
    python -m reproduce.per.minatar --profile full --summarise_only  # the tables from the summaries present

Two appendix figures come from the same runs:

* App. Fig. 10, the last-seen |delta| of the replay's transitions, sorted,
  over training: every run logs it (`per.td_errors`, 20 snapshots a run), and
  each game with a rank-based and a uniform run of seed 0 gets fig10_<game>.png;
* App. Fig. 12, importance sampling: rank-based replay with full correction
  (beta = 1 throughout, uniform's step size) and none (beta = 0, the step size
  divided by 4), beside uniform and the annealed rank-based run: the arms
  `rank_full_is` and `rank_no_is` (not run by default), in fig12.{csv,md,png};
  every curve is read at a quarter, half and all of the shortest arm's budget.

One ablation: PER's replay ratio, one update per 4 agent steps, against the
presets' (Young & Tian's) one per step: the arm `uniform_every_4` (not run by
default) beside `uniform`, in update_ratio.{csv,md,png}. One control: uniform
replay at the prioritized presets' step size, a quarter of uniform's: the arm
`uniform_small_step` (not run by default) beside the three variants, in
step_size.{csv,md,png}; a control of a smaller budget than theirs is set
beside their curves at its frames. Its converse, the prioritized variants at
uniform's step size (`rank_full_step`, `proportional_full_step`), completes the
2 x 2 of replay and step size in the same table.

A study too long for one sitting is assembled from runs made at different
times, possibly on different machines:

* each finished run writes its summary (final score, binned curve, config,
  the run's own provenance) to results/per/<profile>/minatar_runs/, which is
  committed; a job whose summary exists is not trained again;
* the training run itself lives in runs/reproduce/per_minatar_<profile>/ and
  is resumed if interrupted (it is not committed: its replay is large);
* the table, figure and provenance are rebuilt from every summary present,
  so they always cover exactly the runs that finished;
* `--frames` sets the budget of the jobs it names. A job (game, arm, seed)
  has one summary, at one budget: a summary of another budget stops the
  command, and `--extend` trains a summarised job of a smaller budget on to
  `--frames`, from its run's last checkpoint (which must be on this machine),
  replacing its summary. The new summary keeps what the run scored at each
  earlier budget (from its episodes up to it), so the table has a row per
  budget a run reached, counts Y&T's target per budget, and sets a variant
  beside the uniform run of the same budget only.

Outputs: minatar.csv (one row per game x variant x seed, and per budget of an
extended run: `game, variant, seed, frames, last100, ...`), minatar.md,
minatar.png, minatar.provenance.json; minatar_aggregates.{csv,png} (from the
same runs, once every variant has run all 5 games on two seeds at one budget): each
variant's aggregates over the games of the score divided by Y&T's DQN, with
stratified-bootstrap intervals (rliable, Agarwal et al. 2021), and its
probability of improvement over uniform.
"""

from __future__ import annotations

import collections
import decimal
import functools
import pathlib
import textwrap
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

import reproduce  # noqa: E402
from common import cli, provenance  # noqa: E402
from common.envs.minatar import GAMES  # noqa: E402
from common.errors import check_choices  # noqa: E402
from per import td_errors  # noqa: E402
from per.config import PRESETS, PerConfig  # noqa: E402
from reproduce import _runs  # noqa: E402
from reproduce.suite import _stats  # noqa: E402

VARIANTS = {"uniform": "minatar_ddqn", "rank": "minatar_ddqn_rank", "proportional": "minatar_ddqn_prop"}
# PER App. Fig. 12's arms: the rank-based preset with beta held fixed.
# "The step-size for full IS correction is the same as for uniform replay. For
# uncorrected prioritized replay, the step-size is reduced by a factor of 4."
FIG12_ARMS = {
    "rank_full_is": ("minatar_ddqn_rank", ("beta0=1.0", "beta_final=1.0", "learning_rate=0.00025")),
    "rank_no_is": ("minatar_ddqn_rank", ("beta0=0.0", "beta_final=0.0")),
}
# PER §4's replay ratio, one update per 4 agent steps (8 samples per insert), with
# Young & Tian's target period of 1,000 frames, 250 updates: what the presets
# gain from their ratio, one update per step (the presets had PER's until
# 2026-11-25; results/per/archive/update_every_4/).
RATIO_ARMS = {"uniform_every_4": ("minatar_ddqn", ("update_period=4", "target_update_period=250"))}
# The prioritized presets divide the step size by 4 (PER App. B.2.2), uniform's
# does not: uniform replay at the prioritized arms' step size, and the prioritized
# variants (beta annealed as in their presets) at uniform's, separate what
# prioritization gains from what the smaller step gains.
STEP_ARMS = {
    "uniform_small_step": ("minatar_ddqn", ("learning_rate=0.0000625",)),
    "rank_full_step": ("minatar_ddqn_rank", ("learning_rate=0.00025",)),
    "proportional_full_step": ("minatar_ddqn_prop", ("learning_rate=0.00025",)),
}
ARMS = {**{variant: (preset, ()) for variant, preset in VARIANTS.items()}, **FIG12_ARMS, **RATIO_ARMS, **STEP_ARMS}
# A step arm on a prioritized variant's preset mirrors that variant (rank_full_step: rank).
CONVERSE_ARMS = {
    arm: variant
    for arm, (preset, _) in STEP_ARMS.items()
    for variant, own in VARIANTS.items()
    if own == preset and variant != "uniform"
}
# One colour per arm in every figure. The converse arms take black and the cycle's unused
# cyan: their places in it (C7 grey, C8 olive) were hard to tell apart on one panel.
ARM_COLOURS = {arm: f"C{i}" for i, arm in enumerate(ARMS)} | {"rank_full_step": "black", "proportional_full_step": "C9"}
FIG12_CURVES = ("uniform", "rank", "rank_full_is", "rank_no_is")  # Fig. 12 shows the first, third and fourth.
# Where Fig. 12's curves are read: PER's trade-off is early speed (no correction) against later safety (full).
FIG12_FRACTIONS = (0.25, 0.5, 1.0)
RATIO_CURVES = ("uniform", "uniform_every_4")
STEP_CURVES = ("uniform", "uniform_small_step", "rank", "proportional", "rank_full_step", "proportional_full_step")
# Stratified-bootstrap resamples of the across-games aggregates. rliable's default is 50,000; 2,000
# keep --summarise_only to seconds (4.5 s against 65 s here) and moved no 95% interval's end on the
# committed runs by more than 0.013 (measured 2026-12-07).
AGGREGATE_REPS = 2_000
# Written beside minatar.* and recorded in minatar.provenance.json, whose stem does not name them.
AGGREGATE_FILES = ("minatar_aggregates.csv", "minatar_aggregates.png")
TD_ERROR_SNAPSHOTS = 20  # App. Fig. 10's snapshots per run (PER: one per 10^6 of 200M frames).
FRAMES = {"quick": 15_000, "full": 2_000_000}
DEFAULT_GAMES = {"quick": ["breakout"], "full": list(GAMES)}

reproduce.define_flags()
flags.DEFINE_list("games", None, "MinAtar games (default: all 5 for full, breakout for quick).")
flags.DEFINE_list("variants", list(VARIANTS), f"Arms to run: {', '.join(ARMS)}.")
flags.DEFINE_integer("seeds", 1, "Seeds per game and variant: seed, seed + 1, ...", lower_bound=1)
cli.define_frames("Frame budget per run overriding the profile's, e.g. 5e6 (Young & Tian's).")
flags.DEFINE_bool("extend", False, "Train runs of a smaller budget on to --frames (resumed), not refuse them.")
flags.DEFINE_bool("summarise_only", False, "Rebuild the tables and figures from the summaries present; train nothing.")
flags.DEFINE_integer("jobs", 1, "Runs trained at once (each in its own process).", lower_bound=1)
FLAGS = flags.FLAGS
# The flags that choose or shape the runs to train, which `--summarise_only` (every summary present) refuses.
CHOOSING = ("games", "variants", "seed", "seeds", "jobs")


def summarise(run_dir: pathlib.Path, game: str, variant: str, seed: int, final: dict) -> dict:
    """One finished run as a self-contained record: score, curve, App. Fig. 10's snapshots and where it came from."""
    return {
        "game": game, "variant": variant, "seed": seed, **_runs.summarise_run(run_dir, final),
        "earlier_budgets": _runs.earlier_budgets(run_dir),
        "td_errors": [
            {**s, "abs_td_error": np.round(s.get("abs_td_error", []), 6).tolist()}
            for s in td_errors.read(run_dir / td_errors.FILE)
        ],
    }  # fmt: skip


def frames_to_reach(summary: dict, score: float) -> int | None:
    """First frame at which the run's 100-episode trailing mean reached `score`; None if never.

    Read off the summary's curve (`_runs.episode_scores`: up to 200 points; a
    table row's merges the run's curves at its other budgets, `_runs.run_curve`),
    so to within `curve_resolution`; a crossing shorter than that may be missed.
    """
    frames, trailing = np.array(summary["curve"]["frames"]), np.array(summary["curve"]["trailing100"])
    reached = np.flatnonzero(trailing >= score)
    return int(frames[reached[0]]) if len(reached) else None


def peak(summary: dict) -> tuple[float | None, int | None]:
    """(highest 100-episode trailing mean, its frame) on the summary's curve; a run's end point alone is noisy."""
    frames, trailing = summary["curve"]["frames"], summary["curve"]["trailing100"]
    if not trailing:
        return None, None
    best = int(np.argmax(trailing))
    return float(trailing[best]), int(frames[best])


def curve_resolution(summary: dict) -> int | None:
    """The most frames between two of the curve's points: how precisely `frames_to_reach` and `peak` place a frame."""
    frames = summary["curve"]["frames"]
    return int(np.diff(frames).max()) if len(frames) > 1 else None


def published() -> dict[str, float]:
    """Young & Tian's DQN at 5M frames per game: the suites' MinAtar reference, read once."""
    return dict(_stats.minatar_dqn())


def in_table_order(summaries: list[dict], arms) -> list[dict]:
    """`summaries` by game, then in the order of `arms`, seed and budget: the tables' row order."""
    return sorted(summaries, key=lambda s: (s["game"], list(arms).index(s["variant"]), s["seed"], s["frames"]))


def table_rows(summaries: list[dict], reference: dict[str, float], arms=VARIANTS) -> list[dict]:
    """One row per run of `arms` and budget it reached, beside the uniform run of the same game, seed and budget.

    A run extended to a larger budget has a row at each (`_runs.at_each_budget`).
    """
    views = _runs.at_each_budget(summaries)
    uniform = {(s["game"], s["seed"], s["frames"]): s for s in views if s["variant"] == "uniform"}
    rows = []
    ours = [s for s in views if s["variant"] in arms]
    for s in in_table_order(ours, arms):
        baseline = uniform.get((s["game"], s["seed"], s["frames"]))  # At the same budget only.
        compared = baseline is not None and s["variant"] != "uniform"  # Uniform's own row is the baseline.
        peak100, peak_frames = peak(s)
        rows.append({
            "game": s["game"], "variant": s["variant"], "seed": s["seed"], "frames": s["frames"],
            "episodes": s["episodes"], "last100": s["last100"], "young_tian_dqn_5M": reference[s["game"]],
            "wall_time_s": s["wall_time_s"], "sittings": _runs.sittings(s, s["frames"]),
            "budgets": " ".join(map(str, s["budgets"])),
            "frames_to_uniform_final": frames_to_reach(s, baseline["last100"]) if compared else None,
            "uniform_final": baseline["last100"] if baseline else None,
            "peak100": peak100, "peak_frames": peak_frames, "curve_resolution": curve_resolution(s),
        })  # fmt: skip
    return rows


def markdown(
    rows: list[dict], profile: str, step_size_run: bool = False, notes: list[str] = (), pooled: list[dict] = ()
) -> str:
    """The main table; `notes` (`beside_uniforms_curve`), if any, follow it, and `pooled` (`across_games`) last."""
    frames = sorted({r["frames"] for r in rows})
    lines = [
        reproduce.heading(
            f"Reduced scale: prioritized Double DQN on MinAtar ({', '.join(f'{f:,}' for f in frames)} frames a run)",
            profile,
        ),
        "",
        "MinAtar instead of Atari. `last100`: the mean return of the last 100 training episodes",
        f"({exploration_text(frames[-1])}), the statistic of Young & Tian 2019, whose DQN",
        "is shown at *its* budget of 5M frames (read off their figures, about ±0.3; ±1 on Space",
        "Invaders). A run of fewer frames: compare with that in mind. Young & Tian's settings: one update",
        "per agent step, the target network copied every 1,000 updates, their optimizer (PyTorch's",
        "centered RMSProp, epsilon 0.01, no momentum), with Double DQN targets and the step size divided",
        "by 4 for the prioritized variants (PER App. B.2.2). Earlier studies, with momentum 0.95 and then",
        "with PER's one update per 4 steps, are in results/per/archive/.",
        "",
        *seeds_text(rows, step_size_run),
        "",
        *columns_text(rows),
        "",
        *table_lines(rows, "variant"),
    ]
    if notes:
        lines += ["", *notes]
    seeded = over_seeds_lines(rows)
    if seeded:
        lines += ["", *seeded]
    if pooled:
        lines += ["", *across_games_lines(pooled)]
    lines += ["", *verdicts(rows), progress_line(rows, profile), *_runs.extended(rows)]
    return "\n".join(lines) + "\n"


def exploration_text(frames: int) -> str:
    """How the training episodes explored, for runs of at most `frames`: Young & Tian's epsilon, reached or not."""
    preset = PRESETS[VARIANTS["uniform"]]  # MinAtar: one frame per agent step; every arm's schedule.
    start, end, steps = preset.epsilon_start, preset.epsilon_end, preset.epsilon_decay_steps
    if frames >= steps:
        return f"epsilon-greedy, epsilon {end:g} after {steps // 1000}K frames"
    return f"epsilon-greedy, epsilon falling from {start:g} to {end:g} over {steps // 1000}K frames: not reached here"


def progress_line(rows: list[dict], profile: str) -> str:
    """Which of the profile's jobs have run: none yet, or only part of the profile's budget so far."""
    games, due, budget = sorted({r["game"] for r in rows}), DEFAULT_GAMES[profile], FRAMES[profile]
    reached: dict[tuple[str, str], int] = {}
    for r in rows:
        reached[r["game"], r["variant"]] = max(reached.get((r["game"], r["variant"]), 0), r["frames"])
    # The profile's games, and any other game run: a variant missing there is missing too.
    jobs = [(g, v) for g in [*due, *(g for g in games if g not in due)] for v in VARIANTS]
    missing = [f"{g}/{v}" for g, v in jobs if (g, v) not in reached]
    short = [f"{g}/{v} ({reached[g, v]:,})" for g, v in jobs if 0 < reached.get((g, v), budget) < budget]
    text = f"Games run: {', '.join(games)}."
    if missing:
        text += f" Not run yet: {', '.join(missing)}."
    if short:
        text += f" Short of the profile's {budget:,} frames so far (frames run): {', '.join(short)}."
    if not missing and not short:
        text += f" All {len(due)} game{'s' if len(due) > 1 else ''} x 3 variants of the {profile} profile are in."
    return text


def beside_uniforms_curve(summaries: list[dict]) -> list[str]:
    """Each variant's run with no uniform run of its budget, beside a longer uniform run's curve at its frames.

    What `to uniform's final` says of runs of one budget, for a run stopped
    short of uniform's (a budget that fits a session, to be extended): the
    uniform run's 100-episode mean at the run's budget (`read_at`, to within
    the curve's spacing), and the frames the run took to first reach it.
    """
    views = _runs.at_each_budget(summaries)
    uniform_budgets = {(s["game"], s["seed"], s["frames"]) for s in views if s["variant"] == "uniform"}
    lines = []
    for s in in_table_order(views, VARIANTS):
        if s["variant"] == "uniform" or (s["game"], s["seed"], s["frames"]) in uniform_budgets:
            continue
        longer = shortest_reaching(summaries, s["game"], s["seed"], "uniform", s["frames"])
        uniform = None if longer is None else read_at(longer, s["frames"])
        if uniform is None:
            continue
        reach = frames_to_reach(s, uniform)
        lines.append(
            f"- {s['game']} {s['variant']}, seed {s['seed']}, {s['frames']:,} frames: {s['last100']:.2f}; uniform's "
            f"{longer['frames']:,}-frame run had {uniform:.2f} by then, which {s['variant']} "
            + ("never reached." if reach is None else f"first reached at {reach:,} frames.")
        )
    if not lines:
        return []
    return [
        "A variant's run of a smaller budget than uniform's, beside the uniform run's curve at that budget (its",
        "last point at or before it). The variant annealed beta to 1 over its own, shorter budget.",
        "",
        *lines,
    ]


def seeds(rows: list[dict]) -> str:
    """How many seeds the runs have per game, variant and budget: "One seed", "2 seeds" or, uneven, "1-2 seeds"."""
    per_cell = collections.Counter((r["game"], r["variant"], r["frames"]) for r in rows).values()
    fewest, most = min(per_cell, default=1), max(per_cell, default=1)
    if most == 1:
        return "One seed"
    return f"{most} seeds" if fewest == most else f"{fewest}-{most} seeds"


def seeds_text(rows: list[dict], step_size_run: bool = False) -> list[str]:
    """What the runs can and cannot say: their seeds per game, variant and budget, and the step sizes they differ in."""
    where = "step_size.md" if step_size_run else "step_size.md, once it has run"
    return [
        f"{seeds(rows)} per game, variant and budget, and Reverb's sampler takes no seed, so two runs of one",
        "config and seed differ (docs/per_minatar_study.md gives repeats). The prioritized variants also take",
        f"a quarter of uniform's step size, which the arm `uniform_small_step` ({where}) separates from",
        "prioritization. A gap between variants in a few runs of each is an observation, not a measured effect.",
    ]


def columns_text(rows: list[dict]) -> list[str]:
    """What the table's columns past `last100` mean, with the resolution of its curve-read frames."""
    resolution = max((r["curve_resolution"] or 0 for r in rows), default=0)
    spacing = [f"The curves' points are at most {resolution:,} frames apart: those frames hold to within that."]
    return [
        "`peak`: the highest 100-episode mean on the run's curve, at the frame given. `to uniform's final`:",
        "frames until the run's 100-episode mean first reached the uniform run's final `last100` (same game,",
        "seed and budget; PER Fig. 4/7's question; `baseline`: the uniform run itself; `-`: no uniform run",
        "of that budget). Both are read off each run's summary curve of up to 200 points (an extended run's",
        "merged with its curves at its other budgets, so its rows agree), and a briefer crossing can be missed.",
        *(spacing if resolution else []),
        "`sittings`: the starts a run took; a resumed run goes on from its last checkpoint (networks,",
        "optimizer, replay, schedules), with a new seed for its env and exploration. A run extended to a",
        "larger budget (`--extend`) annealed beta to 1 by its first budget and held it there: its",
        "provenance has each segment.",
    ]


def markdown_table(header: list[str], body: list[list[str]]) -> list[str]:
    """A markdown table's lines: `header`, its rule, then one line per list of cells in `body`."""
    return [
        f"| {' | '.join(header)} |",
        f"| {' | '.join('---' for _ in header)} |",
        *(f"| {' | '.join(b)} |" for b in body),
    ]


def table_lines(rows: list[dict], arm_column: str) -> list[str]:
    """The markdown table of `rows`: one line per run and budget."""
    header = ["game", arm_column, "seed", "frames", "last100", "peak (at frames)", "Y&T DQN (5M)",
              "to uniform's final", "sittings", "wall time (h)"]  # fmt: skip
    body = [
        [r["game"], r["variant"], str(r["seed"]), f"{r['frames']:,}", f"{r['last100']:.2f}",
         "" if r["peak100"] is None else f"{r['peak100']:.2f} ({r['peak_frames']:,})", str(r["young_tian_dqn_5M"]),
         to_uniform(r), str(r["sittings"]), hours(r["wall_time_s"])]
        for r in rows
    ]  # fmt: skip
    return markdown_table(header, body)


def to_uniform(row: dict) -> str:
    """The `to uniform's final` cell: frames, `never`, `baseline` (uniform's own row), or `-` (no uniform run)."""
    if row["uniform_final"] is None:
        return "-"
    if row["variant"] == "uniform":
        return "baseline"
    reach = row["frames_to_uniform_final"]
    return "never" if reach is None else f"{reach:,}"


def verdicts(rows: list[dict]) -> list[str]:
    """Per budget, how many games each variant reached Y&T's DQN on (their 5M frames): the issue's target."""
    lines = []
    for frames, variants in by_budget(rows).items():
        counts = [
            f"{v} {sum(r['last100'] >= r['young_tian_dqn_5M'] for r in mine)} of {len(mine)}" for v, mine in variants
        ]
        lines.append(
            f"Runs of {frames:,} frames at or above Y&T's DQN (at 5M), one per game and seed: {', '.join(counts)}."
        )
    return lines


def by_budget(items: list[dict]) -> dict[int, list[tuple[str, list[dict]]]]:
    """`items` (table rows or `over_seeds` cells) per budget, smallest first, then per variant in the tables' order."""
    return {
        frames: [(v, at) for v in VARIANTS if (at := [i for i in items if i["frames"] == frames and i["variant"] == v])]
        for frames in sorted({i["frames"] for i in items})
    }


def read_to(game: str) -> decimal.Decimal:
    """How closely Young & Tian's DQN is read off their figures on `game` (the tables' header says the same)."""
    return decimal.Decimal(1 if game == "space_invaders" else "0.3")


def exact(x: float) -> decimal.Decimal:
    """`x` as the decimal it was written as: scores and Y&T's figures are kept to 2 places or fewer."""
    return decimal.Decimal(str(x))


def exact_mean(scores: list[float]) -> decimal.Decimal:
    """The mean of `scores` in decimal arithmetic: scores kept to 2 places give a mean that no rounding moves."""
    return sum(map(exact, scores), decimal.Decimal(0)) / len(scores)


def over_seeds(rows: list[dict]) -> list[dict]:
    """Each game, variant and budget run on two seeds or more: the mean `last100` over its seeds and their range.

    `uniform_mean` is uniform's mean over the same seeds at the same budget,
    or None where uniform did not run every one of them: a variant is set
    beside uniform on matched seeds only. Only runs of that budget count; a
    longer run's curve is not read at it. Means are exact decimals (two
    seeds' mean of 2-place scores has 3 places, shown in full), so a tie with
    Young & Tian's DQN, or a mean exactly at the edge of its reading, counts.
    """
    scores: dict[tuple[str, str, int], dict[int, float]] = collections.defaultdict(dict)
    reference = {}
    for r in rows:
        scores[r["game"], r["variant"], r["frames"]][r["seed"]] = r["last100"]
        reference[r["game"]] = r["young_tian_dqn_5M"]
    cells = []
    for (game, variant, frames), by_seed in scores.items():
        if len(by_seed) < 2:
            continue
        uniform = scores.get((game, "uniform", frames), {})
        matched = [uniform[seed] for seed in by_seed if seed in uniform]
        cells.append({
            "game": game, "variant": variant, "frames": frames, "seeds": sorted(by_seed),
            "mean": exact_mean(list(by_seed.values())), "low": min(by_seed.values()), "high": max(by_seed.values()),
            "uniform_mean": exact_mean(matched) if len(matched) == len(by_seed) else None,
            "young_tian_dqn_5M": reference[game],
        })  # fmt: skip
    return sorted(cells, key=lambda c: (c["game"], list(VARIANTS).index(c["variant"]), c["frames"]))


def reaches(cell: dict) -> bool:
    """Whether the cell's mean is at or above Young & Tian's DQN (at is enough)."""
    return cell["mean"] >= exact(cell["young_tian_dqn_5M"])


def within_reading(cell: dict) -> bool:
    """Whether the cell's mean is within the precision Young & Tian's DQN is read to, either side."""
    return abs(cell["mean"] - exact(cell["young_tian_dqn_5M"])) <= read_to(cell["game"])


def over_seeds_lines(rows: list[dict]) -> list[str]:
    """The table of `over_seeds`, then per budget the games each variant's mean reaches Y&T's DQN on."""
    cells = over_seeds(rows)
    if not cells:
        return []
    header = ["game", "variant", "frames", "seeds", "mean last100", "range", "uniform, same seeds", "Y&T DQN (5M)"]
    body = [
        [c["game"], c["variant"], f"{c['frames']:,}", ", ".join(map(str, c["seeds"])), f"{c['mean']:.3f}",
         f"{c['low']:.2f}–{c['high']:.2f}", beside_uniform(c), str(c["young_tian_dqn_5M"])]
        for c in cells
    ]  # fmt: skip
    return [
        "Over seeds: each game, variant and budget that two seeds or more were run to (a budget only one",
        "seed was run to is left out, and a longer run's curve is not read at it), the exact mean `last100`",
        "of its seeds and their range. `uniform, same seeds`: uniform's mean on those seeds at that budget",
        "(`-`: uniform was not run to it on them all). Two or three seeds give a mean and a spread, not a",
        "confidence interval.",
        "",
        *markdown_table(header, body),
        "",
        *game_verdicts(cells),
    ]


def across_games(rows: list[dict]) -> list[dict]:
    """Each variant's aggregates over the 5 games of `last100` / Y&T's DQN (at 5M), per budget run in full.

    A budget counts where every variant ran every game on the same two seeds
    or more (rliable's [seeds, games] matrix has no holes; one seed gives no
    interval). Rows `frames, seeds, variant, statistic, value, ci_low,
    ci_high`: `_stats.STATISTICS` (Agarwal et al. 2021's median, mean, IQM,
    and the mean capped at 1, here at Y&T's level), and for the prioritized
    variants `p_above_uniform`, the probability of improvement over uniform;
    95% stratified-bootstrap intervals.
    """
    scores = {(r["game"], r["variant"], r["seed"], r["frames"]): r["last100"] / r["young_tian_dqn_5M"] for r in rows}
    out = []
    for frames in sorted({r["frames"] for r in rows}):
        seeds = sorted(
            seed for seed in {r["seed"] for r in rows}
            if all((g, v, seed, frames) in scores for g in GAMES for v in VARIANTS)
        )  # fmt: skip
        if len(seeds) < 2:
            continue
        matrix = {v: np.array([[scores[g, v, seed, frames] for g in GAMES] for seed in seeds]) for v in VARIANTS}
        for variant in VARIANTS:
            stats = _stats.aggregates(matrix[variant], AGGREGATE_REPS)
            if variant != "uniform":
                pair = _stats.improvement(matrix[variant], matrix["uniform"], AGGREGATE_REPS)
                stats.append({"statistic": "p_above_uniform", **pair})
            out += [{"frames": frames, "seeds": " ".join(map(str, seeds)), "variant": variant, **s} for s in stats]
    return out


def across_games_lines(cells: list[dict]) -> list[str]:
    """The markdown of `across_games`: one row per budget and variant."""
    shown = ("median", "iqm", "mean", "p_above_uniform")
    by_row = collections.defaultdict(dict)
    for c in cells:
        by_row[c["frames"], c["seeds"], c["variant"]][c["statistic"]] = c
    header = ["frames", "seeds", "variant", "median", "IQM", "mean", "P(above uniform)"]
    body = [
        [f"{frames:,}", seeds.replace(" ", ", "), variant,
         *(f"{s['value']:.2f} [{s['ci_low']:.2f}, {s['ci_high']:.2f}]" if (s := stats.get(name)) else "-"
           for name in shown)]
        for (frames, seeds, variant), stats in by_row.items()
    ]  # fmt: skip
    return [
        "Across games: each run's `last100` divided by Y&T's DQN (at 5M), then, as Agarwal et al. 2021",
        "recommend (`rliable`), the median over games of the seeds' mean, the interquartile mean (IQM) and",
        "the mean over all runs, and P(above uniform): the chance that a run of the variant scores above a",
        "run of uniform on the same game (a tie counts a half), averaged over games; 0.5 is no difference.",
        f"In brackets, 95% percentile intervals from {AGGREGATE_REPS:,} stratified-bootstrap resamples of",
        "the seeds within each game. Only budgets that every variant ran on all 5 games with the same two",
        "seeds or more. Two seeds a game give a resample at most three distinct means a game, so these",
        "intervals understate the uncertainty: read them as its lower bound.",
        "",
        *markdown_table(header, body),
    ]


def beside_uniform(cell: dict) -> str:
    """The `uniform, same seeds` cell: uniform's mean, `baseline` (uniform's own), or `-` (uniform lacks a seed)."""
    if cell["variant"] == "uniform":
        return "baseline"
    return "-" if cell["uniform_mean"] is None else f"{cell['uniform_mean']:.3f}"


def game_verdicts(cells: list[dict]) -> list[str]:
    """Per budget, the games whose mean over seeds reaches Y&T's DQN, and the means within its reading of it."""
    lines, games = [], sorted({c["game"] for c in cells})
    for frames, variants in by_budget(cells).items():
        counts = []
        for variant, mine in variants:
            reached, run = [c["game"] for c in mine if reaches(c)], [c["game"] for c in mine]
            named = [", ".join(reached)] if reached else []
            named += [] if run == games else [f"of {', '.join(run)}"]  # Fewer games than the table's: which.
            counts.append(f"{variant} {len(reached)} of {len(mine)}" + (f" ({'; '.join(named)})" if named else ""))
        close = [
            f"{c['game']} {c['variant']} ({c['mean']:.3f} against {c['young_tian_dqn_5M']})"
            for c in cells
            if c["frames"] == frames and within_reading(c)
        ]
        within = f" Within the reading of Y&T's figures (±0.3; ±1 on Space Invaders): {', '.join(close)}."
        lines.append(
            f"Games whose mean over seeds at {frames:,} frames is at or above Y&T's DQN (at 5M), of those run on "
            f"two seeds or more: {', '.join(counts)}." + (within if close else "")
        )
    return lines


def plot(
    summaries: list[dict],
    reference: dict[str, float],
    path: pathlib.Path,
    arms=VARIANTS,
    title: str = "Double DQN on MinAtar",
) -> None:
    """Each game's training curves (100-episode mean) per arm, Y&T's DQN at 5M as a line."""
    games = [g for g in GAMES if any(s["game"] == g for s in summaries)]
    # One line style per seed, named in the legend when there are several (e.g. a 5M run of another seed).
    seeds = sorted({s["seed"] for s in summaries})
    styles = dict(zip(seeds, ["-", "--", "-.", (0, (1, 3))] * len(seeds)))  # Y&T's line is dotted.
    fig, axes = plt.subplots(1, len(games), figsize=(4 * len(games), 3.6), squeeze=False)
    for ax, game in zip(axes[0], games):
        for arm in arms:
            for s in (s for s in summaries if s["game"] == game and s["variant"] == arm):
                label = arm + (f", seed {s['seed']}" if len(seeds) > 1 else "")
                style = dict(color=ARM_COLOURS[arm], ls=styles[s["seed"]], lw=1, label=label)
                ax.plot(s["curve"]["frames"], s["curve"]["trailing100"], **style)
        ax.axhline(reference[game], color="grey", ls=":", label="Y&T DQN at 5M")
        ax.set(title=game, xlabel="frames")
    axes[0][0].set_ylabel("training return (100-episode mean)")
    # Every panel's lines in one legend, right of the panels (inside one, it hid that game's curves): a seed may
    # have run on some games only.
    named = {label: line for ax in axes[0] for line, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(named.values(), named.keys(), fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    budget = ", ".join(f"{f:,}" for f in sorted({s["frames"] for s in summaries}))
    # Wrapped to the panels' width: one game's panel is narrower than a side study's title.
    heading = textwrap.fill(title[0].upper() + title[1:], width=45 * len(games))
    fig.suptitle(f"{heading}\n{FLAGS.profile} profile: {budget} frames a run", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # The bounding box takes in the legend outside the panels.
    plt.close(fig)


POOLED_PANELS = {"median": "median", "iqm": "IQM", "mean": "mean", "p_above_uniform": "P(above uniform)"}


def write_across_games(pooled: list[dict], out: pathlib.Path) -> None:
    """`AGGREGATE_FILES` from `across_games`'s cells; with none (no budget pools yet), no earlier pair is left."""
    if not pooled:
        for name in AGGREGATE_FILES:
            (out / name).unlink(missing_ok=True)
        return
    reproduce.write_csv(out / AGGREGATE_FILES[0], pooled)
    plot_across_games(pooled, out / AGGREGATE_FILES[1])


def plot_across_games(cells: list[dict], path: pathlib.Path) -> None:
    """`across_games` as rliable draws interval estimates: a row per budget, a panel per statistic, each variant's
    point and 95% interval; Y&T's level (1) and no difference (0.5) as lines."""
    budgets = list(dict.fromkeys((c["frames"], c["seeds"]) for c in cells))
    by_key = {(c["frames"], c["seeds"], c["variant"], c["statistic"]): c for c in cells}
    fig, axes = plt.subplots(
        len(budgets), len(POOLED_PANELS), figsize=(3.2 * len(POOLED_PANELS), 0.6 + 1.4 * len(budgets)), squeeze=False
    )
    for row, (frames, seeds) in zip(axes, budgets):
        for ax, (statistic, name) in zip(row, POOLED_PANELS.items()):
            for y, variant in enumerate(VARIANTS):
                if c := by_key.get((frames, seeds, variant, statistic)):
                    error = [[c["value"] - c["ci_low"]], [c["ci_high"] - c["value"]]]
                    ax.errorbar(c["value"], y, xerr=error, fmt="o", color=ARM_COLOURS[variant], capsize=3)
            ax.axvline(0.5 if statistic == "p_above_uniform" else 1.0, color="grey", ls=":")
            ax.set_yticks(range(len(VARIANTS)), list(VARIANTS) if ax is row[0] else [])
            ax.set_ylim(-0.5, len(VARIANTS) - 0.5)
            ax.set_title(f"{name}, {frames:,} frames (seeds {seeds.replace(' ', ', ')})", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("probability" if ax is axes[-1][-1] else "score / Y&T DQN (5M)")
    fig.suptitle("Double DQN on MinAtar, pooled over the 5 games: 95% stratified-bootstrap intervals", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FIG12_TEXT = (
    "`rank_full_is`: beta = 1 throughout, uniform's step size; `rank_no_is`: beta = 0, the step size",
    "divided by 4 (PER App. Fig. 12's two arms); `rank`: beta annealed 0.5 -> 1 (Table 3), the step size",
    "divided by 4; `uniform`: alpha = 0. `last100`: the mean return of the last 100 training episodes.",
    "{seeds} per arm and budget: an illustration of the trade-off PER describes (uncorrected prioritization learns",
    "faster early, correction is safer later), not a measurement of it.",
)
RATIO_TEXT = (
    "`uniform`: the preset, one update per agent step (Young & Tian's TRAINING_FREQ, 32 samples per",
    "insert), the target copied every 1,000 updates; `uniform_every_4`: one update per 4 agent steps",
    "(PER §4's ratio, 8 samples per insert), the target copied every 250 updates. Both copy it every",
    "1,000 frames, as Y&T; nothing else differs. `last100`: the mean return of the last 100 training",
    "episodes, Y&T's statistic; their DQN is shown at its budget of 5M frames. {seeds} per arm and budget: what",
    "the presets' ratio gains over PER's at this budget, not a measurement of its size.",
)
STEP_TEXT = (
    "`uniform`: the preset, Y&T's step size 0.00025; `uniform_small_step`: uniform replay at 0.0000625, the",
    "step size of `rank` and `proportional` (PER App. B.2.2 divides it by 4 with prioritization);",
    "`rank_full_step` and `proportional_full_step`, where run: those presets (beta annealed) at uniform's 0.00025.",
    "Everything else is the preset's. `last100`: the mean return of the last 100 training episodes, Y&T's statistic;",
    "their DQN is shown at its budget of 5M frames. {seeds} per arm and budget: how much of the prioritized variants'",
    "gap to uniform in minatar.md, a lead or a deficit, the smaller step alone gives, and what prioritization does",
    "at uniform's step size: observations, not measurements.",
)


def side_markdown(title: str, text: tuple[str, ...], rows: list[dict], profile: str, notes: list[str] = ()) -> str:
    """A side study's table (App. Fig. 12, the update ratio): each arm's score, wall time and frames to uniform's.

    `text` says `{seeds}` where it gives the runs' seeds per arm (`seeds`), so it stays true as seeds are added.
    `notes`, if any, follow the table, and then which runs were trained on to a larger budget.
    """
    lines = [
        reproduce.heading(f"Reduced scale: {title}", profile),
        "",
        *(line.format(seeds=seeds(rows)) for line in text),
        "",
        *columns_text(rows),
        "",
        *table_lines(rows, "arm"),
    ]
    if notes:
        lines += ["", *notes]
    lines += _runs.extended(rows)
    return "\n".join(lines) + "\n"


def score_at(
    rows: list[dict], summaries: list[dict], variant: str, game: str, seed: int, frames: int
) -> tuple[float | None, int | None]:
    """An arm's last100 at `frames`, and the budget of the longer run it was read from (None: its own).

    Its own run of that budget, among `rows`, if there is one; else its
    shortest run beyond it among `summaries`, read off its curve (`read_at`);
    else (None, None).
    """
    for r in rows:
        if (r["game"], r["seed"], r["frames"], r["variant"]) == (game, seed, frames, variant):
            return r["last100"], None
    # A run summarised at `frames` has a row there: what is left is a longer run, if any.
    if (longer := shortest_reaching(summaries, game, seed, variant, frames)) is None:
        return None, None
    return read_at(longer, frames), longer["frames"]


def step_table(rows: list[dict], summaries: list[dict] = ()) -> list[str]:
    """Every step-size arm side by side, at each game, seed and budget that a step arm (STEP_ARMS) ran to.

    One row per such budget; a cell is the arm's own run's last100 there or,
    marked `*`, its longer run's 100-episode mean read off the curve
    (`score_at`); `-`: no run of the arm, or no point yet on its longer run's curve.
    """
    budgets = sorted({(r["game"], r["seed"], r["frames"]) for r in rows if r["variant"] in STEP_ARMS})
    body = []
    for game, seed, frames in budgets:
        cells = []
        for arm in STEP_CURVES:
            value, longer = score_at(rows, summaries, arm, game, seed, frames)
            cells.append("-" if value is None else f"{value:.2f}{'' if longer is None else '*'}")
        body.append([game, str(seed), f"{frames:,}", *cells])
    if not body:
        return []
    return [
        "Every arm at each budget a step-size arm was run to, side by side: its own run's `last100` there or,",
        "marked `*`, the 100-episode mean on its longer run's curve at its last point at or before those",
        "frames (where a prioritized variant's beta may have annealed only part of the way to 1); `-`: no run,",
        "or no point yet.",
        "",
        *markdown_table(["game", "seed", "frames", *STEP_CURVES], body),
    ]


def step_shares(rows: list[dict], summaries: list[dict] = ()) -> list[str]:
    """The step-size study's summary: how far the smaller step alone moves uniform towards each prioritized variant.

    Per game, seed and budget of a `uniform_small_step` run, (uniform_small_step
    - uniform) / (variant - uniform) of the last100 scores, for each variant that
    scores differently from uniform: a lead (the smaller step may explain a
    prioritized variant's gain) or a deficit (it may explain its loss) alike.
    Where an arm has no run of that budget but one of a larger budget among
    `summaries`, its score there is read off that run's curve (`read_at`).
    """
    at = functools.partial(score_at, rows, summaries)

    def source(budgets: set[int | None]) -> str:
        """Where scores read off longer runs' curves came from; empty if every score is a run's own."""
        longer = sorted(b for b in budgets if b is not None)
        return f" (read off the curves of the {' and '.join(f'{b:,}' for b in longer)}-frame runs)" if longer else ""

    lines, read_off = [], False
    small_runs = sorted({(r["game"], r["seed"], r["frames"]) for r in rows if r["variant"] == "uniform_small_step"})
    for game, seed, frames in small_runs:
        small, _ = at("uniform_small_step", game, seed, frames)
        found = {variant: at(variant, game, seed, frames) for variant in ("uniform", "rank", "proportional")}
        uniform = found["uniform"][0]
        shares = [
            f"{(small - uniform) / (other - uniform):.0%} of the way to {variant} ({uniform:.2f} -> {other:.2f})"
            for variant in ("rank", "proportional")
            if uniform is not None and (other := found[variant][0]) is not None and other != uniform
        ]
        if not shares:
            continue
        read_from = source({budget for value, budget in found.values() if value is not None})
        read_off |= bool(read_from)
        lines.append(
            f"- {game}, seed {seed}, {frames:,} frames: the smaller step ({small:.2f}) moves uniform "
            f"{'; '.join(shares)}{read_from}."
        )
    converse, converse_read_off = [], False
    for arm, variant in CONVERSE_ARMS.items():
        for game, seed, frames in sorted({(r["game"], r["seed"], r["frames"]) for r in rows if r["variant"] == arm}):
            full, _ = at(arm, game, seed, frames)
            (uniform, uniform_from), (own, own_from) = (at(name, game, seed, frames) for name in ("uniform", variant))
            if uniform is None or own is None or uniform == own:
                continue
            read_from = source({uniform_from, own_from})
            converse_read_off |= bool(read_from)
            converse.append(
                f"- {game}, seed {seed}, {frames:,} frames: uniform's step ({full:.2f}) moves {variant} "
                f"{(full - own) / (uniform - own):.0%} of the way to uniform ({own:.2f} -> {uniform:.2f}){read_from}."
            )
    shorter = [
        "A run of a smaller budget is set beside the other arms' curves at its frames, to within the curves'",
        "spacing; there a prioritized variant's beta had annealed only part of the way to 1.",
    ]
    blocks = []
    if lines:
        blocks.append([
            "How far uniform replay at the prioritized variants' step size moves uniform's score towards each",
            "variant's, above or below it: (uniform_small_step - uniform) / (variant - uniform). Near 100%: the",
            "smaller step alone scores as the variant does; near 0%: the step size does not explain the gap;",
            "over 100%: the smaller step goes past the variant; negative: it moves the other way.",
            *(shorter if read_off else []),
            "",
            *lines,
        ])  # fmt: skip
    if converse:
        blocks.append([
            "How far a prioritized variant at uniform's step size moves the variant's score towards uniform's:",
            "(variant_full_step - variant) / (uniform - variant). Near 100%: at equal step sizes the variant",
            "scores as uniform does; near 0%: the step size does not explain the gap; over 100%: it goes past",
            "uniform; negative: it moves the other way.",
            *(shorter if converse_read_off and not read_off else []),
            "",
            *converse,
        ])  # fmt: skip
    return joined(blocks)


def step_notes(rows: list[dict], summaries: list[dict]) -> list[str]:
    """step_size.md's notes: the arms side by side (`step_table`), then what each step change moves (`step_shares`)."""
    return joined([step_table(rows, summaries), step_shares(rows, summaries)])


def joined(blocks: list[list[str]]) -> list[str]:
    """The non-empty `blocks`' lines, a blank line between one block and the next."""
    kept = [block for block in blocks if block]
    return [line for i, block in enumerate(kept) for line in ([""] if i else []) + block]


def fig12_checkpoints(summaries: list[dict]) -> list[str]:
    """App. Fig. 12's trade-off in numbers: every curve's 100-episode mean early, midway and at the end.

    Per game and seed with an importance-sampling arm, each of FIG12_CURVES is
    read (`read_at`) at FIG12_FRACTIONS of the shortest such arm's budget, on
    its run of that budget or, if it has none, of the shortest larger one: the
    arms are compared at equal frames even when their budgets differ.
    """
    is_runs = [s for s in summaries if s["variant"] in FIG12_ARMS]
    lines, read_off = [], False
    for game, seed in sorted({(s["game"], s["seed"]) for s in is_runs}):
        budget = min(s["frames"] for s in is_runs if (s["game"], s["seed"]) == (game, seed))
        found = {variant: shortest_reaching(summaries, game, seed, variant, budget) for variant in FIG12_CURVES}
        runs = {variant: run for variant, run in found.items() if run is not None}
        read_off |= any(run["frames"] > budget for run in runs.values())
        for fraction in FIG12_FRACTIONS:
            frames = round(budget * fraction)
            scores = [read_at(runs[v], frames) if v in runs else None for v in FIG12_CURVES]
            cells = ["-" if score is None else f"{score:.2f}" for score in scores]
            lines.append(f"| {game} | {seed} | {frames:,} | {' | '.join(cells)} |")
    if not lines:
        return []
    longer = [
        "A run of a larger budget is read at the shorter arm's frames: there the annealed `rank` run's beta",
        "had gone only part of the way to 1.",
    ]
    return [
        "Each curve's 100-episode mean at a quarter, half and all of the shortest importance-sampling arm's",
        "budget, read off the summaries' curves at their last point at or before those frames (`-`: no run",
        "or no point yet). PER's trade-off: without correction, faster early; with full correction, safer later.",
        *(longer if read_off else []),
        "",
        f"| game | seed | frames | {' | '.join(FIG12_CURVES)} |",
        "| --- " * (3 + len(FIG12_CURVES)) + "|",
        *lines,
    ]


def shortest_reaching(summaries: list[dict], game: str, seed: int, variant: str, frames: int) -> dict | None:
    """The run of `variant` on `game` and `seed` of the smallest budget of at least `frames`; None: none reached it."""
    reaching = [
        s for s in summaries
        if (s["game"], s["seed"], s["variant"]) == (game, seed, variant) and s["frames"] >= frames
    ]  # fmt: skip
    return min(reaching, key=lambda s: s["frames"], default=None)


def read_at(summary: dict, frames: int) -> float | None:
    """A run's 100-episode trailing mean at its last curve point at or before `frames`; None if it has none.

    What a run of a larger budget had scored by `frames`, to within
    `curve_resolution`, on its curves at every budget it reached
    (`_runs.run_curve`; its episodes, which would give it exactly, are not
    committed).
    """
    curve = _runs.run_curve(summary)
    before = np.flatnonzero(np.array(curve["frames"]) <= frames)
    return float(curve["trailing100"][before[-1]]) if len(before) else None


def hours(seconds: float | None) -> str:
    """A wall time in hours, to 0.1 h; a run shorter than 0.1 h (the quick profile's) to 0.001 h, not 0.0."""
    if seconds is None:
        return ""
    return f"{seconds / 3600:.1f}" if seconds >= 360 else f"{seconds / 3600:.3f}"


def plot_td_errors(rank: dict, uniform: dict, path: pathlib.Path) -> None:
    """PER App. Fig. 10: sorted last-seen |delta| over training, rank-based (top) and uniform (bottom)."""
    fig, axes = plt.subplots(2, 1, figsize=(5, 6.4), sharex=True)
    for ax, summary in zip(axes, (rank, uniform)):
        snapshots = [s for s in summary["td_errors"] if s.get("abs_td_error")]
        colours = plt.cm.coolwarm(np.linspace(0, 1, len(snapshots)))
        for colour, snapshot in zip(colours, snapshots):
            ax.plot(snapshot["rank_fraction"], snapshot["abs_td_error"], color=colour, lw=1)
        ax.set(yscale="log", ylabel="last-seen |TD error|", title=f"{summary['variant']} replay")
        first, last = snapshots[0]["frames"], snapshots[-1]["frames"]
        ax.text(0.98, 0.95, f"blue {first:,} -> red {last:,} frames", transform=ax.transAxes, ha="right", va="top",
                fontsize=7)  # fmt: skip
    axes[1].set_xlabel("rank among the replay's sampled transitions\n(fraction, largest first)")
    fig.suptitle(f"{rank['game']}: |TD error| in the replay over training ({FLAGS.profile} profile)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def side_summaries(summaries: list[dict], arms: dict, curves: tuple[str, ...]) -> list[dict]:
    """A side study's runs: its `curves`, on the games where one of its own `arms` ran."""
    games = {s["game"] for s in summaries if s["variant"] in arms}
    return [s for s in summaries if s["variant"] in curves and s["game"] in games]


def job_flags(arm: str, game: str, frames: int, seed: int, profile: str = "full") -> list[str]:
    """`per.train`'s flags for one job: the arm's preset and overrides, and App. Fig. 10's snapshots.

    Snapshots are taken every 1/20 of the profile's budget, whatever `frames`:
    a run extended to a larger budget keeps its flags, and takes more.
    """
    preset, overrides = ARMS[arm]
    snapshots = f"td_error_snapshot_frames={FRAMES[profile] // TD_ERROR_SNAPSHOTS}"
    return [
        f"--preset={preset}", f"--env=minatar:{game}", f"--frames={frames}", f"--seed={seed}",
        *(f"--config_override={o}" for o in (*overrides, snapshots)),
    ]  # fmt: skip


def job_config(flags: list[str]) -> PerConfig:
    """The config that `per.train` resolves a job's `flags` (`job_flags`) to, with today's presets."""
    return _runs.job_config(flags, PRESETS, "per config")


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    start = time.time()
    games = DEFAULT_GAMES[FLAGS.profile] if FLAGS.games is None else FLAGS.games
    check_choices("--games", "minatar game", games, GAMES)
    check_choices("--variants", "variant", FLAGS.variants, ARMS)
    frames = FRAMES[FLAGS.profile] if FLAGS.frames is None else _runs.whole_budget(FLAGS.frames)
    summaries_dir = reproduce.RESULTS / "per" / FLAGS.profile / "minatar_runs"
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"per_minatar_{FLAGS.profile}"
    if FLAGS.summarise_only:  # Before any directory is made: a refusal leaves nothing behind.
        _runs.check_summarise_only(FLAGS.fresh, FLAGS.extend, FLAGS.frames, CHOOSING)
        summaries = _runs.summaries_to_build(summaries_dir, runs)
    else:
        _runs.check_extend(FLAGS.fresh, FLAGS.extend, FLAGS.frames)
        summaries = train(games, frames, summaries_dir, runs)
    out = reproduce.output_dir("per", FLAGS.profile)
    reference = published()
    main_runs = [s for s in summaries if s["variant"] in VARIANTS]
    rows = table_rows(main_runs, reference)
    reproduce.write_csv(out / "minatar.csv", rows)
    step_size_run = any(s["variant"] in STEP_ARMS for s in summaries)
    pooled = across_games(rows)
    write_across_games(pooled, out)
    text = markdown(rows, FLAGS.profile, step_size_run, beside_uniforms_curve(main_runs), pooled)
    (out / "minatar.md").write_text(text)
    plot(main_runs, reference, out / "minatar.png")
    write_provenance(out, "minatar", main_runs, start, also=AGGREGATE_FILES if pooled else ())
    print(text)
    side_studies = (
        ("fig12", "PER App. Fig. 12 on MinAtar, importance sampling with rank-based replay", FIG12_TEXT,
         FIG12_ARMS, FIG12_CURVES),
        ("update_ratio", "uniform Double DQN on MinAtar at Young & Tian's replay ratio and at PER's", RATIO_TEXT,
         RATIO_ARMS, RATIO_CURVES),
        ("step_size", "Double DQN on MinAtar: each replay at the other's step size", STEP_TEXT, STEP_ARMS,
         STEP_CURVES),
    )  # fmt: skip
    for stem, title, text, arms, curves in side_studies:
        side_runs = side_summaries(summaries, arms, curves)
        if side_runs:
            side_rows = table_rows(side_runs, reference, curves)
            reproduce.write_csv(out / f"{stem}.csv", side_rows)
            notes = (
                step_notes(side_rows, side_runs) if arms is STEP_ARMS
                else fig12_checkpoints(side_runs) if arms is FIG12_ARMS
                else []
            )  # fmt: skip
            (out / f"{stem}.md").write_text(side_markdown(title, text, side_rows, FLAGS.profile, notes))
            plot(side_runs, reference, out / f"{stem}.png", curves, title)
            write_provenance(out, stem, side_runs, start)
    for game in GAMES:  # Seed 0's pair, whichever seed this command trains: the file names no seed.
        pair = {s["variant"]: s for s in summaries if s["game"] == game and s["seed"] == 0}
        if all(pair.get(v, {}).get("td_errors") for v in ("rank", "uniform")):
            plot_td_errors(pair["rank"], pair["uniform"], out / f"fig10_{game}.png")
            write_provenance(out, f"fig10_{game}", [pair["rank"], pair["uniform"]], start)
    _runs.print_written(out, start)


def train(games: list[str], frames: int, summaries_dir: pathlib.Path, runs: pathlib.Path) -> list[dict]:
    """Trains and summarises every job of `games` x `--variants` x seeds not summarised yet; every summary present."""
    summaries_dir.mkdir(parents=True, exist_ok=True)
    jobs = {
        _runs.job_name(game, arm, seed): (game, arm, seed)
        for seed in range(FLAGS.seed, FLAGS.seed + FLAGS.seeds)
        for game in games
        for arm in FLAGS.variants
    }
    flags_of = {name: job_flags(arm, game, frames, seed, FLAGS.profile) for name, (game, arm, seed) in jobs.items()}
    if not FLAGS.fresh:
        configs = {name: job_config(flags) for name, flags in flags_of.items()}
        _runs.check_settings(summaries_dir, configs, runs, flags_of)
    to_train = _runs.jobs_to_train(flags_of, summaries_dir, runs, FLAGS.fresh, FLAGS.extend)

    def done(name: str, final: dict) -> None:
        _runs.write_summary(summaries_dir, name, summarise(runs / name, *jobs[name], final), runs / name)

    _runs.train_jobs(
        "per.train", {name: (runs / name, flags_of[name]) for name in to_train}, done,
        fresh=FLAGS.fresh, extend=FLAGS.extend, parallel=FLAGS.jobs,
    )  # fmt: skip
    return _runs.load_summaries(summaries_dir)


def write_provenance(
    out: pathlib.Path, stem: str, summaries: list[dict], start: float, also: tuple[str, ...] = ()
) -> None:
    """`stem`.provenance.json for `stem`.* and the files in `also`: assembled from `summaries`, each with its
    run's own record; unchanged, kept."""
    jobs = {_runs.job_name(s["game"], s["variant"], s["seed"]): s for s in summaries}
    scale = f"reduced ({FLAGS.profile}): MinAtar; assembled from {len(jobs)} runs in minatar_runs/"
    record = _runs.study_record(jobs, scale, start, out / "minatar_runs")
    provenance.write_derived(out, stem, also, **record)


if __name__ == "__main__":
    cli.run(main)
