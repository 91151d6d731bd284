"""One script per paper table or figure: `reproduce/<paper>/<study>.py`.

Each is a module run as `python -m reproduce.<paper>.<study> --profile P`,
writing CSV, PNG, a markdown summary and a provenance record into
`results/<paper>/<P>/` (profile-free studies into `results/<paper>/`), so a
quick run never replaces the outputs of a longer one.
"""

from __future__ import annotations

import common  # noqa: F401  (quiets TensorFlow before it loads)
from common.results import REPO_ROOT, RESULTS, output_dir, write_csv  # noqa: F401  (the scripts' helpers)

PROFILES = ("quick", "full")


def heading(title: str, profile: str) -> str:
    """A table's first line. A quick-profile table says it is smoke scale, so nobody takes it for a result."""
    return f"# SMOKE SCALE (quick profile), not a result: {title}" if profile == "quick" else f"# {title}"


def define_flags() -> None:
    """The flags every reproduce script shares, listed by the script's `--help` as its own.

    Defined once per process: tests import several scripts into one process.
    """
    from absl import flags

    from common import cli

    if "profile" not in flags.FLAGS:
        flags.DEFINE_enum("profile", "quick", PROFILES, "quick: minutes on 2 cores; full: the larger study.")
        flags.DEFINE_integer("seed", 0, "Base seed; repeats use seed, seed + 1, ...", lower_bound=0)
        flags.DEFINE_bool(
            "fresh", False, "Retrain the runs this command would reuse (their run directories are moved aside)."
        )
    cli.list_as_main_flags(("profile", "seed", "fresh"))


def refuse_unused(names: tuple[str, ...], reason: str) -> None:
    """A `UsageError` naming the first of the shared flags `names` given to a script that does nothing with it."""
    from absl import flags

    from common.errors import UsageError

    for name in names:
        if flags.FLAGS[name].present:
            raise UsageError(f"--{name}: {reason}; leave it out")


def check_keeps_seeds(out, stem: str, seeds: list[int], asked: str) -> None:
    """A `UsageError` if `out/stem.*`, an exact study recomputed whole by each start, were computed from other seeds.

    Such a study's tables hold one command's seeds only (`stem.provenance.json`): another `--seed` or `--seeds`
    would replace the committed numbers with another draw's, without a word. `asked` names the flags as given.
    """
    import json

    from common.errors import UsageError

    path = out / f"{stem}.provenance.json"
    held = json.loads(path.read_text()).get("seeds") if path.exists() else None
    if held is not None and held != seeds:
        raise UsageError(
            f"{out / stem}.* were computed from {_seeds(held)}, not {_seeds(seeds)} ({asked}): this command "
            f"would replace them; ask for those seeds, or move {out / stem}.* aside first"
        )


def _seeds(seeds: list[int]) -> str:
    """`seed 0`, `seeds 0-9` for consecutive seeds, else `seeds 0, 3`."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(map(str, seeds))
