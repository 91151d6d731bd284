"""One timed run of a system, and the order of the runs.

A system's rate is read from its own cumulative frame counter, printed every
few seconds: the frames its learner has trained on (env frames, 4 per agent
step, for both systems). The first report with frames > 0 marks the end of
start-up (processes, compilation, first batch); the window opens at the first
report `warmup_s` after it and closes at the first report `seconds` after
that. frames/s = the counter's difference over the reports' arrival times.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from typing import Callable, Iterable, Sequence

from common.results import REPO_ROOT

Report = tuple[float, int]  # (monotonic arrival time, cumulative frames).
_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # sample-factory colours its log lines.


@dataclasses.dataclass(frozen=True)
class System:
    """How to start one system in one configuration and read its frame counter."""

    system: str  # "ours" or the peer's name.
    config: str  # Short name of the configuration, e.g. "envpool_2x32".
    command: Callable[[pathlib.Path], list[str]]  # From a scratch directory for the run's outputs.
    frames_pattern: str  # Regex whose group 1 is the cumulative frame count (commas allowed).
    resolved_config: str  # The config file the system writes, relative to the scratch directory.


@dataclasses.dataclass(frozen=True)
class Window:
    warmup_s: float
    seconds: float
    startup_timeout_s: float  # No frames by then: the run failed.


@dataclasses.dataclass(frozen=True)
class Measurement:
    frames_per_s: float | None
    window_s: float | None
    load_1min_start: float
    load_1min_end: float
    steal_pct: float | None  # CPU time stolen by the hypervisor during the run, if /proc/stat says.
    started_utc: str
    note: str  # Why a run has no rate; empty otherwise.
    resolved_config: dict | None


def schedule(systems: Sequence[System], runs: int) -> list[tuple[int, System]]:
    """Rounds of every system once, in a fixed order: a drift in the machine's load touches all alike."""
    return [(run, system) for run in range(1, runs + 1) for system in systems]


def rate(reports: Sequence[Report], window: Window) -> tuple[float, float] | None:
    """(frames/s, window length in s) over the window after warm-up, or None until it has closed."""
    started = [r for r in reports if r[1] > 0]
    if not started:
        return None
    opening = next((r for r in started if r[0] >= started[0][0] + window.warmup_s), None)
    if opening is None:
        return None
    closing = next((r for r in started if r[0] >= opening[0] + window.seconds), None)
    if closing is None:
        return None
    elapsed = closing[0] - opening[0]
    return (closing[1] - opening[1]) / elapsed, elapsed


def measure(system: System, window: Window) -> Measurement:
    """Runs `system` until its window closes (or it fails), then stops it."""
    load_start, cpu_start = os.getloadavg()[0], cpu_times()
    started_utc = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix=f"peers_{system.config}_") as scratch:
        reports, tail = watch(system.command(pathlib.Path(scratch)), system.frames_pattern, window)
        resolved = _read_json(pathlib.Path(scratch) / system.resolved_config)
    measured = rate(reports, window)
    note = "" if measured else _failure(reports, tail, window)
    return Measurement(
        frames_per_s=measured[0] if measured else None,
        window_s=measured[1] if measured else None,
        load_1min_start=load_start,
        load_1min_end=os.getloadavg()[0],
        steal_pct=steal_pct(cpu_start, cpu_times()),
        started_utc=started_utc,
        note=note,
        resolved_config=resolved,
    )


def watch(command: list[str], frames_pattern: str, window: Window) -> tuple[list[Report], list[str]]:
    """Runs `command` and collects its frame reports until the window closes; returns them and its last lines."""
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # Its own process group: the stop below reaches every process it started.
        preexec_fn=_default_sigint,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    reports: list[Report] = []
    tail: collections.deque[str] = collections.deque(maxlen=20)
    # A system that never reports frames, or stops reporting them, is given up on.
    startup_deadline = time.monotonic() + window.startup_timeout_s
    deadline = startup_deadline + window.warmup_s + 2 * window.seconds
    try:
        while rate(reports, window) is None:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                line = ""
            if line is None:  # The process closed its output: it has exited.
                break
            if line.strip():
                tail.append(_ANSI_COLOUR.sub("", line).strip())
            match = re.search(frames_pattern, line)
            if match:
                reports.append((time.monotonic(), int(match.group(1).replace(",", ""))))
            now = time.monotonic()
            if now > deadline or (now > startup_deadline and not any(frames > 0 for _, frames in reports)):
                break
    finally:
        stop(process)
    return reports, list(tail)


def _default_sigint() -> None:
    """In the child, before exec: Ctrl-C's default action, which `stop` relies on for a clean stop.

    The `peers` entry point takes Ctrl-C itself (`common.errors.cli`), so its children
    start with the default. `measure` called from a process that ignores SIGINT (a test
    runner in a background job) passed the ignore on: a system that leaves SIGINT to
    Python then ignored `stop`'s Ctrl-C and was killed after the whole grace period.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(process: subprocess.Popen, grace_s: float = 60.0) -> None:
    """Ctrl-C for the system's own clean stop, then SIGKILL for whatever of its process group is left."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # The group is already empty.
        pass
    process.wait()


def cpu_times(stat: pathlib.Path = pathlib.Path("/proc/stat")) -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs from /proc/stat's first line, or None where there is none."""
    try:
        fields = [int(x) for x in stat.read_text().splitlines()[0].split()[1:9]]
    except (OSError, IndexError, ValueError):
        return None
    return fields[7] if len(fields) == 8 else 0, sum(fields)


def steal_pct(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
    if start is None or end is None or end[1] <= start[1]:
        return None
    return 100.0 * (end[0] - start[0]) / (end[1] - start[1])


def _pump(stream: Iterable[str], lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _failure(reports: Sequence[Report], tail: Sequence[str], window: Window) -> str:
    # An exception's message says more than whatever a dying process printed after it.
    errors = [line for line in tail if re.search(r"\w+(Error|Exception)\b", line)]
    last = (errors or list(tail) or ["no output"])[-1]
    if not any(frames > 0 for _, frames in reports):
        return f"no frames (it exited, or none within {window.startup_timeout_s:.0f}s); last error: {last}"
    return f"stopped reporting frames before its window closed; last error: {last}"


def _read_json(path: pathlib.Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
