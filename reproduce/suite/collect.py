"""Copies the finished jobs of a suite, without their checkpoints, into another suite directory.

    python -m reproduce.suite.collect SOURCE_SUITE_DIR DEST_SUITE_DIR

A suite whose jobs ran in different places (shards on machines without a
shared filesystem, or sessions on fresh machines) is assembled by collecting
each place's finished jobs into one directory. For each done job of the source
(trained and evaluated, `_plan.state`), DEST/<game>_s<seed>/ receives what the
aggregate and a reader need, a few KB:

* config.json, provenance.json, final.json and the final evaluation
  (`eval_step<N>.json`), copied;
* curve.csv, the run's mean training return per 1% of its frames, from
  episodes.csv (whose every episode is too large to commit for a suite).

DEST gets the suite's suite.json, so `python -m reproduce.suite.aggregate DEST`
works on it, and running the suite command with `--suite_dir DEST` skips the
collected jobs and trains the rest. Collecting never overwrites: DEST must hold
the same agent, preset, frame budget and evaluation, a job DEST already has
done is left as it is, and a job DEST has started but not finished is an error.
A job is copied whole or not at all. A collected job (curve.csv, no episodes)
can be collected again: results/ back into runs/ to go on with a suite.
"""

from __future__ import annotations

import json
import pathlib
import shutil

from common import cli
from common.errors import UsageError
from common.results import check_directory
from reproduce import _runs, write_csv
from reproduce.suite import _plan

COPIED = ("config.json", "provenance.json", "final.json")
CURVE_BINS = 100


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise UsageError("expected two suite directories: python -m reproduce.suite.collect SOURCE DEST")
    source, dest = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    suite = _plan.load_suite(source)
    if suite is None:
        raise UsageError(f"{source} has no suite.json: not a suite directory")
    collected, kept, not_done = collect(suite, source, dest)
    print(f"{dest}: collected {len(collected)} job(s) {' '.join(collected)}".rstrip())
    if kept:
        print(f"  already done there, left as they were: {' '.join(kept)}")
    if not_done:
        print(f"  not done in {source}, not collected: {' '.join(not_done)}")


def collect(suite: _plan.Suite, source: pathlib.Path, dest: pathlib.Path) -> tuple[list[str], list[str], list[str]]:
    """Copies source's done jobs into dest; the names collected, kept (dest had them done) and not done."""
    saved = _plan.load_suite(dest)
    check_directory(f"destination {dest}", dest)
    _plan.check_same(saved, suite, dest, "give another destination")
    jobs = _plan.jobs(suite)
    done = [job.name for job in jobs if _plan.state(source / job.name) == "done"]
    kept = [name for name in done if _plan.state(dest / name) == "done"]
    started = [name for name in done if _plan.state(dest / name) == "partial"]
    if started:
        raise UsageError(f"{dest} has unfinished runs of {' '.join(started)}: finish or move them first")
    _plan.save_suite(_plan.merge(saved, suite), dest)
    collected = [name for name in done if name not in kept]
    for name in collected:
        copy_job(source / name, dest / name)
    not_done = [job.name for job in jobs if job.name not in done]
    return collected, kept, not_done


def copy_job(run_dir: pathlib.Path, dest: pathlib.Path) -> None:
    """A done run's records and its training curve, into a new directory `dest`, whole or not at all.

    The curve is binned from the run's episodes.csv, or copied from a collected job (a suite in results/
    collected back into runs/ to go on with it), which kept its curve.csv alone.
    """
    partial = dest.with_name(f".{dest.name}.collecting")  # Not a job's name: never counted as done.
    shutil.rmtree(partial, ignore_errors=True)  # Left by a collect that was killed.
    partial.mkdir(parents=True)
    try:
        for path in [*(run_dir / name for name in COPIED), _plan.evaluation_path(run_dir)]:
            if path.exists():
                shutil.copy2(path, partial / path.name)
        if (run_dir / "episodes.csv").exists():
            frames, returns = _runs.read_episodes(run_dir)
            total = int(json.loads((run_dir / "final.json").read_text())["frames"])
            curve = _runs.binned_curve(run_dir.name, frames, returns, total, total // CURVE_BINS or 1)
            write_csv(partial / "curve.csv", curve)
        elif (run_dir / "curve.csv").exists():
            shutil.copy2(run_dir / "curve.csv", partial / "curve.csv")
        else:
            raise UsageError(f"{run_dir} has neither episodes.csv nor curve.csv: no training curve to collect")
    except BaseException:  # Ctrl-C too: nothing half copied is left where a glob of the suite could see it.
        shutil.rmtree(partial)
        raise
    partial.rename(dest)


if __name__ == "__main__":
    cli.run(main)
