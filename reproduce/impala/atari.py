"""IMPALA on Atari with the shallow model, beside IMPALA Table C.1 (reduced scale).

    python -m reproduce.impala.atari --profile full [--games pong] [--frames 1e7]

Trains `--preset atari_shallow` (App. G) on each game for the profile's frame
budget (full: 50M, the committed Pong run's, so `make reproduce PROFILE=full`
regenerates it), or `--frames` when one background run allows less or more,
then evaluates the final checkpoint by the paper's protocol (up to 30 no-op
starts, 108K-frame cap, no life-loss terminals) with `impala.evaluate`. The
paper trains for 200M frames; ours says how many it had.

Outputs: results/impala/<profile>/atari.{csv,md,png}, atari_curves.csv and
provenance.
"""

from __future__ import annotations

import csv
import json
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from absl import flags  # noqa: E402

import reproduce  # noqa: E402
from common import cli, provenance, scores  # noqa: E402
from common.envs.atari import ATARI57  # noqa: E402
from common.errors import check_choices  # noqa: E402
from reproduce import _runs  # noqa: E402

reproduce.define_flags()
flags.DEFINE_list("games", ["pong"], "Atari games to train.")
cli.define_frames("Frame budget per game overriding the profile's, e.g. 5e7.")
flags.DEFINE_integer("eval_episodes", None, "Evaluation episodes overriding the profile's (paper: 200).")
FLAGS = flags.FLAGS

FRAMES = {"quick": 150_000, "full": 50_000_000}  # Full: results/impala/full/atari (5,524 s here).
EVAL_EPISODES = {"quick": 2, "full": 30}
PAPER_FRAMES = 200_000_000


def published_shallow() -> dict[str, float]:
    with open(reproduce.RESULTS / "published" / "impala_table_c1.csv", newline="") as f:
        return {r["game"]: float(r["impala_shallow"]) for r in csv.DictReader(f)}


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    start = time.time()
    check_choices("--games", "atari game", FLAGS.games, ATARI57)
    episodes = EVAL_EPISODES[FLAGS.profile] if FLAGS.eval_episodes is None else FLAGS.eval_episodes
    frames = _runs.whole_budget(FRAMES[FLAGS.profile] if FLAGS.frames is None else FLAGS.frames, episodes)
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"impala_atari_{FLAGS.profile}"
    _runs.check_keeps_study(
        reproduce.RESULTS / "impala" / FLAGS.profile, "atari", FLAGS.games, FLAGS.seed, frames, episodes
    )
    if FLAGS.fresh:  # Remembered until each game's run has retrained: a stopped study resumes without it.
        _runs.ask_fresh(runs / game for game in FLAGS.games)
    published = published_shallow()
    rows, curves, finals = [], [], {}
    fig, axes = plt.subplots(1, len(FLAGS.games), figsize=(5 * len(FLAGS.games), 3.6), squeeze=False)
    for ax, game in zip(axes[0], FLAGS.games):
        run_dir = runs / game
        finals[game] = final = _runs.train(
            "impala.train", run_dir,
            ["--preset=atari_shallow", f"--env=atari:{game}", f"--frames={frames}", f"--seed={FLAGS.seed}"],
            FLAGS.fresh,
        )  # fmt: skip
        result = _runs.evaluate("impala.evaluate", run_dir, episodes, FLAGS.seed + 1)
        episode_frames, returns = _runs.read_episodes(run_dir)
        curves += _runs.binned_curve(game, episode_frames, returns, final["frames"], max(frames // 50, 1))
        rows.append({
            "game": game, "frames": final["frames"], "paper_frames": PAPER_FRAMES,
            "train_return_last100": round(float(returns[-100:].mean()), 2) if len(returns) else None,
            "eval_episodes": result["episodes"], "eval_mean_return": round(result["mean_return"], 2),
            "eval_human_normalized": round(result["human_normalized"], 4),
            "impala_shallow_200M": published[game],
            "impala_shallow_200M_normalized": round(scores.normalized(game, published[game], "atari_noop"), 4),
        })  # fmt: skip
        ax.plot(episode_frames, _runs.trailing_mean(returns, 100), lw=1, label="training return, ours (100-ep. mean)")
        ax.axhline(published[game], color="C1", ls="--", label="IMPALA shallow, 200M (Table C.1)")
        ax.set(title=f"{game}: {final['frames']:,} frames", xlabel="frames", ylabel="episode return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = reproduce.output_dir("impala", FLAGS.profile)
    fig.savefig(out / "atari.png", dpi=110)
    reproduce.write_csv(out / "atari.csv", rows)
    if curves:  # A short run may finish no game at all.
        reproduce.write_csv(out / "atari_curves.csv", curves)
    lines = [
        reproduce.heading(f"IMPALA shallow on Atari ({FLAGS.profile} profile)", FLAGS.profile),
        "",
        f"**Reduced scale**: {frames:,} frames per game against the paper's 200M, one seed, on 2 CPU cores.",
        "Training returns count full games (life loss ends learning episodes only); the evaluation",
        f"uses the paper's protocol over {episodes} episodes (the paper: 200).",
        "",
        "| game | frames | training return (last 100) | eval return | eval % human | paper (200M) | paper % human |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *[
            f"| {r['game']} | {r['frames']:,} | {r['train_return_last100']} | {r['eval_mean_return']} "
            f"| {100 * r['eval_human_normalized']:.1f}% | {r['impala_shallow_200M']} "
            f"| {100 * r['impala_shallow_200M_normalized']:.1f}% |"
            for r in rows
        ],
    ]
    (out / "atari.md").write_text("\n".join(lines) + "\n")
    configs = {g: json.loads((runs / g / "config.json").read_text()) for g in FLAGS.games}
    provenance.write(
        out, "atari.provenance.json", config=configs, seeds=[FLAGS.seed], frames=frames * len(FLAGS.games),
        wall_time_s=_runs.wall_time(finals.values()), scale=f"reduced: {frames:,} of {PAPER_FRAMES:,} frames",
        extra={"assembled_in_s": round(time.time() - start, 1), "runs": finals, "eval_episodes": episodes,
               "run_provenance": {g: _runs.run_provenance(runs / g) for g in FLAGS.games}},
    )  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    cli.run(main)
