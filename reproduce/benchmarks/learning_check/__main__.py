"""Does IMPALA still learn as the committed MinAtar run did? `python -m reproduce.benchmarks.learning_check`.

The throughput work of #13 (publishing parameters every k steps, fewer writer
calls, the learner's prefetch) must leave the learning unchanged. The
yardstick is the committed `reproduce.impala.minatar` result for one game
(results/impala/<profile>/minatar.csv and minatar_curves.csv: one run, seed
0). This check trains the same command, `impala.train --preset=minatar
--env=minatar:<game> --frames=<the committed frames>`, at the current commit
with `--seeds` seeds and asks whether the committed return lies within their
spread:

    python -m reproduce.benchmarks.learning_check --profile full     # breakout, 3 seeds x 5M frames
    python -m reproduce.benchmarks.learning_check --profile quick    # 100K frames a seed: a smoke run

"Within the spread": |committed - mean| <= 2 sd, where mean and sd (n - 1) are
over our seeds' last-100 training returns. The same test is shown at five
points of training, on the mean return of the 100K-frame bin (the committed
curve's bin) that ends there, so a change that learns slower but catches up
is visible too.

Each finished run's summary is committed under learning_check_runs/ (so the
check can be assembled from runs of different sessions or machines); the runs
themselves live in runs/reproduce/impala_learning_check_<profile>/. Outputs:
results/impala/benchmarks/learning_check{,_quick}.{csv,md,png,provenance.json}.
Not a paper study: `python -m reproduce` does not run it.
"""

from __future__ import annotations

import json
import time

from absl import flags

import reproduce
from common import cli, provenance, results
from common.envs.minatar import GAMES
from common.errors import UsageError, choice_error
from reproduce import _runs
from reproduce.benchmarks.learning_check import compare

reproduce.define_flags()
flags.DEFINE_string("game", "breakout", "The MinAtar game whose committed result is the yardstick.")
flags.DEFINE_integer("seeds", 3, "Seeds to train: seed, seed + 1, ... (at least 2, for a spread).")
flags.DEFINE_string("out", None, "Output directory (default results/impala/benchmarks).")
FLAGS = flags.FLAGS


def check_flags() -> None:
    if FLAGS.game not in GAMES:
        raise choice_error("--game", FLAGS.game, GAMES)
    if FLAGS.seeds < 2:
        raise UsageError(f"--seeds={FLAGS.seeds}: must be >= 2 (the check needs a spread)")


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    start = time.time()
    check_flags()
    reference, reference_curve = compare.committed(reproduce.RESULTS, FLAGS.profile, FLAGS.game)
    frames, width = int(reference["frames"]), compare.bin_frames(reference_curve)
    out = results.chosen_dir("--out", FLAGS.out, "impala", "benchmarks")
    stem = "learning_check" if FLAGS.profile == "full" else "learning_check_quick"
    summaries_dir = out / "learning_check_runs"
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"impala_learning_check_{FLAGS.profile}"
    summaries = []
    name_of = {seed: f"{FLAGS.profile}_{FLAGS.game}_s{seed}" for seed in range(FLAGS.seed, FLAGS.seed + FLAGS.seeds)}
    if FLAGS.fresh:  # Remembered until each seed's run has retrained: a stopped check resumes without it.
        _runs.ask_fresh(runs / name for name in name_of.values())
    for seed, name in name_of.items():
        path = summaries_dir / f"{name}.json"
        job = ["--preset=minatar", f"--env=minatar:{FLAGS.game}", f"--frames={frames}", f"--seed={seed}"]
        if not _runs.summary_kept(path, FLAGS.fresh, job, run_dir=runs / name):
            final = _runs.train("impala.train", runs / name, job, FLAGS.fresh)
            summary = compare.summarise(runs / name, FLAGS.game, seed, final, width)
            _runs.write_summary(summaries_dir, name, summary, runs / name)
        summaries.append(json.loads(path.read_text()))

    rows = compare.comparison_rows(float(reference["impala_last100"]), reference_curve, summaries)
    reproduce.write_csv(out / f"{stem}.csv", rows)
    text = compare.markdown(FLAGS.game, reference, summaries, rows, FLAGS.profile)
    (out / f"{stem}.md").write_text(text)
    compare.plot(FLAGS.game, reference_curve, summaries, out / f"{stem}.png")
    provenance.write(
        out, f"{stem}.provenance.json",
        config={f"s{s['seed']}": s["config"] for s in summaries}, seeds=[s["seed"] for s in summaries],
        frames=sum(s["frames"] for s in summaries), wall_time_s=sum(s["wall_time_s"] or 0.0 for s in summaries),
        scale=f"reduced ({FLAGS.profile}): MinAtar {FLAGS.game}, {len(summaries)} seeds",
        extra={
            "assembled_in_s": round(time.time() - start, 1), "reference": reference,
            "run_provenance": {f"s{s['seed']}": s["run_provenance"] for s in summaries},
        },
    )  # fmt: skip
    print(text)


if __name__ == "__main__":
    cli.run(main)
