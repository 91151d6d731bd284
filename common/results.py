"""Where measured numbers go: `results/<paper>/<profile>/`, CSV files.

Shared by the reproduce scripts and the benchmarks (which do not import
`reproduce`).
"""

from __future__ import annotations

import csv
import pathlib
from typing import Sequence

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "results"


def output_dir(paper: str, profile: str | None) -> pathlib.Path:
    """`results/<paper>/<profile>/`, created if missing."""
    directory = RESULTS / paper / profile if profile else RESULTS / paper
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def write_csv(path: pathlib.Path, rows: Sequence[dict]) -> None:
    """Writes `rows` (dicts with the same keys) as a CSV with a header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
