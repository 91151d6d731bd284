"""The jobs, summaries, table and figure of `reproduce.per.atari`, without its flags.

Tests import this module: `reproduce.per.atari` defines absl flags (`games`,
`variants`, `seeds`, `frames`) that other reproduce scripts define too, and
two definitions of one flag in a process fail.
"""

from __future__ import annotations

import csv
import pathlib
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import reproduce  # noqa: E402
from common import provenance  # noqa: E402
from common.envs.atari import ATARI57  # noqa: E402
from per.config import PRESETS, PerConfig  # noqa: E402
from reproduce import _runs  # noqa: E402

VARIANTS = {"uniform": "atari_ddqn", "rank": "atari_ddqn_rank", "proportional": "atari_ddqn_prop"}
PAPER_COLUMNS = {"uniform": "ddqn", "rank": "ddqn_rank", "proportional": "ddqn_prop"}  # PER Tables 6 and 7.
PAPER_FRAMES = 200_000_000
# Full: 800K agent steps, the budget of the committed Breakout runs (results/per/full/
# atari_runs: 2M frames, then trained on to 3.2M, as far as two sessions' background
# compute went; about 3.9 h a run here, two side by side). The profile's budget is the
# committed runs' own, so `make reproduce PROFILE=full` keeps them rather than refusing
# them as another budget, and `--fresh` retrains that same measurement. Tuned DDQN's
# epsilon (1 -> 0.01 over 1M agent steps) is still annealing there, at 0.21.
# `--frames` sets another budget (`--extend` trains summarised runs on to it); the
# table says the frames run.
FRAMES = {"quick": 20_000, "full": 3_200_000}
# The "Pong (or Breakout)": Breakout. Pong's score stays at its -21 floor
# until the agent returns the ball reliably, which DQN-style agents with these
# settings reach later than 4M frames; Breakout's rises from the first million,
# so the variants can differ within the budget.
GAMES = ("breakout",)
EVAL_EPISODES = {"quick": 2, "full": 30}  # PER App. B.2.3: 100.
# Quick is a smoke run of the wiring (train, checkpoint, evaluate, assemble), so
# learning must start within its 5,000 agent steps: the presets' 50K-transition
# warm-up, 1M-step epsilon schedule and 7,500-update target period are cut to fit.
OVERRIDES = {
    "quick": ("min_replay_size=1000", "replay_capacity=10000", "epsilon_decay_steps=2500", "target_update_period=250"),
    "full": (),
}


def job_flags(variant: str, game: str, frames: int, seed: int, overrides: tuple[str, ...]) -> list[str]:
    """`per.train`'s flags for one job: the variant's preset on `game`, with the profile's `overrides`."""
    return [
        f"--preset={VARIANTS[variant]}", f"--env=atari:{game}", f"--frames={frames}", f"--seed={seed}",
        *(f"--config_override={o}" for o in overrides),
    ]  # fmt: skip


def job_config(flags: list[str]) -> PerConfig:
    """The config that `per.train` resolves a job's `flags` (`job_flags`) to, with today's presets."""
    return _runs.job_config(flags, PRESETS, "per config")


def summarise(
    run_dir: pathlib.Path, game: str, variant: str, seed: int, final: dict, result: dict, overrides: tuple[str, ...]
) -> dict:
    """One finished job as a self-contained record: training run, its evaluation (`per.evaluate`'s result)."""
    return {
        "game": game, "variant": variant, "seed": seed, **_runs.summarise_run(run_dir, final),
        "overrides": list(overrides), "eval": result,
    }  # fmt: skip


def published() -> dict[str, dict[str, dict[str, float]]]:
    """`{game: {variant: {"score": Table 7's, "normalized": Table 6's}}}`: PER at 200M frames, human starts."""
    tables = {}
    for key, name in (("score", "per_table7_raw.csv"), ("normalized", "per_table6_normalized.csv")):
        with open(reproduce.RESULTS / "published" / name, newline="") as f:
            tables[key] = {r["game"]: r for r in csv.DictReader(f)}
    return {
        game: {
            variant: {
                "score": float(tables["score"][game][column]),
                "normalized": float(tables["normalized"][game][column]) / 100,  # Printed in percent.
            }
            for variant, column in PAPER_COLUMNS.items()
        }
        for game in tables["score"]
    }


def table_rows(summaries: list[dict], paper: dict) -> list[dict]:
    """One row per job, by game, variant and seed, beside PER's score for the same game and variant."""
    rows = []
    for s in sorted(summaries, key=lambda s: (s["game"], list(VARIANTS).index(s["variant"]), s["seed"])):
        theirs = paper[s["game"]][s["variant"]]
        rows.append({
            "game": s["game"], "variant": s["variant"], "seed": s["seed"], "frames": s["frames"],
            "paper_frames": PAPER_FRAMES, "episodes": s["episodes"], "train_last100": s["last100"],
            "eval_starts": "no-op", "eval_episodes": s["eval"]["episodes"],
            "eval_mean_return": round(s["eval"]["mean_return"], 2),
            "eval_human_normalized": round(s["eval"]["human_normalized"], 4),
            "paper_starts": "human", "per_200M": theirs["score"], "per_200M_normalized": theirs["normalized"],
            "overrides": " ".join(s["overrides"]),
            "budgets": " ".join(map(str, _runs.budgets(s["run_provenance"]) or [s["frames"]])),
        })  # fmt: skip
    return rows


def listed(values: Iterable[int]) -> str:
    return ", ".join(f"{v:,}" for v in sorted(set(values)))


def two_decimals(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"  # None: the run finished no game.


def markdown(rows: list[dict], profile: str) -> str:
    seeds, overrides = len({r["seed"] for r in rows}), sorted({r["overrides"] for r in rows} - {""})
    frames = listed(r["frames"] for r in rows)
    lines = [
        reproduce.heading(
            f"Reduced scale: uniform and prioritized Double DQN on Atari ({frames} frames a run)", profile
        ),
        "",
        "**Not the paper's measurement.** Ours: "
        f"{frames} frames of the paper's 200M, {seeds} seed{'s' if seeds > 1 else ''}, on 2 CPU cores, evaluated "
        "from **no-op starts** (up to 30 no-ops, the 108K-frame cap, no life-loss terminals, epsilon 0.001) over "
        f"{listed(r['eval_episodes'] for r in rows)} episodes, the final agent. PER's (Table 7, Table 6 for "
        "`% human`): 200M frames, the best agent found during training evaluated over 100 episodes from **human "
        "starts** (start states taken from human play, which are not public), at Table 5's epsilon 0.001 for "
        "human starts (its no-op test evaluation used 0.01). Different frames, agents and starts: the columns "
        "are side by side, not the same measurement.",
        "",
        "`% human`: both normalised by PER Table 7's random and human scores (its human-starts table). Training",
        "return: the mean of the last 100 training games (epsilon-greedy). The agents are PER's presets (tuned DDQN,",
        "App. B.2, Table 3; the step size divided by 4 with prioritization; Mnih et al.'s network with tuned DDQN's",
        "shared bias) and beta reaches 1 at the run's budget; epsilon anneals from the first step (Mnih et",
        "al. start after the 50K-step warm-up). "
        + (
            f"Smoke-scale overrides: `{'`, `'.join(overrides)}`."
            if overrides
            else "Otherwise the paper's schedule, made for 200M frames: learning starts after 50K transitions "
            "(200K frames) and epsilon decays over 1M agent steps (4M frames)."
        ),
        *_runs.extended(rows),
        "",
        "| game | variant | seed | frames | training return (last 100) | eval return, no-op starts | eval % human "
        "| PER (200M, human starts) | PER % human |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *[
            f"| {r['game']} | {r['variant']} | {r['seed']} | {r['frames']:,} | {two_decimals(r['train_last100'])} "
            f"| {r['eval_mean_return']} | {100 * r['eval_human_normalized']:.1f}% | {r['per_200M']} "
            f"| {100 * r['per_200M_normalized']:.0f}% |"
            for r in rows
        ],
    ]
    return "\n".join(lines) + "\n"


def plot(summaries: list[dict], paper: dict, path: pathlib.Path, profile: str) -> None:
    """Each game's training curves (100-game mean) per variant, PER's score for each variant run as a line."""
    games = [g for g in ATARI57 if any(s["game"] == g for s in summaries)]
    fig, axes = plt.subplots(1, len(games), figsize=(5 * len(games), 3.8), squeeze=False)
    for ax, game in zip(axes[0], games):
        for colour, variant in enumerate(VARIANTS):
            mine = [s for s in summaries if s["game"] == game and s["variant"] == variant]
            for s in mine:
                # Markers: a run of fewer than 100 games has a one-point curve.
                ax.plot(s["curve"]["frames"], s["curve"]["trailing100"], color=f"C{colour}", lw=1, marker=".",
                        ms=3, label=f"{variant}, ours" if s is mine[0] else None)  # fmt: skip
            if mine:
                ax.axhline(paper[game][variant]["score"], color=f"C{colour}", ls="--", lw=1,
                           label=f"{variant}, PER's evaluation at 200M (human starts)")  # fmt: skip
        longest = max(s["frames"] for s in summaries if s["game"] == game)
        ax.set(title=game, xlabel="frames", ylabel="training return (100-game mean)", xlim=(0, longest))
        ax.legend(fontsize=7)
    budget = listed(s["frames"] for s in summaries)
    fig.suptitle(f"Double DQN on Atari, {profile} profile: {budget} frames a run (PER: 200M)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_study(out: pathlib.Path, summaries: list[dict], profile: str, start: float) -> str:
    """atari.{csv,md,png,provenance.json} in `out` from every job summary; returns the markdown."""
    paper = published()
    rows = table_rows(summaries, paper)
    reproduce.write_csv(out / "atari.csv", rows)
    text = markdown(rows, profile)
    (out / "atari.md").write_text(text)
    plot(summaries, paper, out / "atari.png", profile)
    jobs = {_runs.job_name(s["game"], s["variant"], s["seed"]): s for s in summaries}
    scale = (
        f"reduced ({profile}): {listed(s['frames'] for s in summaries)} of {PAPER_FRAMES:,} frames, no-op starts "
        f"(PER: human starts); assembled from {len(jobs)} runs in atari_runs/"
    )
    provenance.write_derived(out, "atari", **_runs.study_record(jobs, scale, start, out / "atari_runs"))
    return text
