"""Helpers for reproduce scripts that drive training runs (`python -m <agent>.train`).

A study keeps its runs under runs/reproduce/<study>_<profile>/<name>: a finished
run (with final.json) is kept, a started one is resumed, so an interrupted
study continues where it stopped. Reuse is never silent: a run is reused only
if it was started with the same flags, and the script says which run it
reuses and the commit that trained it. `--fresh` (`define_flags`) retrains:
the old run directory is moved aside, never deleted; a study remembers the
request per job (`ask_fresh`) until the job's run has retrained, so one
stopped part-way retrains the jobs it had not reached when run again without
`--fresh`. A study that offers
`--extend` (`reproduce.per.atari`, `reproduce.per.minatar`) trains a run started with a smaller
`--frames` on to the larger budget: resumed, its first segments kept, the
run's budget then its last segment's (`recorded_flags`).

A study too long for one sitting (`reproduce.per.minatar`, `reproduce.per.atari`)
keeps a summary per finished job in results/ (`summarise_run`, `write_summary`),
which is committed (the full profile's) where the runs are not; a job summarised earlier is not
trained again (`summary_kept`), and the study is rebuilt from every summary
present (`load_summaries`, `study_record`).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from absl import flags as absl_flags

from common import config as config_lib
from common import run_dir as run_dir_lib
from common.errors import UsageError
from common.signals import INTERRUPTED_EXIT_CODES, call_handing_on, exit_status, on_stop_signals
from reproduce import REPO_ROOT

# Flags of a training command that name where it runs, not what it trains.
_PLACEMENT_FLAGS = ("--run_dir", "--resume", "--overwrite")
# Flags that say which job a kept summary is: what trains, on what, for how
# long, from which seed. Overrides that change the maths are arms with names
# of their own; others (App. Fig. 10's TD-error snapshots) leave the job as it is.
_JOB_FLAGS = ("--preset", "--env", "--frames", "--seed")


def whole_budget(frames: float, episodes: int | None = None) -> int:
    """`frames` as a whole number, after checking it and the evaluation `episodes` (if any) are whole numbers >= 1.

    `--frames` is a float flag so that 5e7 is accepted; 0.5 or 0 is then a mistake, not "unset".
    """
    if not 1 <= frames <= config_lib.MAX_FRAMES or not float(frames).is_integer():
        raise UsageError(f"--frames={frames:g}: need a whole number >= 1 (at most {config_lib.MAX_FRAMES:g})")
    if episodes is not None and episodes < 1:
        raise UsageError(f"--eval_episodes={episodes}: need a whole number >= 1")
    return int(frames)


def counted(count: int, noun: str) -> str:
    """'1 episode', '2 episodes'."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def check_keeps_study(
    out: pathlib.Path, stem: str, games: list[str], seed: int, frames: int, eval_episodes: int | None = None
) -> None:
    """A `UsageError` if `out/stem.*`, a study whose tables hold only the runs of the command that wrote them,
    holds runs this command would drop or replace: a game it leaves out, another seed, budget or evaluation.

    Read from `stem.provenance.json` (its config per game, seeds, frames in all, evaluation episodes), so that a
    subset or a short check does not replace a committed study without a word. Asking for more games keeps it.
    """
    path = out / f"{stem}.provenance.json"
    if not path.exists():
        return
    held = json.loads(path.read_text())
    held_games = list(held.get("config") or {})
    differences = []
    if left_out := [g for g in held_games if g not in games]:
        differences.append(f"{', '.join(left_out)}, which --games={','.join(games)} leaves out")
    if held.get("seeds") not in (None, [seed]):
        differences.append(f"seed {', '.join(map(str, held['seeds']))}, not --seed={seed}")
    if held_games and held.get("frames") is not None and held["frames"] != frames * len(held_games):
        differences.append(f"{held['frames'] // len(held_games):,} frames a game, not {frames:,}")
    if eval_episodes is not None and held.get("eval_episodes") not in (None, eval_episodes):
        differences.append(f"{counted(held['eval_episodes'], 'evaluation episode')}, not {eval_episodes}")
    if differences:
        raise UsageError(
            f"{out / stem}.* hold {'; '.join(differences)}: this command would replace them with its own runs "
            f"only; ask for what they hold (finished runs are reused), or move {out / stem}.* aside first"
        )


def train(
    module: str, run_dir: pathlib.Path, flags: list[str], fresh: bool = False, extend: bool | None = None
) -> dict:
    """Runs (or resumes, or keeps) one run of `python -m module`; returns its final.json.

    `fresh`: the run directory, if any, is moved aside and the run starts anew.
    `extend`: a run started with a smaller `--frames` trains on to `flags`'
    (None: the script offers no `--extend`). A run is finished when its
    final.json reaches the budget asked: an extension interrupted before its
    end still holds the shorter budget's final.json, and is resumed.
    """
    command = training_command(module, run_dir, flags, fresh, extend)
    if command is not None:
        run_to_completion(command, run_dir, lambda: finished(run_dir, flags), fresh)
    forget_fresh(run_dir)
    return json.loads((run_dir / "final.json").read_text())


def resume_hint(fresh: bool, runs: str = "the run") -> str:
    """What resumes an interrupted run: the same command, less `--fresh`, which would set `runs` aside again.

    A run stopped in training says how to continue it alone (`continue with python -m ...`) just before; both
    go on from its checkpoint, but only the study summarises, so the hint says which is which (a new user's
    trial read two ways on and no word on which to take).
    """
    alone = "; a run's own 'continue with' line trains it alone, without the study's summary"
    if fresh:
        return (
            f"run this command again without --fresh to resume (it passes --resume to {runs}; --fresh starts "
            f"anew){alone}"
        )
    return f"run this same command again to resume (it passes --resume to {runs} itself){alone}"


def finished(run_dir: pathlib.Path, flags: list[str]) -> bool:
    """True once the run's final.json reaches the budget of `flags` (any budget, if they set none)."""
    return run_dir_lib.finished(run_dir, budget(flags))


def training_command(
    module: str, run_dir: pathlib.Path, flags: list[str], fresh: bool = False, extend: bool | None = None
) -> list[str] | None:
    """The command that starts or resumes `train`'s run; None if it has finished (it is reused)."""
    run_dir_lib.check_not_in_use(run_dir)  # Another study (or a hand-typed command) is training it now.
    if retrains_anew(run_dir, fresh):
        set_aside(run_dir)
    elif (run_dir / "final.json").exists() or (run_dir / "config.json").exists():
        check_same_flags(run_dir, flags, extend)
        done = finished(run_dir, flags)
        print(f"{run_dir.name}: {'reusing finished' if done else 'resuming'} {describe(run_dir)}", flush=True)
        if done:
            return None
    command = [sys.executable, "-m", module, *flags, f"--run_dir={run_dir}"]
    if (run_dir / "config.json").exists():
        command.append("--resume")
    return command


def train_jobs(
    module: str,
    jobs: dict[str, tuple[pathlib.Path, list[str]]],
    done: Callable[[str, dict], None],
    *,
    fresh: bool = False,
    extend: bool | None = None,
    parallel: int = 1,
) -> None:
    """`train`s every job (name -> run directory and flags), `parallel` at a time; `done(name, final)` as
    each finishes.

    One at a time, a job's output is the run's own. Several at a time, every
    line of a run's output is prefixed with its job's name; a run that fails
    stops the others (each saves its checkpoint), and Ctrl-C or SIGTERM reaches
    every run, as `run_to_completion` hands it to one. No job starts after either.
    `fresh` is remembered for every job (`ask_fresh`) until its run has
    retrained: run again without it, a stopped study resumes the runs it
    started and retrains the others anew.
    """
    if fresh:
        ask_fresh(run_dir for run_dir, _ in jobs.values())
    if parallel == 1:
        for name, (run_dir, flags) in jobs.items():
            done(name, train(module, run_dir, flags, fresh, extend))
        return
    commands = {name: training_command(module, *job, fresh, extend) for name, job in jobs.items()}
    for name in [name for name, command in commands.items() if command is None]:
        forget_fresh(jobs[name][0])
        done(name, json.loads((jobs[name][0] / "final.json").read_text()))
    together = _Together({name: c for name, c in commands.items() if c is not None}, parallel)
    with on_stop_signals(lambda signum, _: together.stop(signum)), contextlib.closing(together.run()) as exited:
        for name in exited:
            run_dir, flags = jobs[name]
            if finished(run_dir, flags):
                forget_fresh(run_dir)
                done(name, json.loads((run_dir / "final.json").read_text()))
    unfinished = [name for name, command in commands.items() if command is not None and not finished(*jobs[name])]
    if together.failure is not None:
        name, status = together.failure
        print(f"error: training {jobs[name][0]} failed with exit status {status}", file=sys.stderr, flush=True)
        sys.exit(status)
    if unfinished:
        # A run stopped while it started removes its directory: it keeps nothing, as one that never started.
        kept = [name for name in unfinished if name in together.started and jobs[name][0].exists()]
        started = [str(jobs[name][0]) for name in kept]
        waiting = [name for name in unfinished if name not in kept]
        said = [f"{', '.join(started)} " + ("keeps its checkpoint" if len(started) == 1 else "keep their checkpoints")]
        said = (said if started else []) + ([f"{', '.join(waiting)} did not start"] if waiting else [])
        again = resume_hint(fresh, "each run")
        if fresh and waiting:  # `ask_fresh` remembered them: their summaries are not kept.
            again += f"; it retrains {', '.join(waiting)} anew too, as --fresh asked"
        print(f"interrupted: {', and '.join(said)}; {again}", flush=True)
        sys.exit(together.status or 130)


class _Together:
    """Training commands run `parallel` at a time, their output prefixed with their names."""

    def __init__(self, commands: dict[str, list[str]], parallel: int):
        self._waiting, self._parallel = list(commands.items()), parallel
        self._running: dict[str, tuple[subprocess.Popen, threading.Thread]] = {}
        self.started: list[str] = []
        # Reentrant: `stop` runs as a signal handler, in the main thread, which may hold it.
        self._lock = threading.RLock()
        self.failure: tuple[str, int] | None = None  # The first job that failed, and its exit status.
        self.status = 0  # The stop signal's exit status (128 + it), once one came.

    def stop(self, signum: int) -> None:
        """Hands `signum` to every running command, and starts no other."""
        with self._lock:
            self.status = self.status or 128 + signum
            self._signal(signum)

    def run(self) -> Iterator[str]:
        """Runs the commands; yields each one's name as it exits without failing.

        Closed early (an error in the caller), it stops the running ones, each with its checkpoint.
        """
        try:
            while self._start_waiting():
                time.sleep(0.2)
                yield from self._exited()
        finally:
            with self._lock:
                self._signal(signal.SIGINT)
            for process, output in list(self._running.values()):
                process.wait()
                output.join()

    def _start_waiting(self) -> bool:
        """Starts commands up to `parallel` running, unless stopped; False when none runs."""
        with self._lock:
            while self._waiting and len(self._running) < self._parallel and not (self.status or self.failure):
                name, command = self._waiting.pop(0)
                print(f"{name}: {' '.join(command)}", flush=True)
                process = subprocess.Popen(
                    command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
                )
                output = threading.Thread(target=_prefix_lines, args=(name, process.stdout), daemon=True)
                output.start()
                self._running[name] = (process, output)
                self.started.append(name)
                if self.status:  # A stop handled since the start, before `_signal` could see this run.
                    process.send_signal(self.status - 128)
            return bool(self._running)

    def _exited(self) -> list[str]:
        """Takes the commands that have exited; the names of those that succeeded. A failure stops the rest."""
        succeeded = []
        for name, (process, output) in list(self._running.items()):
            if process.poll() is None:
                continue
            status = exit_status(process.returncode)
            output.join()  # Its last lines, before anything is said of it.
            with self._lock:
                del self._running[name]
                if status and status not in INTERRUPTED_EXIT_CODES and self.failure is None:
                    self.failure = (name, status)
                    self._signal(signal.SIGINT)  # Each other run saves its checkpoint and stops.
            if not status:
                succeeded.append(name)
        return succeeded

    def _signal(self, signum: int) -> None:
        for process, _ in self._running.values():
            if process.poll() is None:
                process.send_signal(signum)


def _prefix_lines(name: str, lines: Iterable[str]) -> None:
    for line in lines:
        print(f"{name}: {line}", end="" if line.endswith("\n") else "\n", flush=True)


def evaluate(module: str, run_dir: pathlib.Path, episodes: int, seed: int) -> dict:
    """Evaluates the run's latest checkpoint with `python -m module` (an agent's `evaluate`); returns its result.

    A finished run's evaluation of its final step with the same episodes and seed is reused, not repeated
    (a study run again, to rebuild its tables, once evaluated again and set the earlier result aside).
    """
    step = run_dir_lib.read_record(run_dir / "final.json").get("learner_steps")  # Every agent's `common.loop`'s.
    kept = run_dir_lib.read_record(run_dir / f"eval_step{step}.json") if step is not None else {}
    if (kept.get("episodes"), kept.get("seed")) == (episodes, seed):
        played = counted(episodes, "episode")
        print(
            f"reusing {run_dir / f'eval_step{step}.json'}: {played}, seed {seed}, at the run's final step", flush=True
        )
        return kept
    command = [sys.executable, "-m", module, str(run_dir), f"--episodes={episodes}", f"--seed={seed}"]
    # Its own session: a terminal's Ctrl-C reaches it once, from here (a second, mid-exit, could be a traceback),
    # and it ends with this process, never after.
    status, stop = call_handing_on(command, cwd=REPO_ROOT, start_new_session=True)
    if stop:
        print(f"interrupted: evaluating {run_dir} stopped; run this same command again", flush=True)
        sys.exit(128 + stop)
    if status:
        print(f"error: evaluating {run_dir} failed with exit status {status}", file=sys.stderr, flush=True)
        sys.exit(status)
    return json.loads(sorted(run_dir.glob("eval_step*.json"), key=lambda p: int(p.stem[9:]))[-1].read_text())


def started_flags(run_dir: pathlib.Path) -> list[str] | None:
    """The training flags the run in `run_dir` was first started with; None if it recorded no command."""
    return recorded_flags(run_provenance(run_dir))


def recorded_flags(record: dict | None) -> list[str] | None:
    """The training flags of a run's provenance `record`; None if it has no command.

    The flags it was first started with, but its last budget (`--frames`,
    as a whole number): an extended run's (`train`'s `extend`).
    """
    segments = recorded_segments(record)
    started = command_flags(segments[0].get("command"))
    if started is None:
        return None
    return but_budget(started) + [f"--frames={b}" for b in budgets(record)[-1:]]


def budgets(record: dict | None) -> list[int]:
    """The frame budgets a run's provenance `record` was trained to, in order: more than one if it was extended.

    A segment's own `total_frames` where recorded, else its command's `--frames`.
    A budget the next segment started short of (an extension interrupted, then
    resumed toward another budget) was never reached, and is left out; the
    last segment's is the run's budget either way.
    """
    segments = recorded_segments(record)
    found = [segment_budget(s) for s in segments]
    next_starts = [s.get("frames_at_start") for s in segments[1:]] + [None]
    reached = (b for b, start in zip(found, next_starts) if b is not None and (start is None or start >= b))
    return list(dict.fromkeys(int(b) for b in reached))


def segment_budget(segment: dict) -> int | None:
    """The budget one start of a run trained toward: its own `total_frames`, else its command's `--frames`."""
    found = segment.get("total_frames") or budget(command_flags(segment.get("command")) or [])
    return None if found is None else int(found)


def recorded_segments(record: dict | None) -> list[dict]:
    """A run provenance `record`'s segments (one per start); a record without them is its own one."""
    return (record or {}).get("segments") or [record or {}]


def sittings(summary: dict, up_to: int | None = None) -> int:
    """How many times a job's run was started, toward budget `up_to` or a smaller one if given: 1, plus one per resume.

    From the segments of its provenance (`run_provenance`); a run that recorded none started once. A start
    counts toward the budget it trained to (`segment_budget`), as `earlier_budgets` counts its wall time: a
    resume that only finished a budget is one of that budget's sittings.
    """
    segments = recorded_segments(summary.get("run_provenance"))
    if up_to is None:
        return len(segments)
    return max(1, sum(1 for segment in segments if (segment_budget(segment) or 0) <= up_to))


def command_flags(command: str | None) -> list[str] | None:
    """The flags of a recorded `python -m MODULE ...` command, as `--name=value`, without those that place the run."""
    if not command:
        return None
    return [flag for flag in all_flags(command) if not flag.startswith(_PLACEMENT_FLAGS)]


def all_flags(command: str) -> list[str]:
    """Every flag of a recorded `python -m MODULE ...` command, as `--name=value` (or `--name` alone)."""
    flags, words = [], shlex.split(command)[3:]  # After "python -m MODULE".
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue  # The value of the flag before it, joined to it below.
        if "=" not in word and i + 1 < len(words) and not words[i + 1].startswith("--"):
            word = f"{word}={words[i + 1]}"  # "--name value", as absl also takes it.
        flags.append(word)
    return flags


def budget(flags: list[str]) -> int | None:
    """The frame budget that training `flags` give (`--frames=N`, N maybe written 1e7); None without one."""
    values = [f.split("=", 1)[1] for f in flags if f.startswith("--frames=")]
    return int(float(values[-1])) if values else None


def normalized(flags: list[str]) -> list[str]:
    """`flags` with the budget written as a whole number (1e7 -> 10000000), as `recorded_flags` gives it."""
    goal = budget(flags)
    return but_budget(flags) + ([] if goal is None else [f"--frames={goal}"])


def check_same_flags(run_dir: pathlib.Path, flags: list[str], extend: bool | None = None) -> None:
    """Refuses to reuse a run started with other flags (another budget, preset, override...).

    With `extend`, a smaller budget is no other job: the run trains on.
    """
    started, flags = started_flags(run_dir), normalized(flags)
    if started is not None and sorted(started) != sorted(flags):
        if extend and extends(started, flags):
            return
        only_run, only_now = sorted(set(started) - set(flags)), sorted(set(flags) - set(started))
        hint = retrain_hint(started, flags, extend, "the old run is moved aside")
        if stopped_short(run_dir, started, flags):
            # Stopped on its way to a budget, then asked for a smaller one: finishing it keeps its training.
            go_on = f"--frames={budget(started)}" + (" --extend" if extend is not None else "")
            fresh = retrain_hint(started, flags, None, "the old run is moved aside")  # Not "trained past".
            hint = f"it stopped short of its {budget(started):,} frames: pass {go_on} to finish it, or {fresh}"
        raise UsageError(
            f"{run_dir} was trained with other flags (it has {' '.join(only_run) or 'none'}; this command asks "
            f"{' '.join(only_now) or 'none'}); {hint}"
        )


def stopped_short(run_dir: pathlib.Path, had: list[str], asks: list[str]) -> bool:
    """Whether the run in `run_dir`, started with `had`, stopped before its budget, and `asks` a smaller one only."""
    goal, final = budget(had), run_dir / "final.json"
    if goal is None or budget(asks) is None or budget(asks) >= goal or but_budget(had) != but_budget(asks):
        return False
    return not final.exists() or json.loads(final.read_text())["frames"] < goal


def extends(had: list[str], asks: list[str]) -> bool:
    """Whether the flags `asks` are `had`'s with a larger budget only."""
    old, new = budget(had), budget(asks)
    return old is not None and new is not None and new > old and but_budget(had) == but_budget(asks)


def but_budget(flags: list[str]) -> list[str]:
    """`flags` without `--frames`, sorted."""
    return sorted(f for f in flags if not f.startswith("--frames="))


def retrain_hint(
    had: list[str], asks: list[str], extend: bool | None, fresh_keeps: str, missing: tuple[str, str] | None = None
) -> str:
    """What to pass instead: `--fresh`, and `--extend` where the script offers it and it applies.

    `missing`: where the run `--extend` would train on is, and what to do,
    when it is not in this checkout (`missing_run`).
    """
    fresh = f"pass --fresh to retrain it ({fresh_keeps})"
    if extend is not None and extends(had, asks):
        if missing is not None:
            where, action = missing
            on = f"--extend would train it on to {budget(asks):,} frames from its last checkpoint"
            return f"{fresh}; {on}, {where}: {action}"
        return f"pass --extend to train it on to {budget(asks):,} frames, or {fresh.removeprefix('pass ')}"
    if extend is not None and extends(asks, had):
        return f"its run was trained past {budget(asks):,} frames, and a run is never cut back to fewer; {fresh}"
    return fresh


def describe(run_dir: pathlib.Path) -> str:
    """ "run R (commit C, N frames)": which run, and the commits that trained it (a sweep: its first started member)."""
    started = started_members(run_dir)
    segments = recorded_segments(run_provenance(started[0] if started else run_dir))
    commits = list(dict.fromkeys(str(s.get("commit", "unknown"))[:10] for s in segments))
    dirty = ", a dirty tree" if any(s.get("dirty") for s in segments) else ""
    final = run_dir / "final.json"
    frames = f", {json.loads(final.read_text())['frames']:,} frames" if final.exists() else ""
    return f"run {run_dir} (commit {' then '.join(commits)}{dirty}{frames})"


def sweep_members(run_dir: pathlib.Path) -> list[pathlib.Path]:
    """A sweep's member runs (`laser.sweep`'s `member_<i>`), in member order; none in a lone run's directory."""
    return sorted(run_dir.glob("member_*"), key=lambda member: int(member.name.split("_")[1]))


def started_members(run_dir: pathlib.Path) -> list[pathlib.Path]:
    """The `sweep_members` whose learner has started: each records its provenance then."""
    return [member for member in sweep_members(run_dir) if run_provenance(member)]


def summarised_records(summary: dict) -> list[dict]:
    """The run provenance records a job's summary holds: its run's, or each of its agents' (a LASER job's)."""
    records = [summary.get("run_provenance"), *(a.get("run_provenance") for a in summary.get("agents", []))]
    return [r for r in records if r]


def kept_summary(path: pathlib.Path) -> str:
    """ "PATH (commit C)": a job summary a study keeps, and the commits of the runs it came from."""
    # Every segment's: an extended run was trained by more than one commit.
    segments = [s for r in summarised_records(json.loads(path.read_text())) for s in recorded_segments(r)]
    commits = dict.fromkeys(str(s.get("commit", "unknown"))[:10] for s in segments)
    return f"{path} (commit {' and '.join(commits) or 'unknown'})"


def summary_kept(
    path: pathlib.Path,
    fresh: bool,
    flags: list[str],
    eval_episodes: int | None = None,
    extend: bool | None = None,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
    run_dir: pathlib.Path | None = None,
) -> bool:
    """Whether the job summarised in `path` is kept, not trained again; `say`s so.

    It exists, `fresh` is off and no earlier `--fresh` still asks the job
    in `run_dir` to retrain (`ask_fresh`).

    A summary is kept only for the job asked: its run's `_JOB_FLAGS` must be
    the job's training `flags`, and its evaluation the `eval_episodes` asked
    (if given); another budget, say, is a `UsageError` naming `--fresh`,
    except one the run was extended past (its summary's `earlier_budgets`).
    With `extend` a smaller budget is not kept: the job trains on (`train`),
    and its summary is replaced (None: the script offers no `--extend`).
    `run_dir`, if given, is where the job's run would be: a retraining there
    (`retraining`) is not kept but goes on, and a refusal that offers
    `--extend` says where the run is when it is not there.
    """
    if not path.exists():
        return False
    if fresh:  # Said, as for a remembered request: a fresh clone's committed summary is replaced too.
        say(f"{path.stem}: --fresh: it trains anew, and its summary will replace {kept_summary(path)}")
        return False
    summary = json.loads(path.read_text())
    if run_dir is not None and (asked := fresh_asked(run_dir)) is not None:
        if retrains_anew(run_dir, False):
            say(f"{path.stem}: --fresh asked at {asked} to retrain it: it trains anew, and its summary will replace "
                f"{kept_summary(path)} (delete {fresh_marker(run_dir)} to keep that one instead)")  # fmt: skip
        else:
            say(f"{path.stem}: {describe(run_dir)} retrains it as --fresh asked at {asked}: it goes on, and its "
                f"summary will replace {kept_summary(path)}")  # fmt: skip
        return False
    if run_dir is not None and retraining(run_dir, summary, flags):
        say(f"{path.stem}: {describe(run_dir)} started after the run of {kept_summary(path)}: it goes on, and its "
            "summary will replace that one")  # fmt: skip
        return False
    # A run that recorded no command is taken for the job it is named after.
    had = job_of(recorded_flags(summary.get("run_provenance")) or flags)
    asks = job_of(flags)
    if extend and extends(had, asks):
        say(f"{path.stem}: summarised at {budget(had):,} frames, extending to {budget(asks):,}")
        return False
    passed = {int(earlier["budget"]) for earlier in summary.get("earlier_budgets", [])}
    if budget(asks) in passed and but_budget(had) == but_budget(asks):  # Extended past it: its score is kept.
        say(f"{path.stem}: summarised at {budget(had):,} frames with its {budget(asks):,}, kept: {kept_summary(path)}")
        return True
    if eval_episodes is not None:
        had.append(counted(summary["eval"]["episodes"], "evaluation episode"))
        asks.append(counted(eval_episodes, "evaluation episode"))
    only_had, only_asks = sorted(set(had) - set(asks)), sorted(set(asks) - set(had))
    if only_had or only_asks:
        hint = retrain_hint(had, asks, extend, "the summary is replaced", run_dir and missing_run(run_dir, path, False))
        if None not in (budget(had), budget(asks)) and but_budget(had) == but_budget(asks):  # Another budget.
            raise UsageError(f"{path} summarises this job at {budget(had):,} frames, not {budget(asks):,}; {hint}")
        raise UsageError(
            f"{path} summarises another job (it has {', '.join(only_had) or 'none'}; this command asks "
            f"{', '.join(only_asks) or 'none'}); {hint}"
        )
    say(f"{path.stem}: summarised earlier, kept: {kept_summary(path)}")
    return True


def retraining(run_dir: pathlib.Path, summary: dict, flags: list[str]) -> bool:
    """Whether the job's summary is to be replaced: `--fresh` asked it and it has not been (`ask_fresh`), or
    `run_dir` holds a retraining of the job `flags` ask (its flags) started since the summarised run (`started_since`).

    As `--fresh` leaves one it stopped: that run goes on. A run of another
    budget (a retraining toward a larger one) leaves the summary to its own
    checks. A sweep's members record their learner's command, not the job's
    flags: any member started since makes it a retraining, as does none
    started yet (every member of a summarised sweep recorded its start).
    """
    if fresh_asked(run_dir) is not None:  # For `check_settings`: `summary_kept` says so first.
        return True
    summarised = [s.get("date_utc") for r in summarised_records(summary) for s in recorded_segments(r)]
    if (run_dir / "configs").is_dir():  # No member started: stopped before its first learner, as none summarised.
        return not started_members(run_dir) or started_since(run_dir, summarised)
    return started_since(run_dir, summarised) and job_of(started_flags(run_dir) or []) == job_of(flags)


def job_of(flags: list[str]) -> list[str]:
    """The flags of `flags` that name the job (`_JOB_FLAGS`), normalized and sorted."""
    return sorted(f for f in normalized(flags) if f.split("=")[0] in _JOB_FLAGS)


def started_since(run_dir: pathlib.Path, dates: list[str | None], at_or_after: bool = False) -> bool:
    """Whether `run_dir` holds a run first started after every one of `dates` (UTC, ISO 8601).

    A retraining (`--fresh`) interrupted before it replaced a summary whose
    runs started at `dates`: the job's run goes on rather than the summary
    being kept. A run older than them (one it replaced, or an abandoned start)
    does not. A sweep's directory (LASER's, with its `configs`) holds its
    members' runs: it started since if a member did. `at_or_after`: a run
    started in the second of a date counts (a `--fresh` request's, which a
    run started by it may share).
    """
    if (run_dir / "configs").is_dir():
        return any(started_since(member, dates, at_or_after) for member in started_members(run_dir))
    record = run_provenance(run_dir)
    started = recorded_segments(record)[0].get("date_utc") if record else None
    if started is None or not dates or None in dates:
        return False
    first = datetime.datetime.fromisoformat(started)
    return all(first >= d if at_or_after else first > d for d in map(datetime.datetime.fromisoformat, dates))


def fresh_marker(run_dir: pathlib.Path) -> pathlib.Path:
    """Where `ask_fresh` remembers a job's `--fresh`: `<name>.fresh` beside its run directory."""
    return run_dir.with_name(f"{run_dir.name}.fresh")


def ask_fresh(run_dirs: Iterable[pathlib.Path]) -> None:
    """Remembers that `--fresh` asked the jobs in `run_dirs` to retrain, until each one's run has.

    A study stopped part-way is resumed without `--fresh` (which would set the
    stopped run aside again); the jobs it had not reached must still retrain,
    not keep their old summaries or finished runs. `forget_fresh` clears a
    job's request once its run finishes (`train`, `train_jobs`; LASER's
    sweeps once summarised).
    """
    run_dirs = list(run_dirs)
    for run_dir in run_dirs:  # A refused --fresh remembers nothing: the next plain command would retrain.
        check_idle(run_dir)
    asked = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for run_dir in run_dirs:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        written = run_dir.with_name(f"{run_dir.name}.fresh.part")
        written.write_text(asked + "\n")
        os.replace(written, fresh_marker(run_dir))  # Whole or not at all.


def fresh_asked(run_dir: pathlib.Path) -> str | None:
    """When `--fresh` asked the job in `run_dir` to retrain (`ask_fresh`), if its run has not retrained since."""
    marker = fresh_marker(run_dir)
    if not marker.exists():
        return None
    asked = marker.read_text().strip()
    try:
        datetime.datetime.fromisoformat(asked)
    except ValueError:
        raise UsageError(f"{marker} holds no time --fresh was asked ({asked!r}): delete it, or pass --fresh") from None
    return asked


def forget_fresh(run_dir: pathlib.Path) -> None:
    """The job in `run_dir` retrained as `--fresh` asked."""
    fresh_marker(run_dir).unlink(missing_ok=True)


def retrains_anew(run_dir: pathlib.Path, fresh: bool) -> bool:
    """Whether the job's run in `run_dir` is set aside and starts anew.

    With `fresh`, or when `--fresh` asked it earlier (`ask_fresh`) and no run
    has started in `run_dir` since: one that has is that retraining, resumed.
    """
    asked = fresh_asked(run_dir)
    return fresh or (asked is not None and not started_since(run_dir, [asked], at_or_after=True))


def jobs_to_train(
    jobs: dict[str, list[str]],
    summaries: pathlib.Path,
    runs: pathlib.Path,
    fresh: bool,
    extend: bool,
    eval_episodes: int | None = None,
) -> list[str]:
    """The names of `jobs` (name -> training flags) that need training: neither summarised nor kept.

    Every job is checked before any trains, so a refusal (another job's
    summary or run, an extension whose run is not on this machine) comes now,
    not after hours of training the jobs before it; what is kept or extended
    is said once every job has passed, so a refusal is the only line.
    """
    names, notices, refusals = [], [], {}
    for name, flags in jobs.items():
        summary = summaries / f"{name}.json"
        try:
            if summary_kept(summary, fresh, flags, eval_episodes, extend, notices.append, runs / name):
                continue
            if not retrains_anew(runs / name, fresh):
                if extend and summary.exists():  # Not kept: a smaller budget, to train on.
                    check_resumable(runs / name, summary)
                check_same_flags(runs / name, flags, extend)
            elif extend:  # An earlier --fresh's: its old run is not the one to train on.
                raise UsageError(
                    f"{name}: --fresh asked at {fresh_asked(runs / name)} to retrain it, and --extend trains its "
                    f"run on: run without --extend to retrain it, or delete {fresh_marker(runs / name)} first"
                )
        except UsageError as refusal:
            refusals[name] = refusal
        names.append(name)
    if refusals:
        first, *others = refusals
        raise UsageError(str(refusals[first]) + (f" (refused too: {', '.join(others)})" if others else ""))
    for notice in notices:
        print(notice, flush=True)
    return names


def extended(rows: list[dict]) -> list[str]:
    """A study table's note on its runs trained on to a larger budget (`--extend`), if any.

    `rows` carry `game`, `variant`, `seed` and `budgets` (the budgets the run
    had reached at the row's, space-separated): a run with a row per budget
    (`at_each_budget`) is named once, by its row of the most.
    """
    latest: dict[tuple, dict] = {}
    for row in rows:
        job = (row["game"], row["variant"], row["seed"])
        if job not in latest or len(row["budgets"].split()) > len(latest[job]["budgets"].split()):
            latest[job] = row
    runs = [r for r in latest.values() if " " in r["budgets"]]
    if not runs:
        return []
    trained = "; ".join(
        f"{r['game']} {r['variant']} seed {r['seed']}: to {', then '.join(f'{int(b):,}' for b in r['budgets'].split())}"
        for r in runs
    )
    return [
        "",
        f"Trained on to a larger budget (resumed from the last checkpoint): {trained} frames. A resume with a "
        "larger budget takes an annealed beta (the prioritized variants') from its value then to 1 at the new "
        "budget (so it stays 1 in a run extended after it finished); epsilon's schedule counts agent steps and "
        "is not affected.",
    ]


def check_resumable(run_dir: pathlib.Path, summary: pathlib.Path) -> None:
    """Refuses to extend the job `summary` describes when `run_dir` holds no run: it would train anew, not on."""
    missing = missing_run(run_dir, summary, extending=True)
    if missing is None:
        return
    where, action = missing
    raise UsageError(
        f"{run_dir} holds no run to train on (no config.json): --extend resumes {summary.stem} from its last "
        f"checkpoint, {where}; {action}, or pass --fresh to train anew"
    )


def missing_run(run_dir: pathlib.Path, summary: pathlib.Path, extending: bool) -> tuple[str, str] | None:
    """Where the run of the job `summary` describes is, and what to do, when `run_dir` holds none; else None.

    `extending`: the command already passes `--extend`.
    """
    if (run_dir / "config.json").exists():
        return None
    where = trained_in(summary)
    if where is not None and pathlib.Path(where).resolve() == run_dir.resolve():
        # Trained here: the run was moved or deleted since, and no other checkout has it.
        return "which was here and is gone", "restore it there" + ("" if extending else ", then pass --extend")
    elsewhere = f"which was in {where or 'the runs/ of the machine that trained it'}"
    return elsewhere, ("run" if extending else "pass --extend") + " from the checkout that holds it"


def trained_in(summary: pathlib.Path) -> str | None:
    """The run directory that the run of a job `summary` was first started in, if its record says."""
    command = recorded_segments(json.loads(summary.read_text()).get("run_provenance"))[0].get("command")
    places = [f.split("=", 1)[1] for f in all_flags(command or "") if f.startswith("--run_dir=")]
    return places[0] if places else None


def changed_settings(recorded: dict, current: Any) -> list[str]:
    """`name recorded -> now` for each field of the config `current` that a summary's `recorded` config
    differs in, the operational ones aside (`common.config.OPERATIONAL_FIELDS`).

    A field the record lacks (added since) counts at its default, which is what
    the run used.
    """
    now = json.loads(json.dumps(dataclasses.asdict(current), default=str))
    defaults = json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(current)}, default=str))
    was = {**defaults, **recorded}
    return [
        f"{name} {was[name]!r} -> {value!r}"
        for name, value in now.items()
        if name not in config_lib.OPERATIONAL_FIELDS and was[name] != value
    ]


def job_config(flags: list[str], presets: dict[str, Any], what: str) -> Any:
    """The config that an agent's `train` resolves a job's `flags` to, with today's `presets`.

    `flags`: a study's job flags, `--preset`, `--env`, `--frames` and `--seed`
    each once, and any number of `--config_override`s.
    """
    pairs = [flag.removeprefix("--").split("=", 1) for flag in flags]
    named = {name: value for name, value in pairs if name != "config_override"}
    request = config_lib.Request(
        preset=named["preset"], env=named["env"], frames=float(named["frames"]), seed=int(named["seed"]),
        overrides=tuple(value for name, value in pairs if name == "config_override"),
    )  # fmt: skip
    return config_lib.resolve(presets, named["preset"], request, what)


def summary_changes(summary: dict, config: Any) -> list[str]:
    """`changed_settings` of a job summary against its config today, or a sweep's against its members' configs.

    A sweep's summary records each member's config (`agents`); a change every
    member shares is named once.
    """
    recorded = [agent["config"] for agent in summary["agents"]] if "agents" in summary else [summary["config"]]
    expected = config if isinstance(config, list) else [config]
    if len(recorded) != len(expected):
        return [f"{len(recorded)} runs -> {len(expected)}"]
    changes = (change for was, now in zip(recorded, expected) for change in changed_settings(was, now))
    return list(dict.fromkeys(changes))


def check_settings(
    summaries: pathlib.Path,
    configs: dict[str, Any],
    runs: pathlib.Path | None = None,
    flags_of: dict[str, list[str]] | None = None,
) -> None:
    """Refuses when a job's summary was trained with other settings than the job's preset now gives.

    `configs`: job name -> the config its flags resolve to today, or a list of
    them for a job of several runs (a sweep's members, in order). Without this
    a preset fixed since the run (an optimizer, say) would keep the old run's
    score as the new preset's, the job's flags being the same. A job whose
    run in `runs` is a retraining (`retraining`, its flags in `flags_of`) is
    not refused: the summary it will replace is not kept.
    """
    refused = {}
    for name, config in configs.items():
        path = summaries / f"{name}.json"
        if not path.exists():
            continue
        summary = json.loads(path.read_text())
        if runs is not None and flags_of is not None and retraining(runs / name, summary, flags_of[name]):
            continue
        if changes := summary_changes(summary, config):
            refused[name] = f"{path} was trained with other settings than its preset now gives ({'; '.join(changes)})"
    if refused:
        first, *others = refused
        also = f" (and {', '.join(others)})" if others else ""
        raise UsageError(f"{refused[first]}{also}; pass --fresh to retrain (the summary is replaced)")


def job_name(game: str, variant: str, seed: int) -> str:
    """A job's name in a study of games x variants x seeds: its summary's stem and its run directory's name."""
    return f"{game}_{variant}_s{seed}"


def summarise_run(run_dir: pathlib.Path, final: dict, curve_points: int = 200) -> dict:
    """What a job summary keeps of a finished training run: its budget, last-100 return, curve, config and record.

    The curve is the 100-episode trailing mean at up to `curve_points` episodes.
    """
    frames, returns = read_episodes(run_dir)
    return {
        "frames": final["frames"], **episode_scores(frames, returns, curve_points),
        "wall_time_s": final.get("wall_time_s"),
        "config": run_config(run_dir),
        "run_provenance": run_provenance(run_dir),
    }  # fmt: skip


def episode_scores(frames: np.ndarray, returns: np.ndarray, curve_points: int = 200) -> dict:
    """The episodes' count, last-100 mean return and curve (the trailing mean at up to `curve_points` episodes)."""
    trailing = trailing_mean(returns, 100)
    # From the 100th episode on: a trailing mean over fewer episodes is mostly noise.
    points = np.unique(np.linspace(min(99, len(returns) - 1), len(returns) - 1, curve_points).astype(int))
    points = points[points >= 0]  # A run that finished no episode has no curve.
    return {
        "episodes": len(returns),
        "last100": round(float(returns[-100:].mean()), 3) if len(returns) else None,
        "curve": {"frames": frames[points].astype(int).tolist(), "trailing100": trailing[points].round(3).tolist()},
    }


def earlier_budgets(run_dir: pathlib.Path, curve_points: int = 200) -> list[dict]:
    """A run trained on to a larger budget (`--extend`): its scores at each budget it reached before its last.

    Each is what that budget's own summary held: the episodes logged up to
    the frames the next segment resumed from, and the wall time of the
    segments before it. So an extended run's earlier results stay in the
    study, not only in its curve.
    """
    record = run_provenance(run_dir)
    segments = recorded_segments(record)
    frames, returns = read_episodes(run_dir)
    scores = []
    for reached in budgets(record)[:-1]:
        # The first start toward a larger budget: a start that only finished this one (killed after its
        # last checkpoint, before final.json) is still this budget's, and so is its wall time.
        resumed = next(i for i, s in enumerate(segments) if (segment_budget(s) or 0) > reached)
        end = segments[resumed]["frames_at_start"]
        before = frames <= end
        wall_time_s = sum(s.get("wall_time_s") or 0.0 for s in segments[:resumed])
        scores.append({
            "budget": reached, "frames": int(end), **episode_scores(frames[before], returns[before], curve_points),
            "wall_time_s": round(wall_time_s, 1),
        })  # fmt: skip
    return scores


def at_each_budget(summaries: list[dict]) -> list[dict]:
    """Each job summary as it reads at every budget its run reached, earliest first; `budgets` set on each.

    A summary without `earlier_budgets` (a run of one budget) is itself. Each
    view's curve is `run_curve`'s up to its frames, so the rows of one run
    agree: a later budget's peak is at least an earlier's, its first crossing
    of a score no later.
    """
    views = []
    for summary in summaries:
        trained_to = budgets(summary.get("run_provenance")) or [summary["frames"]]
        for earlier in summary.get("earlier_budgets", []):
            view = {**summary, **earlier, "budgets": [b for b in trained_to if b <= earlier["budget"]]}
            views.append({**view, "curve": run_curve(summary, up_to=earlier["frames"], first=earlier["curve"])})
        views.append({**summary, "budgets": trained_to, "curve": run_curve(summary)})
    return views


def run_curve(summary: dict, up_to: int | None = None, first: dict | None = None) -> dict:
    """The run's trailing-mean curve from every curve its summary holds, up to `up_to` frames (default: its own).

    `episode_scores` thins each curve to its points, spread over the episodes
    of its own budget, so the curve at 2M frames and the one `earlier_budgets`
    kept at 1M sample the same trailing mean at different episodes: a peak or
    crossing one of them holds, the other may miss. Merged, they miss fewer.
    A frame held twice keeps `first`'s point (default: the summary's curve).
    """
    up_to = summary["frames"] if up_to is None else up_to
    curves = [first or summary["curve"], summary["curve"], *(e["curve"] for e in summary.get("earlier_budgets", []))]
    points: dict[int, float] = {}
    for curve in curves:
        for frames, trailing in zip(curve["frames"], curve["trailing100"]):
            if frames <= up_to:
                points.setdefault(frames, trailing)
    ordered = sorted(points)
    return {"frames": ordered, "trailing100": [points[f] for f in ordered]}


def run_config(run_dir: pathlib.Path) -> dict:
    """The run's config.json as it last trained: with the budget of its latest start.

    A run keeps the config.json it was started with; a resume that raised
    its budget (`--extend`) records the new one in its provenance only.
    """
    config = json.loads((run_dir / "config.json").read_text())
    if "total_frames" in config:
        config["total_frames"] = run_dir_lib.last_budget(run_dir) or config["total_frames"]
    return config


def write_summary(directory: pathlib.Path, name: str, summary: dict, run_dir: pathlib.Path) -> None:
    """Writes a job's summary, `directory/<name>.json`, and beside it its run's own record; says so.

    The run's record (commit, command, segments) is copied: the run directory itself is not committed.
    """
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    (directory / f"{name}.provenance.json").write_text((run_dir / "provenance.json").read_text())
    print(f"{name}: summarised into {shown(directory / f'{name}.json')}", flush=True)


def check_extend(fresh: bool, extend: bool, frames: float | None) -> None:
    """`--extend` trains summarised runs on to the budget `--frames` names: refused beside `--fresh`, or without one.

    Without `--frames` the profile's own budget is asked, which its summaries
    already reach, so the command would only rebuild the tables: a slip, said
    before anything is written.
    """
    if fresh and extend:
        raise UsageError("--fresh retrains from the start and --extend trains on: pass one of them")
    if extend and frames is None:
        raise UsageError(
            "--extend trains summarised runs on to a larger budget: name it with --frames, e.g. --frames 5e6"
        )


def check_summarise_only(
    fresh: bool, extend: bool = False, frames: float | None = None, choosing: Iterable[str] = ()
) -> None:
    """`--summarise_only` trains nothing: refused beside a flag that says how to train, how far, or which runs.

    `choosing`: the flags that choose or shape the runs to train (e.g. --games),
    refused if given, because the tables are built from every summary present.
    """
    given = [flag for flag, on in (("--fresh", fresh), ("--extend", extend)) if on]
    if len(given) == 1:
        raise UsageError(f"--summarise_only trains nothing, {given[0]} trains: pass one of them")
    if given:
        raise UsageError("--summarise_only trains nothing, --fresh and --extend train: pass --summarise_only alone")
    if frames is not None:  # Each summary is tabled at its own budget; a --frames here would be ignored.
        raise UsageError(
            f"--summarise_only tables every summary present at its own budget: --frames={frames:g} would change "
            "nothing; drop it"
        )
    chosen = [f"--{name}" for name in choosing if absl_flags.FLAGS[name].present]
    if chosen:
        one = len(chosen) == 1
        raise UsageError(
            f"--summarise_only tables every summary present; {', '.join(chosen)} "
            f"{'chooses or shapes' if one else 'choose or shape'} runs to train: drop {'it' if one else 'them'}"
        )


def summaries_to_build(directory: pathlib.Path, runs: pathlib.Path | None = None) -> list[dict]:
    """`--summarise_only`'s summaries: every one in `directory`; none is a usage error, not an empty table.

    A job that `--fresh` asked to retrain and that has not (`ask_fresh`, in `runs`) is named: its row is the old one.
    """
    summaries = load_summaries(directory)
    if not summaries:
        raise UsageError(
            f"--summarise_only: no job summaries in {shown(directory)}/ to build the tables from; train a job first"
        )
    for marker in sorted(runs.glob("*.fresh")) if runs is not None else []:
        summary = directory / f"{marker.stem}.json"
        row = f"the tables use its old summary, {shown(summary)}" if summary.exists() else "it has no summary"
        print(f"{marker.stem}: --fresh asked at {fresh_asked(runs / marker.stem)} has not retrained it yet; {row}")
    return summaries


def load_summaries(directory: pathlib.Path) -> list[dict]:
    """The job summaries in `directory`, by name (not the run records beside them)."""
    paths = [p for p in sorted(directory.glob("*.json")) if not p.name.endswith(".provenance.json")]
    return [json.loads(p.read_text()) for p in paths]


def study_record(jobs: dict[str, dict], scale: str, start: float, directory: pathlib.Path) -> dict:
    """`provenance.write`'s fields for a study assembled from job summaries (`jobs`, by job name).

    Its wall time is the jobs' own (their summaries'), not the assembly's, which `start` (its `time.time()`) gives;
    each run's own record comes along, and each summary file in `directory` is named with its SHA-256, so a
    table says which versions of its summaries it was built from.
    """
    summaries = jobs.values()
    return {
        "config": {name: s["config"] for name, s in jobs.items()},
        "seeds": sorted({s["seed"] for s in summaries}), "frames": sum(s["frames"] for s in summaries),
        "wall_time_s": sum(s["wall_time_s"] or 0.0 for s in summaries), "scale": scale,
        "extra": {
            "assembled_in_s": round(time.time() - start, 1),
            "summary_files": {name: summary_file(directory / f"{name}.json") for name in jobs},
            "run_provenance": {name: s["run_provenance"] for name, s in jobs.items()},
        },
    }  # fmt: skip


def summary_file(path: pathlib.Path) -> dict[str, str]:
    """A job summary's path (from the repository's root, where it lies inside it) and the SHA-256 of its bytes."""
    return {"path": str(shown(path)), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def print_written(out: pathlib.Path, since: float) -> None:
    """One line naming the files of `out` that this command wrote (modified since `since`), for a reader to open."""
    written = sorted(p.name for p in out.iterdir() if p.is_file() and p.stat().st_mtime >= since)
    print(f"wrote {shown(out)}/: {', '.join(written) if written else 'nothing'}", flush=True)


def shown(path: pathlib.Path) -> pathlib.Path:
    """`path` as a reader finds it: from the repository's root where it lies inside it, else as it is."""
    path = path.resolve()
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


def check_idle(run_dir: pathlib.Path) -> None:
    """A `UsageError` while a process trains into `run_dir` or into a run inside it (a sweep's members)."""
    if run_dir.exists():
        for directory in (run_dir, *(config.parent for config in run_dir.rglob("config.json"))):
            run_dir_lib.check_not_in_use(directory)


def set_aside(run_dir: pathlib.Path) -> pathlib.Path | None:
    """Moves `run_dir` to `<name>.old-<UTC time>` beside it (if it exists); returns where.

    Refused while a process trains into it, or into a run inside it (a sweep's members).
    """
    if not run_dir.exists():
        return None
    check_idle(run_dir)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = run_dir.with_name(f"{run_dir.name}.old-{stamp}")
    run_dir.rename(aside)
    print(f"{run_dir.name}: --fresh: the old run is kept in {aside}", flush=True)
    return aside


def run_to_completion(
    command: list[str], run_dir: pathlib.Path, finished: Callable[[], bool], fresh: bool = False
) -> None:
    """Runs `command` (a training run or sweep writing into `run_dir`) until `finished()`.

    Ctrl-C or SIGTERM, to this process alone or to its group, is handed to
    the training run, which saves a checkpoint and returns unfinished; this
    process waits for it, then exits with the run's status (128 + the signal)
    and says how to continue (`resume_hint`: without `--fresh`, if the command
    had it). A failed run exits with its status.
    """
    print(" ".join(command), flush=True)
    # A terminal's Ctrl-C reaches the run twice, from the terminal and from here; its second changes nothing.
    status, _ = call_handing_on(command, cwd=REPO_ROOT)
    if status and status not in INTERRUPTED_EXIT_CODES:
        print(f"error: training {run_dir} failed with exit status {status}", file=sys.stderr, flush=True)
        sys.exit(status)
    if not finished():
        # A study's later jobs: `ask_fresh` remembered them.
        rest = "; it retrains anew the jobs --fresh asked that have not retrained yet" if fresh else ""
        if run_dir.exists():
            print(f"interrupted: {run_dir} keeps its checkpoint; {resume_hint(fresh)}{rest}", flush=True)
        elif fresh:  # Again with --fresh, the jobs this command retrained would retrain once more.
            print(f"interrupted: {run_dir} did not start; run this command again without --fresh to start it{rest}",
                  flush=True)  # fmt: skip
        else:  # Stopped while it started: a run removes the directory of a start that did not happen.
            print(f"interrupted: {run_dir} did not start; run this same command again to start it", flush=True)
        sys.exit(status or 130)


def wall_time(finals) -> float:
    """A study's wall time: the sum of its runs' own (final.json's, over all their segments), not its assembly's."""
    return sum(final.get("wall_time_s") or 0.0 for final in finals)


def run_provenance(run_dir: pathlib.Path) -> dict | None:
    """The provenance the training run recorded when it (last) started."""
    path = run_dir / "provenance.json"
    return json.loads(path.read_text()) if path.exists() else None


def read_episodes(run_dir: pathlib.Path) -> tuple[np.ndarray, np.ndarray]:
    """Frames at which training episodes ended, and their returns."""
    with open(run_dir / "episodes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return np.array([float(r["frames"]) for r in rows]), np.array([float(r["episode_return"]) for r in rows])


def trailing_mean(x: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values (fewer at the start) at each index."""
    sums = np.concatenate([[0.0], np.cumsum(x)])
    end = np.arange(1, len(x) + 1)
    begin = np.maximum(0, end - window)
    return (sums[end] - sums[begin]) / (end - begin)


def binned_curve(name: str, frames: np.ndarray, returns: np.ndarray, total: int, bin_frames: int) -> list[dict]:
    """Mean training return per `bin_frames` frames, as CSV rows.

    Episodes logged at or past `total` (a run's last learner step overshoots its
    budget) count in the last bin: on their own they would be a bin of a few
    episodes, as noisy as it is late.
    """
    bins = np.arange(0, total + bin_frames, bin_frames)
    index = np.minimum(np.digitize(frames, bins), len(bins) - 1)
    return [
        {"run": name, "frames": int(bins[b - 1]), "mean_return": round(float(returns[index == b].mean()), 3)}
        for b in np.unique(index)
    ]
