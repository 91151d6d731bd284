"""Watching and stopping the processes an end-to-end test starts: a run's learner, its actors, a driver's jobs.

The system tests start real runs in sessions of their own, as `nohup ... &`
starts them, so a test's own process group never holds them. These helpers
wait on what a run writes, look processes up by their command line, and make
sure nothing a failed test started outlives it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import time
from typing import Callable


def wait_for(predicate: Callable[[], bool], timeout: float = 180, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def checkpoint_steps(run_dir: pathlib.Path) -> list[int]:
    return sorted(int(p.name.split("-")[1].split(".")[0]) for p in (run_dir / "checkpoints").glob("ckpt-*.index"))


def committed_checkpoint_step(run_dir: pathlib.Path) -> int | None:
    """The step a resume restores: the one TF's `checkpoint` state file names, None before the first save.

    A kill can land after a checkpoint's files are written and before the state
    file (replaced atomically) names it; the resume then rightly takes the one
    before, so tests of a killed run read this, not the newest files.
    """
    state = run_dir / "checkpoints" / "checkpoint"
    if not state.exists():
        return None
    match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state.read_text(), re.MULTILINE)
    return int(match.group(1)) if match else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def episodes_logged(run_dir: pathlib.Path) -> bool:
    path = run_dir / "episodes.csv"
    return path.exists() and len(path.read_text().splitlines()) > 1


def summary_steps(run_dir: pathlib.Path, tag: str) -> list[int]:
    """The steps (frames) of every TensorBoard point of `tag` in the run's tb/ directory."""
    import tensorflow as tf

    steps = []
    for path in sorted((run_dir / "tb").glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return steps


def ignore_sigint() -> None:
    """A `preexec_fn`: starts a process as a background job of a non-interactive shell (`nohup ... &`) or a
    pytest-xdist worker starts it, with SIGINT ignored, so Python raises no KeyboardInterrupt on its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def pids_mentioning(text: str) -> list[int]:
    """The processes whose command line holds `text`."""
    pids = []
    for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def kill_processes_mentioning(text: str) -> None:
    """SIGKILLs every process whose command line holds `text`: after a failure, nothing a test started may
    outlive it."""
    for pid in pids_mentioning(text):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
