"""A training run's directory: config, episodes, TensorBoard, checkpoints, progress.

    RUN_DIR/config.json       the resolved config (dataclass fields)
    RUN_DIR/episodes.csv      frames,episode_return,episode_length,wall_time
    RUN_DIR/tb/               TensorBoard summaries
    RUN_DIR/checkpoints/      tf.train.CheckpointManager files

An existing run directory is never touched unless the caller resumes it or
asks to overwrite it.
"""

from __future__ import annotations

import collections
import csv
import json
import pathlib
import shutil
import time
from typing import Any

import tensorflow as tf

from common import config as config_lib
from common.errors import UsageError

EPISODE_FIELDS = ("frames", "episode_return", "episode_length", "wall_time")


def prepare(path: str, config: Any, *, resume: bool, overwrite: bool) -> pathlib.Path:
    """Creates (or reopens, with `resume`) the run directory and writes config.json."""
    run_dir = pathlib.Path(path)
    exists = run_dir.exists() and any(run_dir.iterdir())
    if resume and overwrite:
        raise UsageError("--resume and --overwrite exclude each other")
    if resume and not (run_dir / "config.json").exists():
        raise UsageError(f"--resume: {run_dir} holds no run (no config.json)")
    if exists and not (resume or overwrite):
        raise UsageError(f"run directory {run_dir} already exists; pass --resume to continue it or --overwrite")
    if overwrite and exists:
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(config_lib.to_json(config) + "\n")
    return run_dir


def load_config(run_dir: pathlib.Path) -> dict[str, Any]:
    path = pathlib.Path(run_dir) / "config.json"
    if not path.exists():
        raise UsageError(f"{run_dir} is not a run directory (no config.json)")
    return json.loads(path.read_text())


class EpisodeLog:
    """Appends finished episodes to episodes.csv and keeps the recent returns."""

    def __init__(self, run_dir: pathlib.Path, window: int = 100):
        self._path = run_dir / "episodes.csv"
        self.recent = collections.deque(maxlen=window)
        self.count = 0
        new = not self._path.exists()
        if not new:  # A resumed run continues its statistics.
            with open(self._path, newline="") as f:
                for row in csv.DictReader(f):
                    self.recent.append(float(row["episode_return"]))
                    self.count += 1
        self._file = open(self._path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(EPISODE_FIELDS)

    def add(self, frames: int, episode_return: float, episode_length: int, wall_time: float) -> None:
        self._writer.writerow((frames, f"{episode_return:.4g}", episode_length, f"{wall_time:.1f}"))
        self.recent.append(episode_return)
        self.count += 1

    def mean_recent(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else float("nan")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class Progress:
    """A line every `every_s` seconds: frames, frames/s, steps/s, extras, ETA."""

    def __init__(self, total_frames: int, start_frames: int, every_s: float):
        self._total, self._every = total_frames, every_s
        self._start_time = self._last_time = time.monotonic()
        self._start_frames = self._last_frames = start_frames
        self._last_steps = None

    def due(self) -> bool:
        return time.monotonic() - self._last_time >= self._every

    def line(self, frames: int, steps: int, **extras: str) -> str:
        now = time.monotonic()
        fps = (frames - self._last_frames) / max(now - self._last_time, 1e-9)
        sps = (steps - (self._last_steps if self._last_steps is not None else steps)) / max(now - self._last_time, 1e-9)
        overall = (frames - self._start_frames) / max(now - self._start_time, 1e-9)
        eta = (self._total - frames) / overall if overall > 0 else float("inf")
        self._last_time, self._last_frames, self._last_steps = now, frames, steps
        parts = [f"frames {frames:,}/{self._total:,}", f"{fps:,.0f} frames/s", f"{sps:.1f} steps/s"]
        parts += [f"{k} {v}" for k, v in extras.items()]
        parts.append(f"ETA {_duration(eta)}")
        return " | ".join(parts)


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def summary_writer(run_dir: pathlib.Path) -> tf.summary.SummaryWriter:
    return tf.summary.create_file_writer(str(run_dir / "tb"))
