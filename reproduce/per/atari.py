"""Uniform against prioritized Double DQN on Atari beside PER Tables 6 and 7, at reduced scale.

    python -m reproduce.per.atari --profile full                   # Breakout, uniform and proportional
    python -m reproduce.per.atari --profile full --jobs 2          # the same, both runs at once
    python -m reproduce.per.atari --profile full --games pong --variants rank --frames 1e7
    python -m reproduce.per.atari --profile quick                  # smoke scale: 20K frames a run
    python -m reproduce.per.atari --profile full --frames 1e7 --extend  # train the runs on to 10M frames
    python -m reproduce.per.atari --profile full --summarise_only  # the table from the summaries present

Trains each game x variant x seed with `per.train` (variants: `uniform`,
`rank`, `proportional` -> presets `atari_ddqn`, `atari_ddqn_rank`,
`atari_ddqn_prop`, PER §4 and App. B.2) for the profile's frame budget or
`--frames`, then evaluates its final checkpoint with `per.evaluate`: up to 30
no-op starts, the 108K-frame cap, no life-loss terminals. PER trains for 200M
frames and evaluates from human starts, which are not public: our table says
both differences beside the paper's numbers. The default game is Breakout,
whose score moves within a 4M-frame budget (Pong's would not; `_atari.GAMES`).

Like `reproduce.per.minatar`, the study is assembled from jobs run at different
times: each finished job's summary (training curve and return, evaluation,
config, the run's provenance) goes to results/per/<profile>/atari_runs/, which
is committed, and a job whose summary exists is not trained again; its run
lives in runs/reproduce/per_atari_<profile>/ (resumed if interrupted, not
committed). The table, figure and provenance are rebuilt from every summary present.
`--extend` trains a summarised job of a smaller budget on to `--frames`, from
its run's last checkpoint (which must be on this machine), and replaces its
summary; the table names the budgets each run was trained to.

Outputs: results/per/<profile>/atari.csv (one row per job: `game, variant,
seed, frames, train_last100, eval_mean_return, ...` beside PER's), atari.md,
atari.png (training curves, PER's scores as lines), atari.provenance.json.
"""

from __future__ import annotations

import pathlib
import time

from absl import flags

import reproduce
from common import cli
from common.envs.atari import ATARI57
from common.errors import check_choices
from reproduce import _runs
from reproduce.per import _atari

reproduce.define_flags()
flags.DEFINE_list("games", list(_atari.GAMES), "Atari games to train.")
flags.DEFINE_list("variants", ["uniform", "proportional"], f"Replay variants: {', '.join(_atari.VARIANTS)}.")
flags.DEFINE_integer("seeds", 1, "Seeds per game and variant: seed, seed + 1, ...", lower_bound=1)
cli.define_frames("Frame budget per run overriding the profile's, e.g. 1e7.")
flags.DEFINE_integer("eval_episodes", None, "Evaluation episodes overriding the profile's (PER: 100).")
flags.DEFINE_bool("extend", False, "Train runs of a smaller budget on to --frames (resumed), not refuse them.")
flags.DEFINE_bool("summarise_only", False, "Rebuild the table and figure from the summaries present; train nothing.")
flags.DEFINE_integer("jobs", 1, "Runs trained at once (each in its own process).", lower_bound=1)
FLAGS = flags.FLAGS
# The flags that choose or shape the runs to train, which `--summarise_only` (every summary present) refuses.
CHOOSING = ("games", "variants", "seed", "seeds", "jobs", "eval_episodes")


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    start = time.time()
    check_choices("--games", "atari game", FLAGS.games, ATARI57)
    check_choices("--variants", "variant", FLAGS.variants, _atari.VARIANTS)
    episodes = _atari.EVAL_EPISODES[FLAGS.profile] if FLAGS.eval_episodes is None else FLAGS.eval_episodes
    frames = _runs.whole_budget(_atari.FRAMES[FLAGS.profile] if FLAGS.frames is None else FLAGS.frames, episodes)
    overrides = _atari.OVERRIDES[FLAGS.profile]
    summaries_dir = reproduce.RESULTS / "per" / FLAGS.profile / "atari_runs"
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"per_atari_{FLAGS.profile}"
    if FLAGS.summarise_only:  # Before any directory is made: a refusal leaves nothing behind.
        _runs.check_summarise_only(FLAGS.fresh, FLAGS.extend, FLAGS.frames, CHOOSING)
        summaries = _runs.summaries_to_build(summaries_dir, runs)
    else:
        _runs.check_extend(FLAGS.fresh, FLAGS.extend, FLAGS.frames)
        summaries = train(frames, episodes, overrides, summaries_dir, runs)
    out = reproduce.output_dir("per", FLAGS.profile)
    print(_atari.write_study(out, summaries, FLAGS.profile, start))
    _runs.print_written(out, start)


def train(
    frames: int, episodes: int, overrides: tuple[str, ...], summaries_dir: pathlib.Path, runs: pathlib.Path
) -> list[dict]:
    """Trains, evaluates and summarises every job of `--games` x `--variants` x seeds not summarised yet;
    every summary present."""
    summaries_dir.mkdir(parents=True, exist_ok=True)
    jobs = {
        _runs.job_name(game, variant, seed): (game, variant, seed)
        for seed in range(FLAGS.seed, FLAGS.seed + FLAGS.seeds)
        for game in FLAGS.games
        for variant in FLAGS.variants
    }
    flags_of = {name: _atari.job_flags(v, g, frames, seed, overrides) for name, (g, v, seed) in jobs.items()}
    if not FLAGS.fresh:
        configs = {name: _atari.job_config(flags) for name, flags in flags_of.items()}
        _runs.check_settings(summaries_dir, configs, runs, flags_of)
    to_train = _runs.jobs_to_train(flags_of, summaries_dir, runs, FLAGS.fresh, FLAGS.extend, episodes)

    def done(name: str, final: dict) -> None:
        game, variant, seed = jobs[name]
        result = _runs.evaluate("per.evaluate", runs / name, episodes, seed + 1)
        record = _atari.summarise(runs / name, game, variant, seed, final, result, overrides)
        _runs.write_summary(summaries_dir, name, record, runs / name)

    _runs.train_jobs(
        "per.train", {name: (runs / name, flags_of[name]) for name in to_train}, done,
        fresh=FLAGS.fresh, extend=FLAGS.extend, parallel=FLAGS.jobs,
    )  # fmt: skip
    return _runs.load_summaries(summaries_dir)


if __name__ == "__main__":
    cli.run(main)
