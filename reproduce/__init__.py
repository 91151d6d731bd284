"""One script per paper table or figure: `reproduce/<paper>/<study>.py`.

Each is a module run as `python -m reproduce.<paper>.<study> --profile P`,
writing CSV, PNG, a markdown summary and a provenance record into
`results/<paper>/<P>/` (profile-free studies into `results/<paper>/`), so a
quick run never replaces the outputs of a longer one.
"""

from __future__ import annotations

import csv
import pathlib
from typing import Sequence

import common  # noqa: F401  (quiets TensorFlow before it loads)

PROFILES = ("quick", "full")
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "results"


def define_flags() -> None:
    """The flags every reproduce script shares."""
    from absl import flags

    flags.DEFINE_enum("profile", "quick", PROFILES, "quick: minutes on 2 cores; full: the larger study.")
    flags.DEFINE_integer("seed", 0, "Base seed; repeats use seed, seed + 1, ...")


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
