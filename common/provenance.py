"""Provenance records: what produced a number in `results/`.

Every reproduce script and training run writes `provenance.json` beside its
outputs: git commit (and whether the tree was dirty), the exact command, the
resolved config, seeds, frames, wall time and the machine.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent


def _git(*args: str, repo: pathlib.Path = REPO) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _git_state(repo: pathlib.Path = REPO) -> dict[str, Any]:
    """HEAD's commit, and whether the tree differs from it.

    Dirty means a modified tracked file or an untracked file git does not
    ignore (a new source file changes the code as much as an edit does).
    Outputs under results/ are not code: writing them does not make a run dirty.
    """
    status = _git("status", "--porcelain", "--untracked-files=normal", "--", ".", ":!results", repo=repo)
    return {"commit": _git("rev-parse", "HEAD", repo=repo), "dirty": bool(status) if status != "unknown" else "unknown"}


# The code a run used is the code at its start: taken when the entry point
# imports this module, before any long computation.
_AT_START = _git_state()


def command() -> str:
    """The command as a user would type it (`python -m package.module ...`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = ["-m", spec.name.removesuffix(".__main__")] if spec is not None else [sys.argv[0]]
    return " ".join(shlex.quote(a) for a in ["python", *program, *sys.argv[1:]])


def machine() -> dict[str, Any]:
    """Cores, memory and accelerator of this machine."""
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpus = sorted(p.name for p in pathlib.Path("/proc/driver/nvidia/gpus").glob("*"))
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "accelerator": f"{len(gpus)} NVIDIA GPU(s)" if gpus else "none",
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


# A 1-minute load average below this when a benchmark starts: nothing else was
# running then (the average still holds a decaying trace of work that ended in the
# last few minutes, so a busy start may also be such a trace).
QUIET_LOAD = 0.5


def describe_load(start: float, end: float) -> str:
    """A benchmark report's sentence on the 1-minute load average at its start and end.

    The end's load counts the benchmark's own processes; only the start's
    tells whether other work shared the machine.
    """
    head = f"Load average (1 min) at start {start:.1f}, at end {end:.1f}, on {os.cpu_count()} cores"
    if start < QUIET_LOAD:
        return f"{head}: nothing else ran at the start; the end's load counts the benchmark's own processes."
    return (
        f"{head}: the machine was busy at the start (other work, or work that had just ended), so absolute rates "
        "are this machine's at that time."
    )


def stamp() -> dict[str, Any]:
    """What made a file and when, for one that is not a run's record (an evaluation's result, say)."""
    return {**_AT_START, "command": command(), "machine": machine(), "date_utc": _now()}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def record(
    *,
    config: Any,
    seeds: list[int],
    frames: int | None,
    wall_time_s: float,
    scale: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A provenance dict. `scale` says whether the run is paper-scale or reduced.

    `commit` and `dirty` describe the working tree when the run started.
    """
    return {
        **_AT_START,
        "command": command(),
        "config": config,
        "seeds": seeds,
        "frames": frames,
        "wall_time_s": round(wall_time_s, 2),
        "scale": scale,
        "machine": machine(),
        "date_utc": _now(),
        **(extra or {}),
    }


def write(directory: pathlib.Path, name: str = "provenance.json", **kwargs) -> pathlib.Path:
    """Writes `record(**kwargs)` as JSON into `directory` and returns the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps(record(**kwargs), indent=2, default=str) + "\n")
    return path


# A record's fields that say when, where and how fast it was written, not what it describes. A derived record's
# wall time is its inputs' (runs' summaries, whose hashes it holds) or the time an exact computation took.
_CIRCUMSTANCES = ("commit", "dirty", "command", "date_utc", "machine", "assembled_in_s", "wall_time_s")


def write_derived(directory: pathlib.Path, stem: str, also: tuple[str, ...] = (), **kwargs) -> pathlib.Path:
    """`stem`.provenance.json for outputs `stem`.* and the files named in `also` (a study's figures named
    otherwise), derived from committed inputs (a study's tables from its runs' summaries, an exact computation
    from its config), with each output's SHA-256; returns its path.

    Rewritten only when it would describe something else (an input, the bytes
    of an output) or the old record came from a dirty tree, so that rebuilding
    unchanged outputs changes no file, and the record's commit stays one whose
    code made those bytes.
    """
    path = directory / f"{stem}.provenance.json"
    files = sorted({*directory.glob(f"{stem}.*"), *(directory / name for name in also)})
    outputs = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    outputs.pop(path.name, None)
    extra = {**(kwargs.pop("extra", None) or {}), "outputs": outputs}
    new = json.loads(json.dumps(record(extra=extra, **kwargs), default=str))
    old = json.loads(path.read_text()) if path.exists() else None
    if old is None or old.get("dirty") is not False or _described(old) != _described(new):
        path.write_text(json.dumps(new, indent=2) + "\n")
    return path


def _described(record_: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record_.items() if key not in _CIRCUMSTANCES}
