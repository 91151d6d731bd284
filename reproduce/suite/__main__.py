"""Benchmark suites: every (game, seed) trained and evaluated as an ordinary run directory.

    python -m reproduce.suite --agent impala --preset minatar --suite minatar --seeds 3 --frames 2e6 --jobs 2
    python -m reproduce.suite.aggregate runs/suites/impala_minatar_minatar

--agent impala|ddqn|laser runs `<impala|per|laser>.train` then `.evaluate`;
--suite is minatar (5 games), atari57, or a list FAMILY:GAME,FAMILY:GAME,...
(dmlab30 is not supported yet). Job `<game>_s<seed>` (seeds 0..N-1) lives in
SUITE_DIR/<game>_s<seed>, its output in SUITE_DIR/logs/<game>_s<seed>.log;
SUITE_DIR/suite.json holds the suite's agent, preset, frames, games and seeds,
and a suite directory takes no other agent, preset, frames or evaluation.
Re-running the same command skips finished jobs (trained and evaluated) and
resumes started ones. A failed job is retried once; the others go on; the
exit status is 1 if a job failed twice. --dry_run lists the jobs and an
estimated time; --shard I/N runs every N-th job from the I-th (e.g. a Slurm
array). --engine accepts only `local` for now (K jobs at a time on this
machine); a Ray engine is planned.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import pathlib
import signal
import subprocess
import sys
import time
from typing import NamedTuple

from absl import flags

from common import cli
from common.errors import UsageError, choice_error
from reproduce import REPO_ROOT
from reproduce.suite import _plan

flags.DEFINE_enum("agent", None, list(_plan.AGENTS), "Agent: impala, ddqn (prioritized Double DQN) or laser.")
flags.DEFINE_string("preset", None, "The agent's config preset, e.g. minatar (impala.config.PRESETS).")
flags.DEFINE_string("suite", None, "minatar, atari57, or FAMILY:GAME,FAMILY:GAME,... (dmlab30: not yet).")
flags.DEFINE_integer("seeds", 1, "Seeds per game: 0..N-1.")
flags.DEFINE_string("frames", None, "Frame budget of every run, e.g. 2e6.")
flags.DEFINE_string("suite_dir", "", "Suite directory; default runs/suites/<agent>_<preset>_<suite>.")
flags.DEFINE_integer("eval_episodes", 0, "Evaluation episodes per run; 0: the agent's paper protocol.")
flags.DEFINE_string("engine", "local", "Only `local` (--jobs at a time on this machine) for now; Ray is planned.")
flags.DEFINE_integer("jobs", 1, "Jobs at a time (local engine).")
flags.DEFINE_bool("dry_run", False, "List the jobs with their state and an estimated time; start nothing.")
flags.DEFINE_string("shard", "0/1", "I/N: run every N-th job from the I-th (0-based).")
flags.mark_flags_as_required(["agent", "preset", "suite", "frames"])
FLAGS = flags.FLAGS
POLL_S = 1.0


class _Running(NamedTuple):
    job: _plan.Job
    attempt: int
    process: subprocess.Popen
    log: pathlib.Path
    started: float


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    requested, shard = _requested(), _plan.parse_shard(FLAGS.shard)
    # Absolute, as the jobs run from the repository root.
    suite_dir = pathlib.Path(FLAGS.suite_dir or REPO_ROOT / "runs" / "suites" / _default_name()).resolve()
    saved = _plan.load_suite(suite_dir)
    _plan.check_same(saved, requested, suite_dir)
    requested = dataclasses.replace(requested, games=_plan.resolve_suite(FLAGS.suite))
    if saved is None:
        _check_preset(requested.agent, requested.preset)
    todo = _plan.jobs(requested, shard)
    if FLAGS.dry_run:
        _dry_run(todo, _plan.merge(saved, requested), suite_dir)
        return
    _plan.save_suite(_plan.merge(saved, requested), suite_dir)
    failed = _run_local(todo, requested, suite_dir)
    if failed:
        print(f"{len(failed)} job(s) failed twice: {', '.join(j.name for j in failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"suite {suite_dir}: all {len(todo)} job(s) done; aggregate with python -m reproduce.suite.aggregate")


def _requested() -> _plan.Suite:
    """The suite the flags ask for, without its games; the checks that need no import."""
    if FLAGS.engine != "local":
        raise UsageError(f"--engine={FLAGS.engine}: only `local` is supported for now (a Ray engine is planned)")
    if FLAGS.seeds < 1 or FLAGS.jobs < 1 or FLAGS.eval_episodes < 0:
        raise UsageError("--seeds and --jobs must be >= 1, --eval_episodes >= 0")
    frames = cli.parse_value("--frames", FLAGS.frames, 0)
    if frames < 1:
        raise UsageError(f"--frames={FLAGS.frames}: must be >= 1")
    _plan.check_suite_name(FLAGS.suite)
    return _plan.Suite(
        FLAGS.agent, FLAGS.preset, FLAGS.suite, (), tuple(range(FLAGS.seeds)), frames, FLAGS.eval_episodes
    )


def _default_name() -> str:
    label = FLAGS.suite if FLAGS.suite in _plan.SUITES else "-".join(_plan.game(s) for s in FLAGS.suite.split(","))
    return f"{FLAGS.agent}_{FLAGS.preset}_{label}"


def _check_preset(agent: str, preset: str) -> None:
    """The preset belongs to the agent (its config module imports TensorFlow, hence only for a new suite)."""
    presets = importlib.import_module(f"{_plan.AGENTS[agent]}.config").PRESETS
    if preset not in presets:
        raise choice_error(f"{agent} preset", preset, presets)


def _dry_run(todo: list[_plan.Job], suite: _plan.Suite, suite_dir: pathlib.Path) -> None:
    states = {job: _plan.state(suite_dir / job.name) for job in todo}
    for job, job_state in states.items():
        print(f"{job.name:32} {job_state:8} {suite_dir / job.name}")
    pending = sum(s != "done" for s in states.values())
    rate, source = _plan.frame_rate(suite, suite_dir)
    eta = _plan.estimate_s(pending, suite.frames, rate, FLAGS.jobs)
    print(
        f"{len(todo)} job(s): {len(todo) - pending} done, {pending} to run; about {_plan.duration(eta)} "
        f"with --jobs {FLAGS.jobs} at {rate:,.0f} frames/s per job ({source})"
    )


def _run_local(todo: list[_plan.Job], suite: _plan.Suite, suite_dir: pathlib.Path) -> list[_plan.Job]:
    """Runs the jobs `FLAGS.jobs` at a time, each retried once; returns those that failed twice."""
    pending = collections.deque()
    for job in todo:
        if _plan.state(suite_dir / job.name) == "done":
            print(f"{job.name}: done earlier, kept", flush=True)
        else:
            pending.append((job, 1))
    (suite_dir / "logs").mkdir(exist_ok=True)
    running, failed, durations, start = [], [], [], time.monotonic()
    total = len(pending)
    try:
        while pending or running:
            while pending and len(running) < FLAGS.jobs:
                running.append(_start(*pending.popleft(), suite, suite_dir))
            time.sleep(POLL_S)
            for item in [r for r in running if r.process.poll() is not None]:
                running.remove(item)
                _finished(item, pending, failed, durations)
                _progress(total, len(durations), len(running), len(pending), len(failed), durations, start)
    except KeyboardInterrupt:
        # The jobs got the Ctrl-C too: their runs save a checkpoint; wait for that.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for item in running:
            item.process.wait()
        print("interrupted: run the same command to resume", file=sys.stderr)
        sys.exit(130)
    return failed


def _start(job: _plan.Job, attempt: int, suite: _plan.Suite, suite_dir: pathlib.Path) -> _Running:
    package = _plan.AGENTS[suite.agent]
    train_flags = [f"--preset={suite.preset}", f"--env={job.env}", f"--seed={job.seed}", f"--frames={suite.frames}"]
    command = [sys.executable, "-m", "reproduce.suite._job", package, str(suite_dir / job.name)]
    command += [str(suite.eval_episodes), *train_flags]
    log = suite_dir / "logs" / f"{job.name}.log"
    with open(log, "a") as out:
        out.write(f"== attempt {attempt}: {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
    print(f"{job.name}: started (attempt {attempt}), log {log}", flush=True)
    return _Running(job, attempt, process, log, time.monotonic())


def _finished(item: _Running, pending: collections.deque, failed: list, durations: list) -> None:
    status = item.process.returncode
    if status == 0:
        durations.append(time.monotonic() - item.started)
        print(f"{item.job.name}: done", flush=True)
        return
    retry = item.attempt == 1
    print(
        f"{item.job.name}: failed with exit status {status} (attempt {item.attempt}), log {item.log}"
        + ("; retrying once" if retry else ""),
        file=sys.stderr,
        flush=True,
    )
    if retry:
        pending.append((item.job, 2))
    else:
        failed.append(item.job)


def _progress(total: int, done: int, running: int, pending: int, failed: int, durations: list, start: float) -> None:
    """One line: jobs done, running, failed, and an ETA from the mean duration of the finished ones."""
    eta = "?"
    if durations:
        eta = _plan.duration(sum(durations) / len(durations) * (running + pending) / FLAGS.jobs)
    elapsed = _plan.duration(time.monotonic() - start)
    print(f"jobs {done}/{total} done | {running} running | {failed} failed | {elapsed} elapsed | ETA {eta}", flush=True)


if __name__ == "__main__":
    cli.run(main)
