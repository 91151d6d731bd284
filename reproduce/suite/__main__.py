"""Benchmark suites: every (game, seed) trained and evaluated as an ordinary run directory.

    python -m reproduce.suite --agent impala --preset minatar --suite minatar --seeds 3 --frames 2e6 --jobs 2
    python -m reproduce.suite.aggregate runs/suites/impala_minatar_minatar

--agent impala|ddqn|laser runs `<impala|per|laser>.train` then `.evaluate`;
--suite is minatar (5 games), atari57, dmlab30 (IMPALA only: one multi-task
job per seed, scored on its 30 levels), or a list FAMILY:GAME,FAMILY:GAME,....
Job `<game>_s<seed>` (seeds 0..N-1) lives in
SUITE_DIR/<game>_s<seed>, its output in SUITE_DIR/logs/<game>_s<seed>.log;
SUITE_DIR/suite.json holds the suite's agent, preset, frames, games and seeds,
and a suite directory takes no other agent, preset, frames or evaluation.
Re-running the same command skips finished jobs (trained and evaluated) and
resumes started ones. A failed job is retried once; the others go on; the
exit status is 1 if a job failed twice. --dry_run lists the jobs and an
estimated time; --shard I/N runs every N-th job from the I-th (e.g. a Slurm
array).

--engine local (the default) runs --jobs K jobs at a time on this machine.
--engine ray --ray_address HEAD:PORT submits each job as a task to a running
Ray cluster (`ray start --head --port=PORT` on one machine, `ray start
--address=HEAD:PORT` on the others), declaring the CPUs of the preset's
learner and actors (1 + num_actors; --cpus_per_job overrides), and keeps as
many jobs in flight as the cluster's nodes hold. Every node must see the
repository, its .venv and the suite directory at the same paths (a shared
filesystem): a task runs the same job command as the local engine and writes
the same run directory and log.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import pathlib
import sys
import time
from typing import Any, NamedTuple

from absl import flags

from common import cli
from common.errors import UsageError, choice_error
from common.results import check_directory
from common.signals import StopRequested, raise_on_stop_signals, stops_deferred
from reproduce import REPO_ROOT
from reproduce.suite import _engines, _plan

flags.DEFINE_enum("agent", None, list(_plan.AGENTS), "Agent: impala, ddqn (prioritized Double DQN) or laser.")
flags.DEFINE_string("preset", None, "The agent's config preset, e.g. minatar (impala.config.PRESETS).")
flags.DEFINE_string(
    "suite", None, "minatar, atari57, dmlab30 (impala, one multi-task job per seed), or FAMILY:GAME,FAMILY:GAME,..."
)
flags.DEFINE_integer("seeds", 1, "Seeds per game: 0..N-1.")
flags.DEFINE_string("frames", None, "Frame budget of every run, e.g. 2e6.")
flags.DEFINE_string("suite_dir", "", "Suite directory; default runs/suites/<agent>_<preset>_<suite>.")
flags.DEFINE_integer("eval_episodes", 0, "Evaluation episodes per run; 0: the agent's paper protocol.")
flags.DEFINE_string("engine", "local", "local: --jobs at a time on this machine; ray: tasks on a Ray cluster.")
flags.DEFINE_integer("jobs", 1, "Jobs at a time (local engine).")
flags.DEFINE_string("ray_address", "", "HEAD:PORT of a running Ray cluster, as `ray start --head` prints (ray engine).")
flags.DEFINE_integer("cpus_per_job", 0, "CPUs a job declares to Ray; 0: the preset's learner + actors (ray engine).")
flags.DEFINE_bool("dry_run", False, "List the jobs with their state and an estimated time; start nothing.")
flags.DEFINE_string("shard", "0/1", "I/N: run every N-th job from the I-th (0-based).")
flags.mark_flags_as_required(["agent", "preset", "suite", "frames"])
FLAGS = flags.FLAGS
POLL_S = 1.0


class _Running(NamedTuple):
    job: _plan.Job
    attempt: int
    handle: Any  # The engine's: a subprocess (local) or a Ray task.
    log: pathlib.Path
    started: float
    fresh: bool  # Started from nothing: a resumed or evaluation-only job's time would shorten the ETA.


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    requested, shard = _requested(), _plan.parse_shard(FLAGS.shard)
    # Absolute, as the jobs run from the repository root.
    suite_dir = pathlib.Path(FLAGS.suite_dir or REPO_ROOT / "runs" / "suites" / _default_name()).resolve()
    saved = _plan.load_suite(suite_dir)
    if not FLAGS.dry_run:  # A dry run writes nothing, and may plan for other machines.
        check_directory(f"--suite_dir={suite_dir}", suite_dir)
    requested = dataclasses.replace(requested, games=_plan.resolve_suite(FLAGS.suite))
    _plan.check_same(saved, requested, suite_dir)
    if FLAGS.engine == "local" and not FLAGS.dry_run:  # A Ray cluster's nodes may have what this machine lacks.
        _plan.check_installed(requested.games)
    engine = _engine(requested)
    if saved is None:
        preset = _preset(requested.agent, requested.preset)
        if FLAGS.engine == "local" and not FLAGS.dry_run:
            check_fits(requested.agent, preset, requested.games)
    todo = _plan.jobs(requested, shard)
    if FLAGS.dry_run:
        _dry_run(todo, _plan.merge(saved, requested), suite_dir, engine.slots())
        return
    _plan.save_suite(_plan.merge(saved, requested), suite_dir)
    failed = _run(todo, requested, suite_dir, engine)
    if failed:
        print(f"{len(failed)} job(s) failed twice: {', '.join(j.name for j in failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"suite {suite_dir}: all {len(todo)} job(s) done; aggregate with python -m reproduce.suite.aggregate")


def _requested() -> _plan.Suite:
    """The suite the flags ask for, without its games; the checks that need no import."""
    _check_engine()
    for flag, value, least in (
        ("seeds", FLAGS.seeds, 1),
        ("jobs", FLAGS.jobs, 1),
        ("eval_episodes", FLAGS.eval_episodes, 0),
    ):
        if value < least:
            raise UsageError(f"--{flag}={value}: must be >= {least}")
    frames = cli.parse_value("--frames", FLAGS.frames, 0)
    if not 1 <= frames <= cli.MAX_FRAMES or not float(frames).is_integer():  # As each job's train checks it.
        raise UsageError(
            f"--frames={FLAGS.frames}: must be a whole number of frames in [1, {cli.MAX_FRAMES:g}], e.g. 2e6"
        )
    _plan.check_suite_name(FLAGS.suite, FLAGS.agent)
    return _plan.Suite(
        FLAGS.agent, FLAGS.preset, FLAGS.suite, (), tuple(range(FLAGS.seeds)), frames, FLAGS.eval_episodes
    )


def _check_engine() -> None:
    """--engine, and for Ray a reachable --ray_address, before anything imports Ray or writes to disk."""
    if FLAGS.engine not in _engines.ENGINES:
        raise choice_error("engine", FLAGS.engine, _engines.ENGINES)
    if FLAGS.engine == "local" and (FLAGS.ray_address or FLAGS.cpus_per_job):
        given = "--ray_address" if FLAGS.ray_address else "--cpus_per_job"
        raise UsageError(f"{given} is for --engine=ray; leave it out with --engine=local")
    if FLAGS.engine == "ray":
        if FLAGS["jobs"].present:  # Ray places as many jobs as its nodes' CPUs hold (`_engines.Ray.slots`).
            raise UsageError("--jobs is for --engine=local (Ray runs as many jobs as its CPUs hold); leave it out")
        if not FLAGS.ray_address:
            raise UsageError("--engine=ray needs --ray_address=HEAD:PORT of a running Ray cluster (`ray start --head`)")
        if FLAGS.cpus_per_job < 0:
            raise UsageError(f"--cpus_per_job={FLAGS.cpus_per_job}: must be >= 1, or 0 for the preset's own")
        _engines.check_reachable(FLAGS.ray_address)


def _engine(suite: _plan.Suite) -> _engines.Local | _engines.Ray:
    """The engine; Ray's joins the cluster and checks that a job fits a node (before the preset's TensorFlow
    import when --cpus_per_job is given)."""
    if FLAGS.engine == "local":
        return _engines.Local(FLAGS.jobs)
    if FLAGS.cpus_per_job:
        return _engines.Ray(FLAGS.ray_address, FLAGS.cpus_per_job, f"--cpus_per_job={FLAGS.cpus_per_job}")
    actors = _preset(suite.agent, suite.preset).num_actors
    asked = f"a job of preset {suite.preset} (its learner and {actors} actor(s), one CPU each)"
    return _engines.Ray(FLAGS.ray_address, 1 + actors, asked)


def _default_name() -> str:
    label = FLAGS.suite if FLAGS.suite in _plan.SUITES else "-".join(_plan.game(s) for s in FLAGS.suite.split(","))
    return f"{FLAGS.agent}_{FLAGS.preset}_{label}"


def check_fits(agent: str, preset: Any, games: tuple[str, ...]) -> None:
    """Each job's own check of the preset's network against its env's observations, once per env family.

    A preset made for another family failed every job of it, each after its
    start-up and a retry, and its suite.json then held the directory to it.
    """
    from common import networks  # TensorFlow: `_preset` has imported it already.

    presets = importlib.import_module(f"{_plan.AGENTS[agent]}.config").PRESETS
    for env in {_plan.family(game): game for game in games}.values():
        try:
            networks.check_fits_env(dataclasses.replace(preset, env=env))
        except UsageError:
            made_for = [name for name, config in presets.items() if _plan.family(config.env) == _plan.family(env)]
            raise UsageError(
                f"--preset={FLAGS.preset}: its network {preset.network!r} does not fit {env}'s observations; a suite "
                f"takes one preset, so give one made for {_plan.family(env)} ({', '.join(made_for) or 'none'}), "
                "a suite per env family"
            ) from None


def _preset(agent: str, preset: str) -> Any:
    """The agent's preset config, checking that it exists (its module imports TensorFlow, hence only for a new
    suite or a Ray job's CPUs)."""
    presets = importlib.import_module(f"{_plan.AGENTS[agent]}.config").PRESETS
    if preset not in presets:
        raise choice_error(f"{agent} preset", preset, presets)
    return presets[preset]


def _dry_run(todo: list[_plan.Job], suite: _plan.Suite, suite_dir: pathlib.Path, parallel: int) -> None:
    states = {job: _plan.state(suite_dir / job.name) for job in todo}
    for job, job_state in states.items():
        print(f"{job.name:32} {job_state:8} {suite_dir / job.name}")
    pending = sum(s != "done" for s in states.values())
    rate, source = _plan.frame_rate(suite, suite_dir)
    eta = _plan.estimate_s(pending, suite.frames, rate, parallel)
    print(
        f"{len(todo)} job(s): {len(todo) - pending} done, {pending} to run; about {_plan.duration(eta)} "
        f"with {parallel} at a time ({FLAGS.engine} engine) at {rate:,.0f} frames/s per job ({source})"
    )


def _run(todo: list[_plan.Job], suite: _plan.Suite, suite_dir: pathlib.Path, engine: Any) -> list[_plan.Job]:
    """Runs the jobs as many at a time as the engine holds, each retried once; returns those that failed twice."""
    pending = collections.deque()
    for job in todo:
        if _plan.state(suite_dir / job.name) == "done":
            print(f"{job.name}: done earlier, kept", flush=True)
        else:
            pending.append((job, 1))
    (suite_dir / "logs").mkdir(exist_ok=True)
    running, failed, durations, start = [], [], [], time.monotonic()
    total = len(pending)
    # The jobs run in sessions of their own: a signal reaches them only through the driver.
    raise_on_stop_signals()
    try:
        while pending or running:
            while pending and len(running) < engine.slots():
                with stops_deferred():  # A stop now must find the job in `running`.
                    running.append(_start(*pending.popleft(), suite, suite_dir, engine))
            time.sleep(POLL_S)
            for item, status in [(r, engine.status(r.handle)) for r in running]:
                if status is None:
                    continue
                running.remove(item)
                _finished(item, status, pending, failed, durations)
                counts = (total, len(durations), len(running), len(pending), len(failed))
                _progress(*counts, durations, start, engine.slots())
    except StopRequested as request:  # The jobs' runs save a checkpoint; wait for that.
        engine.interrupt([item.handle for item in running])
        print("interrupted: run the same command to resume", file=sys.stderr)
        sys.exit(request.exit_code)
    return failed


def _start(job: _plan.Job, attempt: int, suite: _plan.Suite, suite_dir: pathlib.Path, engine: Any) -> _Running:
    package = _plan.AGENTS[suite.agent]
    train_flags = [f"--preset={suite.preset}", f"--env={job.env}", f"--seed={job.seed}", f"--frames={suite.frames}"]
    command = [sys.executable, "-m", "reproduce.suite._job", package, str(suite_dir / job.name)]
    command += [str(suite.eval_episodes), *train_flags]
    log = suite_dir / "logs" / f"{job.name}.log"
    with open(log, "a") as out:
        out.write(f"== attempt {attempt}: {' '.join(command)}\n")
    fresh = _plan.state(suite_dir / job.name) == "todo"
    handle = engine.start(command, log)
    print(f"{job.name}: started (attempt {attempt}), log {log}", flush=True)
    return _Running(job, attempt, handle, log, time.monotonic(), fresh)


def _finished(item: _Running, status: int, pending: collections.deque, failed: list, durations: list) -> None:
    if status == 0:
        durations.append((time.monotonic() - item.started, item.fresh))
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


def _progress(
    total: int, done: int, running: int, pending: int, failed: int, durations: list, start: float, parallel: int
) -> None:
    """One line: jobs done, running, failed, and an ETA from the finished jobs' durations (`_plan.remaining_s`)."""
    eta_s = _plan.remaining_s(durations, running + pending, parallel)
    eta = "?" if eta_s is None else _plan.duration(eta_s)
    elapsed = _plan.duration(time.monotonic() - start)
    print(f"jobs {done}/{total} done | {running} running | {failed} failed | {elapsed} elapsed | ETA {eta}", flush=True)


if __name__ == "__main__":
    cli.run(main)
