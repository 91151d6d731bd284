"""Where measured numbers go: `results/<paper>/<profile>/`, CSV files.

Shared by the reproduce scripts and the benchmarks (which do not import
`reproduce`).
"""

from __future__ import annotations

import csv
import os
import pathlib
import shutil
import tempfile
from typing import Sequence

from common.errors import UsageError

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "results"


def output_dir(paper: str, profile: str | None) -> pathlib.Path:
    """`results/<paper>/<profile>/`, created if missing."""
    directory = RESULTS / paper / profile if profile else RESULTS / paper
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def chosen_dir(flag: str, given: str | None, paper: str, profile: str | None) -> pathlib.Path:
    """The output directory a flag names, or `output_dir(paper, profile)` if not given.

    Checked before any work starts: a path that is a file is a one-line
    `UsageError`, not a traceback when the results are written. A named
    directory is not made here: the caller makes it when it has results, so a
    run that fails leaves nothing behind.
    """
    if given is None:
        return output_dir(paper, profile)
    if not given:
        raise UsageError(f"{flag}= is empty; it must name a directory (made if missing)")
    return check_directory(f"{flag}={given}", pathlib.Path(given))


def check_directory(label: str, directory: pathlib.Path) -> pathlib.Path:
    """`directory`, once it is known to be one or makeable: a one-line `UsageError` before any work, not a
    traceback after it. `label` names it in the error, e.g. `--out=PATH`.

    The nearest existing ancestor must be a directory this process may write in; a scratch directory is made
    and removed there, which finds what permissions cannot show (/proc, /sys, root on a read-only mount).
    """
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{label} is a file; it must name a directory (made if missing)")
    ancestor = next(p for p in (directory, *directory.absolute().parents) if p.exists())
    if not ancestor.is_dir():
        raise UsageError(f"{label} cannot be created: {ancestor} is a file, not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{label} cannot be created: {ancestor} is not writable")
    try:
        shutil.rmtree(tempfile.mkdtemp(dir=ancestor, prefix=".check-"))
    except OSError as error:
        raise UsageError(f"{label} cannot be created: {error.strerror} in {ancestor}") from None
    return directory


def write_csv(path: pathlib.Path, rows: Sequence[dict]) -> None:
    """Writes `rows` (dicts with the same keys) as a CSV with a header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
