"""IMPALA on the 5 MinAtar games, next to Young & Tian 2019's actor-critic.

A reduced-scale reproduction: MinAtar instead of Atari, one seed per game.
Each game is a full `python -m impala.train --preset minatar` run (Reverb
server, actor processes, learner). We report the mean return of the last 100
training episodes, the statistic of Young & Tian's figures, beside their
AC(lambda=0.8) and DQN numbers at 5M frames (results/published/).

    python -m reproduce.impala.minatar --profile full    # 5M frames per game
    python -m reproduce.impala.minatar --profile quick   # 100K frames per game: a smoke run

Runs live in runs/reproduce/impala_minatar_<profile>/<game>; an interrupted
study picks up where it stopped (finished games are kept, a partial one is
resumed). Outputs: results/impala/<profile>/minatar.{csv,md,png}, the binned
learning curves minatar_curves.csv, and provenance.
"""

from __future__ import annotations

import csv
import json
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
from reproduce import _runs  # noqa: E402

reproduce.define_flags()
flags.DEFINE_list("games", list(GAMES), "MinAtar games to run.")
FLAGS = flags.FLAGS

FRAMES = {"quick": 100_000, "full": 5_000_000}
CURVE_BIN_FRAMES = {"quick": 10_000, "full": 100_000}


def published() -> dict[str, dict[str, float]]:
    with open(reproduce.RESULTS / "published" / "minatar_young2019_5M.csv", newline="") as f:
        return {r["game"]: {k: float(v) for k, v in r.items() if k != "game"} for r in csv.DictReader(f)}


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    start = time.time()
    check_choices("--games", "minatar game", FLAGS.games, GAMES)
    frames = FRAMES[FLAGS.profile]
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"impala_minatar_{FLAGS.profile}"
    _runs.check_keeps_study(reproduce.RESULTS / "impala" / FLAGS.profile, "minatar", FLAGS.games, FLAGS.seed, frames)
    if FLAGS.fresh:  # Remembered until each game's run has retrained: a stopped study resumes without it.
        _runs.ask_fresh(runs / game for game in FLAGS.games)
    finals = {
        game: _runs.train(
            "impala.train", runs / game,
            ["--preset=minatar", f"--env=minatar:{game}", f"--frames={frames}", f"--seed={FLAGS.seed}"],
            FLAGS.fresh,
        )
        for game in FLAGS.games
    }  # fmt: skip

    reference = published()
    out = reproduce.output_dir("impala", FLAGS.profile)
    rows, curves = [], []
    fig, axes = plt.subplots(1, len(FLAGS.games), figsize=(4 * len(FLAGS.games), 3.4), squeeze=False)
    for ax, game in zip(axes[0], FLAGS.games):
        episode_frames, returns = _runs.read_episodes(runs / game)
        final = finals[game]
        ours = float(np.mean(returns[-100:]))
        ac = reference[game]["ac_lambda_0.8"]
        rows.append({
            "game": game, "frames": final["frames"], "episodes": len(returns),
            "impala_last100": round(ours, 2), "ac_lambda_0.8": ac, "dqn": reference[game]["dqn"],
            "at_or_above_ac": ours >= ac, "seed": FLAGS.seed,
        })  # fmt: skip
        curves += _runs.binned_curve(game, episode_frames, returns, final["frames"], CURVE_BIN_FRAMES[FLAGS.profile])
        ax.plot(episode_frames, _runs.trailing_mean(returns, 100), lw=1, label="IMPALA (ours)")
        ax.axhline(ac, color="C1", ls="--", label="AC(λ=0.8), 5M")
        ax.axhline(reference[game]["dqn"], color="C2", ls=":", label="DQN, 5M")
        ax.set(title=game, xlabel="frames")
    axes[0][0].set_ylabel("training return (100-episode mean)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "minatar.png", dpi=110)
    reproduce.write_csv(out / "minatar.csv", rows)
    reproduce.write_csv(out / "minatar_curves.csv", curves)
    wins = sum(r["at_or_above_ac"] for r in rows)
    lines = [
        reproduce.heading(
            f"IMPALA on MinAtar ({FLAGS.profile} profile: {frames:,} frames per game, seed {FLAGS.seed})", FLAGS.profile
        ),
        "",
        "**Reduced scale**: MinAtar instead of Atari, one seed per game. Mean return of the last",
        "100 training episodes, beside Young & Tian 2019 at 5M frames (30 runs, best step size,",
        "read off their figures, about ±0.3; ±1 on Space Invaders).",
        "",
        "| game | frames | IMPALA (ours) | AC(λ=0.8) | DQN | ours ≥ AC(λ) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['game']} | {r['frames']:,} | {r['impala_last100']:.2f} | {r['ac_lambda_0.8']} | {r['dqn']} "
        f"| {'yes' if r['at_or_above_ac'] else 'no'} |"
        for r in rows
    ]
    lines += ["", f"At or above AC(λ=0.8) on {wins} of {len(rows)} games.", "", "Code each run trained with:"]
    for game in FLAGS.games:
        recorded = _runs.run_provenance(runs / game)
        lines.append(
            f"- {game}: commit {recorded['commit'][:8]}{' (uncommitted edits)' if recorded['dirty'] else ''}"
            if recorded
            else f"- {game}: not recorded (trained before runs recorded their own provenance)"
        )
    (out / "minatar.md").write_text("\n".join(lines) + "\n")
    configs = {g: json.loads((runs / g / "config.json").read_text()) for g in FLAGS.games}
    provenance.write(
        out, "minatar.provenance.json", config=configs, seeds=[FLAGS.seed], frames=frames * len(FLAGS.games),
        wall_time_s=_runs.wall_time(finals.values()), scale=f"reduced ({FLAGS.profile}): MinAtar, 1 seed per game",
        extra={"assembled_in_s": round(time.time() - start, 1), "runs": finals,
               "run_provenance": {g: _runs.run_provenance(runs / g) for g in FLAGS.games}},
    )  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    cli.run(main)
