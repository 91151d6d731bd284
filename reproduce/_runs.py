"""Helpers for reproduce scripts that drive training runs (`python -m <agent>.train`).

A study keeps its runs under runs/reproduce/<study>_<profile>/<name>: a finished
run (with final.json) is kept, a started one is resumed, so an interrupted
study continues where it stopped.
"""

from __future__ import annotations

import csv
import json
import pathlib
import signal
import subprocess
import sys
from typing import Callable

import numpy as np

from reproduce import REPO_ROOT


def train(module: str, run_dir: pathlib.Path, flags: list[str]) -> dict:
    """Runs (or resumes, or keeps) one run of `python -m module`; returns its final.json."""
    final = run_dir / "final.json"
    if final.exists():
        print(f"{run_dir.name}: finished earlier, kept ({run_dir})", flush=True)
        return json.loads(final.read_text())
    command = [sys.executable, "-m", module, *flags, f"--run_dir={run_dir}"]
    if (run_dir / "config.json").exists():
        command.append("--resume")
    run_to_completion(command, run_dir, final.exists)
    return json.loads(final.read_text())


def run_to_completion(command: list[str], run_dir: pathlib.Path, finished: Callable[[], bool]) -> None:
    """Runs `command` (a training run or sweep writing into `run_dir`) until `finished()`.

    Ctrl-C reaches the training run too, which saves a checkpoint and returns
    unfinished; this process waits for it, then exits with status 130 and
    says how to continue. A failed run exits with its status.
    """
    print(" ".join(command), flush=True)
    process = subprocess.Popen(command, cwd=REPO_ROOT)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = process.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    if status and status != 130:
        print(f"error: training {run_dir} failed with exit status {status}", file=sys.stderr, flush=True)
        sys.exit(status)
    if not finished():
        print(f"interrupted: {run_dir} keeps its checkpoint; run the same command to resume", flush=True)
        sys.exit(130)


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
    """Mean training return per `bin_frames` frames, as CSV rows."""
    bins = np.arange(0, total + bin_frames, bin_frames)
    index = np.digitize(frames, bins)
    return [
        {"run": name, "frames": int(bins[b - 1]), "mean_return": round(float(returns[index == b].mean()), 3)}
        for b in np.unique(index)
    ]
