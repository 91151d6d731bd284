"""Where a separate `--role server` keeps the Reverb tables its learner checkpoints.

With `--role all` an agent that checkpoints its tables (PER's replay) keeps
them in RUN_DIR/replay. A server on another machine cannot see the learner's
run directory, so it is given one of its own, `--tables_dir DIR`: each of the
learner's checkpoints (`Client.checkpoint()`) saves the tables in
DIR/checkpoints, as a subdirectory Reverb names by its time, keeping the latest
only (after each save Reverb's checkpointer deletes every entry of its
directory but the last by name, a file of ours included), beside the config
the tables were built from (DIR/config.json, written at the first start). The
same contract as a run directory's: a directory holding saved tables is
served again only with `--resume`, with its own config (a resumed server may
change what a resumed run may), emptied only with `--overwrite`, and one that
holds anything else is never touched. Nothing here imports Reverb: the checks
run before TensorFlow loads.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
from typing import Any

from common import config as config_lib
from common import run_dir
from common.errors import UsageError

# Reverb's checkpointer names each checkpoint by its UTC time, e.g. 2026-12-05T12:15:48.895482404+00:00.
_CHECKPOINT_NAME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")

_IN_USE = (
    "--tables_dir {path} is in use: another Reverb server keeps its tables there; stop it or give another --tables_dir"
)

CONFIG = "config.json"  # The config the tables were built from.
CHECKPOINTS = "checkpoints"  # Reverb's checkpointer's directory.


def saved(path: pathlib.Path) -> list[pathlib.Path]:
    """The complete checkpoints Reverb saved in `path` (it writes DONE last), oldest first."""
    return [checkpoint for checkpoint in _reverbs(path) if (checkpoint / "DONE").exists()]


def _reverbs(path: pathlib.Path) -> list[pathlib.Path]:
    """What Reverb's checkpointer wrote in `path`, interrupted checkpoints included, oldest first."""
    if not (path / CHECKPOINTS).is_dir():
        return []
    return sorted(p for p in (path / CHECKPOINTS).iterdir() if p.is_dir() and _CHECKPOINT_NAME.match(p.name))


def _others(path: pathlib.Path) -> list[pathlib.Path]:
    """What `path` holds besides a server's config and Reverb's checkpoints, in either of their places."""
    found = sorted(set(path.iterdir()) - {path / CHECKPOINTS, path / CONFIG}) if path.is_dir() else []
    if (path / CHECKPOINTS).is_dir():
        found += sorted(set((path / CHECKPOINTS).iterdir()) - set(_reverbs(path)))
    return found


def check(path: pathlib.Path, *, resume: bool, overwrite: bool) -> None:
    """A `UsageError` unless a server can keep its tables in `path` as asked; touches nothing."""
    if resume and overwrite:
        raise UsageError("--resume and --overwrite exclude each other")
    if path.exists() and not path.is_dir():
        raise UsageError(f"--tables_dir {path} is a file, not a directory")
    run_dir.check_not_in_use(path, _IN_USE)  # Refused first: another server's tables are not this one's to judge.
    checkpoints = saved(path)
    others = _others(path)
    if others:
        raise UsageError(
            f"--tables_dir {path} holds {others[0].relative_to(path)}, which is not a server's saved tables or "
            "config; give another --tables_dir"
        )
    if resume and not path.exists():
        raise UsageError(f"--resume: --tables_dir {path} does not exist; leave out --resume to start with empty tables")
    if resume and not checkpoints:
        raise UsageError(
            f"--resume: --tables_dir {path} holds no saved tables; leave out --resume to start with empty tables"
        )
    if resume and not (path / CONFIG).is_file():
        raise UsageError(
            f"--resume: --tables_dir {path} holds no {CONFIG}, the config its tables were built from; "
            "pass --overwrite to delete them and start empty"
        )
    if checkpoints and not (resume or overwrite):
        raise UsageError(
            f"--tables_dir {path} holds the tables an earlier server saved: pass --resume to serve them, or "
            "--overwrite to delete them and start empty"
        )
    existing = next(p for p in (path / CHECKPOINTS, path, *path.absolute().parents) if p.exists())
    if not os.access(existing, os.W_OK):  # Found now, not at a learner's first checkpoint.
        raise UsageError(f"--tables_dir {path}: {existing} is not writable")


def prepare(path: pathlib.Path, config: Any, *, resume: bool, overwrite: bool) -> None:
    """Creates and locks `path` for this process's server, and saves `config` there unless it `resume`s.

    Call after `check`. With `overwrite`, deletes the tables saved there. A
    `UsageError` if another process serves from it: two servers saving into
    one directory would each load the other's tables.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # What `check` cannot see, e.g. /proc, or root's writes to a read-only mount.
        raise UsageError(f"--tables_dir {path} cannot be created: {error.strerror}") from None
    run_dir.hold(path, _IN_USE)
    if overwrite:
        for checkpoint in _reverbs(path):
            shutil.rmtree(checkpoint)
    if not resume:
        (path / CONFIG).write_text(config_lib.to_json(config) + "\n")
