"""Where measured numbers go: `results/<paper>/<profile>/`, CSV files.

Shared by the reproduce scripts and the benchmarks (which do not import
`reproduce`).
"""

from __future__ import annotations

import csv
import pathlib
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
    directory = pathlib.Path(given)
    if not given or (directory.exists() and not directory.is_dir()):
        what = "a file" if given else "empty"
        raise UsageError(f"{flag}={given} is {what}; it must name a directory (made if missing)")
    return directory


def write_csv(path: pathlib.Path, rows: Sequence[dict]) -> None:
    """Writes `rows` (dicts with the same keys) as a CSV with a header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
