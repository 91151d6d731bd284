"""Uniform, rank-based and proportional Double DQN on the 5 MinAtar games.

The reduced-scale analogue of PER §4 (Fig. 4 and 7, Tables 6/7): the same
agent and replay variants (`per.train`, presets `minatar_ddqn`, `_rank`,
`_prop`), on MinAtar instead of Atari, beside Young & Tian 2019's DQN.

    python -m reproduce.per.minatar --profile full       # 2M frames a run, 5 games x 3 variants
    python -m reproduce.per.minatar --profile full --games breakout --variants rank
    python -m reproduce.per.minatar --profile quick      # smoke scale: one game, 15K frames a run

A study too long for one sitting is assembled from runs made at different
times, possibly on different machines:

* each finished run writes its summary (final score, binned curve, config,
  the run's own provenance) to results/per/<profile>/minatar_runs/, which is
  committed; a job whose summary exists is not trained again;
* the training run itself lives in runs/reproduce/per_minatar_<profile>/ and
  is resumed if interrupted (it is not committed: its replay is large);
* the table, figure and provenance are rebuilt from every summary present,
  so they always cover exactly the runs that finished.

Outputs: minatar.csv (one row per game x variant x seed: `game, variant,
seed, frames, last100, ...`), minatar.md, minatar.png, minatar.provenance.json.
"""

from __future__ import annotations

import csv
import json
import pathlib
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

import reproduce  # noqa: E402
from common import cli, provenance  # noqa: E402
from common.envs.minatar import GAMES  # noqa: E402
from common.errors import UsageError  # noqa: E402
from reproduce import _runs  # noqa: E402

VARIANTS = {"uniform": "minatar_ddqn", "rank": "minatar_ddqn_rank", "proportional": "minatar_ddqn_prop"}
FRAMES = {"quick": 15_000, "full": 2_000_000}
DEFAULT_GAMES = {"quick": ["breakout"], "full": list(GAMES)}
CURVE_POINTS = 200  # Points of each run's stored curve (the 100-episode trailing mean).

reproduce.define_flags()
flags.DEFINE_list("games", None, "MinAtar games (default: all 5 for full, breakout for quick).")
flags.DEFINE_list("variants", list(VARIANTS), "Replay variants to run.")
flags.DEFINE_integer("seeds", 1, "Seeds per game and variant: seed, seed + 1, ...")
FLAGS = flags.FLAGS


def job_name(game: str, variant: str, seed: int) -> str:
    return f"{game}_{variant}_s{seed}"


def summarise(run_dir: pathlib.Path, game: str, variant: str, seed: int, final: dict) -> dict:
    """One finished run as a self-contained record: score, curve and where it came from."""
    episode_frames, returns = _runs.read_episodes(run_dir)
    trailing = _runs.trailing_mean(returns, 100)
    # From the 100th episode on: a trailing mean over fewer episodes is mostly noise.
    points = np.unique(np.linspace(min(99, len(returns) - 1), len(returns) - 1, CURVE_POINTS).astype(int))
    return {
        "game": game, "variant": variant, "seed": seed, "frames": final["frames"], "episodes": len(returns),
        "last100": round(float(returns[-100:].mean()), 3),
        "wall_time_s": final.get("wall_time_s"),
        "curve": {
            "frames": episode_frames[points].astype(int).tolist(),
            "trailing100": trailing[points].round(3).tolist(),
        },
        "config": json.loads((run_dir / "config.json").read_text()),
        "run_provenance": _runs.run_provenance(run_dir),
    }  # fmt: skip


def load_summaries(directory: pathlib.Path) -> list[dict]:
    paths = [p for p in sorted(directory.glob("*.json")) if not p.name.endswith(".provenance.json")]
    return [json.loads(p.read_text()) for p in paths]


def frames_to_reach(summary: dict, score: float) -> int | None:
    """First frame at which the run's 100-episode trailing mean reached `score`; None if never."""
    frames, trailing = np.array(summary["curve"]["frames"]), np.array(summary["curve"]["trailing100"])
    reached = np.flatnonzero(trailing >= score)
    return int(frames[reached[0]]) if len(reached) else None


def published() -> dict[str, float]:
    with open(reproduce.RESULTS / "published" / "minatar_young2019_5M.csv", newline="") as f:
        return {r["game"]: float(r["dqn"]) for r in csv.DictReader(f)}


def table_rows(summaries: list[dict], reference: dict[str, float]) -> list[dict]:
    """One row per run, with the uniform run of the same game and seed as the yardstick."""
    uniform = {(s["game"], s["seed"]): s for s in summaries if s["variant"] == "uniform"}
    rows = []
    for s in sorted(summaries, key=lambda s: (s["game"], list(VARIANTS).index(s["variant"]), s["seed"])):
        baseline = uniform.get((s["game"], s["seed"]))
        rows.append({
            "game": s["game"], "variant": s["variant"], "seed": s["seed"], "frames": s["frames"],
            "episodes": s["episodes"], "last100": s["last100"], "young_tian_dqn_5M": reference[s["game"]],
            "frames_to_uniform_final": frames_to_reach(s, baseline["last100"]) if baseline else None,
            "uniform_final": baseline["last100"] if baseline else None,
        })  # fmt: skip
    return rows


def markdown(rows: list[dict], profile: str) -> str:
    scale = "SMOKE SCALE (quick profile): not a result" if profile == "quick" else "Reduced scale"
    frames = sorted({r["frames"] for r in rows})
    lines = [
        f"# {scale}: prioritized Double DQN on MinAtar ({', '.join(f'{f:,}' for f in frames)} frames a run)",
        "",
        "MinAtar instead of Atari. `last100`: the mean return of the last 100 training episodes",
        "(epsilon-greedy, epsilon 0.1 after 100K frames), the statistic of Young & Tian 2019, whose DQN",
        "is shown at *its* budget of 5M frames (read off their figures, about ±0.3; ±1 on Space",
        "Invaders). Ours ran fewer frames: compare with that in mind. One update per 4 agent steps",
        "(PER's ratio; Y&T update every step), Double DQN targets, the step size divided by 4 for the",
        "prioritized variants (PER App. B.2.2). `to uniform`: frames until the variant's 100-episode",
        "mean first reached the uniform run's final score (same game and seed; PER Fig. 4/7's question).",
        "",
        "| game | variant | seed | frames | last100 | Y&T DQN (5M) | to uniform's final |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        reach = r["frames_to_uniform_final"]
        lines.append(
            f"| {r['game']} | {r['variant']} | {r['seed']} | {r['frames']:,} | {r['last100']:.2f} "
            f"| {r['young_tian_dqn_5M']} | {'never' if reach is None else f'{reach:,}'} |"
        )
    games = sorted({r["game"] for r in rows})
    uniform = [r for r in rows if r["variant"] == "uniform"]
    at_or_above = sum(r["last100"] >= r["young_tian_dqn_5M"] for r in uniform)
    done = {(r["game"], r["variant"]) for r in rows}
    missing = [f"{g}/{v}" for g in GAMES for v in VARIANTS if (g, v) not in done]
    lines += [
        "",
        f"Uniform DDQN at or above Y&T's DQN (at 5M frames) on {at_or_above} of {len(uniform)} games run.",
        f"Games run: {', '.join(games)}. "
        + (f"Not run yet: {', '.join(missing)}." if missing else "All 5 games x 3 variants are in."),
    ]
    return "\n".join(lines) + "\n"


def plot(summaries: list[dict], reference: dict[str, float], path: pathlib.Path) -> None:
    games = [g for g in GAMES if any(s["game"] == g for s in summaries)]
    fig, axes = plt.subplots(1, len(games), figsize=(4 * len(games), 3.4), squeeze=False)
    for ax, game in zip(axes[0], games):
        for colour, variant in enumerate(VARIANTS):
            for s in (s for s in summaries if s["game"] == game and s["variant"] == variant):
                label = variant if s["seed"] == min(x["seed"] for x in summaries) else None
                ax.plot(s["curve"]["frames"], s["curve"]["trailing100"], color=f"C{colour}", lw=1, label=label)
        ax.axhline(reference[game], color="grey", ls=":", label="Y&T DQN at 5M")
        ax.set(title=game, xlabel="frames")
    axes[0][0].set_ylabel("training return (100-episode mean)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> None:
    start = time.time()
    games = FLAGS.games or DEFAULT_GAMES[FLAGS.profile]
    for name, given, accepted in (("minatar game", games, GAMES), ("replay variant", FLAGS.variants, VARIANTS)):
        unknown = [x for x in given if x not in accepted]
        if unknown:
            raise UsageError(f"unknown {name}(s) {unknown}; accepted: {', '.join(accepted)}")
    if FLAGS.seeds < 1:
        raise UsageError(f"--seeds={FLAGS.seeds}: must be >= 1")
    frames = FRAMES[FLAGS.profile]
    out = reproduce.output_dir("per", FLAGS.profile)
    summaries_dir = out / "minatar_runs"
    summaries_dir.mkdir(exist_ok=True)
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"per_minatar_{FLAGS.profile}"
    for seed in range(FLAGS.seed, FLAGS.seed + FLAGS.seeds):
        for game in games:
            for variant in FLAGS.variants:
                name = job_name(game, variant, seed)
                summary_path = summaries_dir / f"{name}.json"
                if summary_path.exists():
                    print(f"{name}: summarised earlier, kept ({summary_path})", flush=True)
                    continue
                flags_ = [f"--preset={VARIANTS[variant]}", f"--env=minatar:{game}", f"--frames={frames}"]
                final = _runs.train("per.train", runs / name, [*flags_, f"--seed={seed}"])
                summary = summarise(runs / name, game, variant, seed, final)
                summary_path.write_text(json.dumps(summary, indent=1) + "\n")
                # The run's own record (commit, command, segments), beside its summary.
                (summaries_dir / f"{name}.provenance.json").write_text((runs / name / "provenance.json").read_text())

    summaries = load_summaries(summaries_dir)
    reference = published()
    rows = table_rows(summaries, reference)
    reproduce.write_csv(out / "minatar.csv", rows)
    text = markdown(rows, FLAGS.profile)
    (out / "minatar.md").write_text(text)
    plot(summaries, reference, out / "minatar.png")
    provenance.write(
        out, "minatar.provenance.json",
        config={job_name(s["game"], s["variant"], s["seed"]): s["config"] for s in summaries},
        seeds=sorted({s["seed"] for s in summaries}), frames=sum(s["frames"] for s in summaries),
        wall_time_s=sum(s["wall_time_s"] or 0.0 for s in summaries),
        scale=f"reduced ({FLAGS.profile}): MinAtar; assembled from {len(summaries)} runs in {summaries_dir.name}/",
        extra={
            "assembled_in_s": round(time.time() - start, 1),
            "run_provenance": {job_name(s["game"], s["variant"], s["seed"]): s["run_provenance"] for s in summaries},
        },
    )  # fmt: skip
    print(text)


if __name__ == "__main__":
    cli.run(main)
