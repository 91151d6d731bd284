"""A training run's directory: config, provenance, episodes, TensorBoard, checkpoints.

    RUN_DIR/config.json       the resolved config, written once when the run is created
    RUN_DIR/provenance.json   machine, and one segment per start: commit, command, seed, wall time
    RUN_DIR/episodes.csv      frames,episode_return,episode_length,wall_time[,task]
    RUN_DIR/tasks.json        a multi-task run's per-task episodes and mean returns
    RUN_DIR/tb/               TensorBoard summaries
    RUN_DIR/checkpoints/      tf.train.CheckpointManager files
    RUN_DIR/final.json        written when the frame budget is reached

The contract: an existing run directory is never touched unless the caller
resumes it (`--resume`: its own config.json, never rewritten) or asks to
overwrite it (only a directory holding a run's config.json); a start that fails
before training removes what it created, and puts back a run it was to overwrite.
A run directory belongs to one training process at a time (`hold`): a second
start on a run that is training is refused before it reads or removes anything.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import dataclasses
import fcntl
import json
import os
import pathlib
import re
import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from common import config as config_lib
from common import provenance, results
from common.errors import UsageError

if TYPE_CHECKING:
    import tensorflow as tf

EPISODE_FIELDS = ("frames", "episode_return", "episode_length", "wall_time")

# The run directories this process trains into, and the descriptors that lock them.
_HELD: dict[pathlib.Path, int] = {}


_IN_USE = (
    "run directory {path} is in use: another process is training into it; let it finish or stop it "
    "(Ctrl-C saves a checkpoint), then run this again"
)


def _lock(path: pathlib.Path, in_use: str) -> int:
    """An exclusive `flock` on the directory `path` itself (nothing is written into it); its descriptor.

    The kernel drops the lock when the process ends, however it ends. A
    `UsageError`, `in_use` with `path` filled in, if another process holds it.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(in_use.format(path=path)) from None
    return fd


def hold(path: pathlib.Path, in_use: str = _IN_USE) -> None:
    """Marks the run directory `path` as this process's until it exits; a `UsageError` (`in_use`) if another's.

    Two processes training into one run (a command typed twice, two studies
    launching one job) would interleave their checkpoints, replay and
    episodes, and an `--overwrite` would delete a run under its trainer. (A
    server's --tables_dir is held the same way, with its own message.)
    """
    key = path.resolve()
    if key not in _HELD:
        _HELD[key] = _lock(key, in_use)


def release(path: pathlib.Path) -> None:
    """Gives up `hold` on `path` (a start that failed, or a directory about to be replaced)."""
    fd = _HELD.pop(path.resolve(), None)
    if fd is not None:
        os.close(fd)


def check_not_in_use(path: pathlib.Path, in_use: str = _IN_USE) -> None:
    """A `UsageError` (`in_use`) if another process holds the directory `path` (e.g. before moving it aside)."""
    if path.is_dir() and path.resolve() not in _HELD:
        os.close(_lock(path.resolve(), in_use))


def check(path: pathlib.Path, *, resume: bool, overwrite: bool) -> None:
    """A `UsageError` unless `path` can be started as asked; leaves nothing behind."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"run directory {path} is a file, not a directory")
    if not path.exists() and not resume:  # A resume creates nothing; its missing run is refused below.
        results.check_directory(f"run directory {path}", path)
    exists = path.exists() and any(path.iterdir())
    if resume and overwrite:
        raise UsageError("--resume and --overwrite exclude each other")
    if resume and not (path / "config.json").exists():
        raise UsageError(f"--resume: {path} holds no run (no config.json)")
    if exists and not resume and not (path / "config.json").exists():
        # A directory of the user's own: neither --resume nor --overwrite takes it (a mistyped path must not
        # delete it).
        if overwrite:
            raise UsageError(f"--overwrite deletes only a run directory: {path} holds no run (no config.json)")
        raise UsageError(f"run directory {path} holds files but no run (no config.json); give another --run_dir")
    if exists and not (resume or overwrite):
        raise UsageError(
            f"run directory {path} already exists; pass --resume to continue it, --run_dir for a new run beside it "
            "(a default name does not tell config overrides apart), or --overwrite"
        )


# The agents' training entry points, as a run's provenance.json names the one that started it.
TRAINERS = ("impala.train", "laser.train", "per.train")


def trained_by(path: pathlib.Path) -> str | None:
    """The entry point of `TRAINERS` that started the run at `path`, from its provenance.json's command.

    None if the record is missing or unreadable, or names no agent's entry
    point (a run started inside a test's process): nothing to check then.
    """
    try:
        command = json.loads((path / "provenance.json").read_text()).get("command")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    words = command.split() if isinstance(command, str) else []
    module = words[2] if words[:2] == ["python", "-m"] and len(words) > 2 else None
    return module if module in TRAINERS else None


def check_trained_by(path: pathlib.Path, module: str, *, overwrite: bool = False) -> None:
    """A `UsageError` if another agent's entry point started the run at `path`.

    `module`: the command at hand (`per.train`, `per.evaluate`, ...). Read by
    another agent, the run's config.json would be refused field by field;
    overwritten, another agent's run would be lost to a mistyped --run_dir.
    """
    trainer = f"{module.split('.')[0]}.train"
    other = trained_by(path)
    if other is None or other == trainer:
        return
    if overwrite:
        advice = f"--overwrite replaces only a run of {trainer}: choose another --run_dir"
    elif module.endswith(".evaluate"):
        advice = f"evaluate it with python -m {other.split('.')[0]}.evaluate"
    else:
        advice = f"continue it with python -m {other} --run_dir {path} --resume"
    raise UsageError(f"{path} is a run of {other}, not of {trainer}; {advice}")


@contextlib.contextmanager
def starting(path: pathlib.Path, config: Any, *, resume: bool, overwrite: bool) -> Iterator[pathlib.Path]:
    """Opens the run directory for a start, held for this process (`hold`); removes it again if the start fails.

    A new run (or an overwritten one) gets its config.json here. If the body
    raises, a directory created here is deleted, so the retry is not refused;
    a resumed run's directory is left as it was. An overwritten run is moved
    aside (`overwritten`) and deleted only once the body has started the new
    one: a start that fails (a busy port, a server that cannot start) puts it back.
    """
    check(path, resume=resume, overwrite=overwrite)
    if path.is_dir():
        hold(path)  # Before anything in it is read or removed.
    if resume:
        try:
            yield path
        except BaseException:
            release(path)
            raise
        return
    old = None
    if overwrite and path.exists():
        old = overwritten(path)
        if old.exists():
            release(path)
            raise UsageError(
                f"an interrupted --overwrite of {path} left the run it replaced in {old}; move it back or delete it"
            )
        path.rename(old)
        release(path)  # The lock was the moved directory's.
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # What `check` cannot see, e.g. /proc, or root's writes to a read-only mount.
        raise UsageError(f"run directory {path} cannot be created: {error.strerror}") from None
    hold(path)
    (path / "config.json").write_text(config_lib.to_json(config) + "\n")
    try:
        yield path
    except BaseException:
        release(path)
        if created:
            shutil.rmtree(path, ignore_errors=True)
        else:
            (path / "config.json").unlink(missing_ok=True)
        if old is not None:
            old.rename(path)
        raise
    if old is not None:
        shutil.rmtree(old)


def overwritten(path: pathlib.Path) -> pathlib.Path:
    """Where `starting` keeps the run that `--overwrite` replaces at `path` until the new one has started."""
    return path.with_name(f".{path.name}.overwritten")


def run_id(directory: pathlib.Path) -> str | None:
    """The id `RunRecord` gave the run at `directory` (None: none yet, a new run or one recorded before ids)."""
    return read_record(directory / "provenance.json").get("run_id")


def read_record(path: pathlib.Path) -> dict[str, Any]:
    """One of the run's JSON records at `path` ({} if absent); a `UsageError` naming it if it cannot be read.

    A damaged record stops a resume before it starts: written over, it would
    lose what it held (the run's sittings, its frames).
    """
    if not path.exists():
        return {}
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a readable JSON record ({error}); restore it, or pass --overwrite") from None
    if not isinstance(record, dict):
        kind = type(record).__name__
        raise UsageError(f"{path}: a JSON {kind}, not the run's record; restore it, or pass --overwrite")
    return record


def recorded_segments(directory: pathlib.Path) -> list[dict[str, Any]]:
    """The starts provenance.json records (none for a new run)."""
    return read_record(directory / "provenance.json").get("segments", [])


def last_budget(directory: pathlib.Path) -> int | None:
    """The frame budget of the run's latest start (a resume may have raised it), if recorded."""
    segments = recorded_segments(directory)
    return segments[-1]["total_frames"] if segments else None


def has_checkpoint(directory: pathlib.Path) -> bool:
    """Whether the run in `directory` holds a checkpoint to resume from (`common.loop` saves one as a run starts).

    As TensorFlow's `CheckpointManager` finds it when the run resumes: the
    latest one that the `checkpoints/checkpoint` state file names, and its
    files. Without that file, checkpoint files alone would be passed over and
    the run would start again from 0. Read here, not through TensorFlow, whose
    import takes seconds: a resume is checked before anything starts.
    """
    state = directory / "checkpoints" / "checkpoint"
    try:
        latest = re.search(r'^model_checkpoint_path: "(.*)"$', state.read_text(), re.MULTILINE)
    except (OSError, UnicodeDecodeError):
        return False
    return latest is not None and (state.parent / f"{latest.group(1)}.index").is_file()


@contextlib.contextmanager
def reading_checkpoint(path: str) -> Iterator[None]:
    """Around restoring the checkpoint at `path` (`ckpt-N` under a run's checkpoints/): a damaged one, or one
    whose variables do not fit the config's network, is a one-line `UsageError` naming it, not a traceback.

    Only a damaged file (TensorFlow's `OpError`, or a short read) is worth going back from to an earlier
    checkpoint; a mismatch (`ValueError` of shapes, `AssertionError` of unmatched objects) holds for them all.
    """
    import tensorflow as tf

    try:
        yield
    except (tf.errors.OpError, IndexError, ValueError, AssertionError) as error:
        # The failed restore's status object logs its unrestored variables when it is collected: lines of noise
        # after the error's one line.
        tf.get_logger().setLevel("ERROR")
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        if isinstance(error, (tf.errors.OpError, IndexError)):
            state = pathlib.Path(path).parent / "checkpoint"
            remedy = f"damaged; to go on from an earlier one, name it as model_checkpoint_path in {state}"
        else:
            remedy = "its variables do not fit this config's network: saved by another config or code version"
        raise UsageError(f"checkpoint {path} cannot be restored ({reason}): {remedy}") from None


def finished(directory: pathlib.Path, budget: int | None = None) -> bool:
    """Whether the run's final.json reaches `budget` frames (None: any budget; `final.json` is written at one)."""
    final = read_record(directory / "final.json")
    return bool(final) and (budget is None or final.get("frames", 0) >= budget)


def trained_frames(directory: pathlib.Path) -> int:
    """Frames the run has trained, as far as its record says: its last checkpoint's, or where its latest start began."""
    segments = recorded_segments(directory)
    last = segments[-1] if segments else {}
    finished = read_record(directory / "final.json").get("frames", 0)
    return max(last.get("frames", 0), last.get("frames_at_start", 0), finished)


def segment_seed(seed: int, segment: int) -> int:
    """The seed of a run's start number `segment` (0: the first): the config's seed, then a new one per resume.

    A resume restores the networks, optimizer and counters but rebuilds the
    envs and the actors' random generators. Seeded with the config's seed
    again, they would repeat the first start's draws (its env resets and its
    exploration) from the resumed frame on. The first start keeps the
    config's seed, so a run never resumed is what it was.
    """
    if segment == 0:
        return seed
    return int(np.random.SeedSequence([seed, segment]).generate_state(1)[0] % 2**31)


def _load() -> float:
    """The 1-minute load average: with the machine's cores (`machine`), whether the run had them to itself."""
    return round(os.getloadavg()[0], 2)


class RunRecord:
    """provenance.json of a run: one segment per start, wall time across all of them.

    A segment keeps the 1-minute load average at its start and the largest at
    any save, beside the machine's cores: a run that shared them (another
    study run, `--jobs`) says so in its own record.
    """

    def __init__(self, directory: pathlib.Path, config: Any, role: str):
        self._path = directory / "provenance.json"
        previous = read_record(self._path)
        self.segments: list[dict[str, Any]] = previous.get("segments", [])
        # Names the run to its Reverb server (`common.reverb.server.claim`); a run recorded before ids gets one now.
        self.run_id: str = previous.get("run_id") or uuid.uuid4().hex
        self._config, self._role = dataclasses.asdict(config), role
        self.index = len(self.segments)  # This start's number: 0 for a new run.
        self.seed = segment_seed(config.seed, self.index)  # What this start's envs and actors draw from.
        self._started = time.time()

    @property
    def previous_wall_time_s(self) -> float:
        return sum(segment["wall_time_s"] for segment in self.segments[:-1])

    def start(self, frames: int, total_frames: int) -> None:
        """Opens this start's segment, at `frames` of a `total_frames` budget."""
        record = provenance.record(
            config=self._config, seeds=[self._config.get("seed")], frames=total_frames, wall_time_s=0.0,
            scale="training run",
        )  # fmt: skip
        self.segments.append({
            "commit": record["commit"], "dirty": record["dirty"], "command": record["command"],
            "date_utc": record["date_utc"], "role": self._role, "seed": self.seed, "frames_at_start": frames,
            "total_frames": total_frames, "wall_time_s": 0.0, "load_1min_at_start": _load(), "load_1min_max": _load(),
        })  # fmt: skip
        self._record = record
        self.update()

    def wall_time_s(self) -> float:
        """Wall time of every segment, this one up to now."""
        return self.previous_wall_time_s + (time.time() - self._started)

    def update(self, frames: int | None = None) -> float:
        """Writes the record with the wall time up to now (and the frames checkpointed, if given); returns that
        total (the segments' sum)."""
        self.segments[-1]["wall_time_s"] = round(time.time() - self._started, 1)
        self.segments[-1]["load_1min_max"] = max(self.segments[-1]["load_1min_max"], _load())
        if frames is not None:
            self.segments[-1]["frames"] = frames
        total = round(self.previous_wall_time_s + self.segments[-1]["wall_time_s"], 1)
        record = {**self._record, "run_id": self.run_id, "wall_time_s": total, "segments": self.segments}
        self._path.write_text(json.dumps(record, indent=2, default=str) + "\n")
        return total


class EpisodeLog:
    """Appends finished episodes to episodes.csv and keeps the recent returns.

    A resumed run passes the frames of the checkpoint it restored
    (`resumed_at`): a run killed without a last save (SIGKILL, a lost machine)
    flushed episodes after its last checkpoint, which training then plays
    again, so those rows are dropped rather than counted twice.

    A multi-task run (IMPALA §5.3) names its `tasks`: episodes.csv gets a
    `task` column, and every flush writes tasks.json, each task's episodes,
    mean return and mean of its last `window` returns.
    """

    def __init__(
        self, run_dir: pathlib.Path, window: int = 100, tasks: Sequence[str] = (), resumed_at: int | None = None
    ):
        self._path, self._tasks_path = run_dir / "episodes.csv", run_dir / "tasks.json"
        self.recent = collections.deque(maxlen=window)
        self.count = 0
        self._by_task = {task: _TaskReturns(window) for task in tasks}
        # Empty: a run killed before its first flush; its resume writes the header.
        new = not self._path.exists() or self._path.stat().st_size == 0
        if not new:  # A resumed run continues its statistics.
            for row in self._rows_up_to(resumed_at):
                self._count(float(row["episode_return"]), row.get("task"))
        self._file = open(self._path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(EPISODE_FIELDS + (("task",) if tasks else ()))
            self._file.flush()  # Before any episode: a kill now leaves a file with its header.

    def _rows_up_to(self, frames: int | None) -> list[dict[str, str]]:
        """The log's rows, after removing from the file those logged past `frames` (None: keeps all)."""
        with open(self._path, newline="") as f:
            reader = csv.DictReader(f)
            fields, rows = reader.fieldnames, list(reader)
        kept = rows if frames is None else [r for r in rows if int(r["frames"]) <= frames]
        if len(kept) < len(rows):
            temporary = self._path.with_suffix(".csv.tmp")
            with open(temporary, "w", newline="") as f:
                writer = csv.DictWriter(f, fields)
                writer.writeheader()
                writer.writerows(kept)
            temporary.replace(self._path)  # Atomic: a kill now leaves the old or the new log.
            print(
                f"episodes.csv: dropped {len(rows) - len(kept)} episodes logged after the checkpoint at "
                f"{frames:,} frames (training plays those frames again)",
                flush=True,
            )
        return kept

    def add(
        self, frames: int, episode_return: float, episode_length: int, wall_time: float, task: str | None = None
    ) -> None:
        """One finished episode; `task` names its task in a multi-task run."""
        row = (frames, f"{episode_return:.4g}", episode_length, f"{wall_time:.1f}")
        self._writer.writerow(row + ((task,) if self._by_task else ()))
        self._count(episode_return, task)

    def _count(self, episode_return: float, task: str | None) -> None:
        self.recent.append(episode_return)
        self.count += 1
        if self._by_task:
            self._by_task[task].add(episode_return)

    def mean_recent(self) -> float | None:
        """The mean return of the last `window` episodes; None before the first."""
        return sum(self.recent) / len(self.recent) if self.recent else None

    def task_summary(self) -> dict[str, dict[str, float | int | None]]:
        """Per task: episodes, mean return, mean of the last `window`; {} for a single-task run."""
        return {task: returns.summary() for task, returns in self._by_task.items()}

    def flush(self) -> None:
        self._file.flush()
        if self._by_task:
            self._tasks_path.write_text(json.dumps(self.task_summary(), indent=2) + "\n")

    def close(self) -> None:
        self.flush()
        self._file.close()


class _TaskReturns:
    """One task's episode count, return sum and recent returns."""

    def __init__(self, window: int):
        self.count, self.total, self.recent = 0, 0.0, collections.deque(maxlen=window)

    def add(self, episode_return: float) -> None:
        self.count += 1
        self.total += episode_return
        self.recent.append(episode_return)

    def summary(self) -> dict[str, float | int | None]:
        mean = self.total / self.count if self.count else None
        recent = sum(self.recent) / len(self.recent) if self.recent else None
        return {"episodes": self.count, "mean_return": mean, f"mean_return_last_{self.recent.maxlen}": recent}


class Progress:
    """A line every `every_s` seconds: frames, frames/s, learner steps/s, extras, ETA.

    Rates are measured from the first line on, so neither the start-up
    (building, compiling, the first batch) nor a resumed run's earlier frames
    distort them; the first line has no ETA (unless the budget is reached). The ETA divides the frames left by
    the rate over the last `eta_window_s` seconds of lines (or all of them,
    early on), not since the first line: a run's speed can change for good, as
    a DQN run's does when learning starts after the replay's warm-up fill
    (about 17x slower on Atari here), and an average since the first line would
    then promise the end hours early.

    A gap between lines of more than `pause_s` (and 3 intervals) is a pause:
    the process was stopped (Ctrl-Z, SIGSTOP, a suspended machine) or stalled.
    Its line's rates are over the whole gap, but the ETA's window leaves the
    gap out (all but one interval of it): otherwise, for a window after a
    17-minute pause, the ETA would divide by a rate with the pause in it.
    """

    def __init__(
        self,
        total_frames: int,
        every_s: float,
        eta_window_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        pause_s: float = 60.0,
    ):
        self._total, self._every, self._window, self._clock = total_frames, every_s, eta_window_s, clock
        self._pause = max(pause_s, 3 * every_s)
        self._last_time = clock()
        self._last_frames = self._last_steps = None
        self.rates: dict[str, float] = {}  # The last line's frames/s and learner steps/s.
        self._lines: collections.deque[tuple[float, int]] = collections.deque()  # (time, frames) of recent lines.

    def due(self) -> bool:
        return self._clock() - self._last_time >= self._every

    @property
    def logged_frames(self) -> int | None:
        """The frames of the last line (None before the first)."""
        return self._last_frames

    def line(self, frames: int, steps: int | None, **extras: str) -> str:
        """The progress line at `frames`; its rates (none on the first line) stay in `rates` for TensorBoard.

        `steps` None: no learner steps/s (a sweep's driver counts its members' frames, not their updates).
        """
        now = self._clock()
        parts = [f"frames {frames:,}/{self._total:,}"]
        eta = duration(0) if frames >= self._total else "?"  # Done is known on a start's first line too.
        self.rates = {}
        if self._lines:
            elapsed = max(now - self._last_time, 1e-9)
            self.rates = {"frames_per_s": (frames - self._last_frames) / elapsed}
            parts.append(f"{self.rates['frames_per_s']:,.0f} frames/s")
            if steps is not None:
                self.rates["learner_steps_per_s"] = (steps - self._last_steps) / elapsed
                parts.append(f"{self.rates['learner_steps_per_s']:.1f} learner steps/s")
            if elapsed > self._pause:  # The window's lines move forward by the pause, as if it had not been.
                paused = elapsed - self._every
                self._lines = collections.deque((time + paused, frames) for time, frames in self._lines)
            # Keep the newest line at least a window old as the window's start.
            while len(self._lines) > 1 and self._lines[1][0] <= now - self._window:
                self._lines.popleft()
            start_time, start_frames = self._lines[0]
            recent = (frames - start_frames) / max(now - start_time, 1e-9)
            if recent > 0:
                eta = duration(max(self._total - frames, 0) / recent)
        self._lines.append((now, frames))
        parts += [f"{k} {v}" for k, v in extras.items()]
        parts.append(f"ETA {eta}")
        self._last_time, self._last_frames, self._last_steps = now, frames, steps
        return " | ".join(parts)


def duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def summary_writer(run_dir: pathlib.Path, frames: int) -> tf.summary.SummaryWriter:
    """The TensorBoard writer of a start that continues after `frames`, its start marked for TensorBoard.

    A run that died between checkpoints (killed, its server or machine lost)
    had logged past the checkpoint that its resume continues from. TensorBoard's
    Python loader (`--load_fast=false`, or where its Rust data server is not
    installed) drew both starts' curves over those frames; its Rust loader
    drops a curve's points at and past a step that comes again, so it kept
    only those between the checkpoint and the resumed start's first point.
    So each start also writes a SessionLog START event at frames + 1, at which
    the Python loader drops the earlier events at or past that step (a run's
    first START only begins it). The checkpoint's own point, logged as it
    saved, stays. TensorBoard reads a run's files in name order, so the mark
    goes in a file named to sort just before the writer's own.
    """
    # Imported here: the run directory's other helpers serve scripts (studies, suites) that
    # check their flags and plan runs without TensorFlow, whose import takes seconds.
    import tensorflow as tf

    directory = run_dir / "tb"
    before = set(directory.glob("*.v2"))
    writer = tf.summary.create_file_writer(str(directory))  # Its file, "events.out.tfevents.<time>...v2", now.
    (events,) = set(directory.glob("*.v2")) - before  # One training process per run directory (`hold`).
    now = time.time()
    start = tf.compat.v1.Event(
        wall_time=now, step=frames + 1, session_log=tf.compat.v1.SessionLog(status=tf.compat.v1.SessionLog.START)
    )
    with tf.io.TFRecordWriter(str(events.with_suffix(".start"))) as marks:  # Just before it: ".start" < ".v2".
        marks.write(tf.compat.v1.Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
        marks.write(start.SerializeToString())
    return writer
