"""Where measured numbers go: `results/<paper>/<profile>/`, CSV files.

Shared by the reproduce scripts and the benchmarks (which do not import
`reproduce`).
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import shlex
import shutil
import sys
import tempfile
from typing import Any, Sequence

from common.errors import UsageError

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "results"


def output_dir(paper: str, profile: str | None) -> pathlib.Path:
    """`results/<paper>/<profile>/`, created if missing."""
    under = pathlib.Path(paper, profile) if profile else pathlib.Path(paper)
    directory = RESULTS / under
    check_directory(f"results/{under}", directory)  # A file there: one line, not a traceback.
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


def check_keeps_measurement(out: pathlib.Path, stem: str, out_flag: str, ignore: Sequence[str] = ()) -> None:
    """A `UsageError` if this benchmark would replace the measurement in `out/stem.*` with one taken under other
    flags, before it measures.

    A benchmark's table is one run's measurement on the machine at hand: the same command run again measures
    again and replaces it, by design. Another command (a short check, other sizes) replaced the committed
    numbers, which the README quotes, without a word; it writes elsewhere with `--<out_flag>`. The flags
    compared are the entry point's own, as its provenance's command gave them (the rest at their defaults),
    less `out_flag` and `ignore` (those that change where, not what, it measures).
    """
    from absl import flags

    path = out / f"{stem}.provenance.json"
    committed = out.resolve() == RESULTS.resolve() or RESULTS.resolve() in out.resolve().parents
    if not committed or not path.exists():  # Elsewhere (`--out /tmp/x`), a measurement is the user's own.
        return
    command = json.loads(path.read_text()).get("command") or ""
    tokens = shlex.split(command)
    recorded = _given_flags(tokens[3:] if tokens[1:2] == ["-m"] else tokens[2:])  # After `python -m module`.
    own, differences = flags.FLAGS.get_key_flags_for_module(sys.argv[0]), []
    for flag in own:
        if flag.name in (out_flag, *ignore):
            continue
        then = recorded.get(flag.name, flag.default)
        if then != flag.value:
            differences.append(f"--{flag.name}={_shown(flag.value)} (measured with {_shown(then)})")
    if unknown := sorted(name for name in recorded if name not in flags.FLAGS):
        differences.append(f"flags this version lacks ({', '.join(unknown)})")
    if differences:
        raise UsageError(
            f"{out / stem}.* hold the measurement of `{command}`; this command differs in {'; '.join(differences)} "
            f"and would replace it: run that command to measure again, or give --{out_flag} a directory outside "
            "results/"
        )


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _given_flags(args: list[str]) -> dict[str, Any]:
    """The values of the flags in `args` (`--name=value`, `--name value`, `--name`, `--noname`), parsed as now."""
    from absl import flags

    values, tokens = {}, iter(args)
    for token in tokens:
        name, has_value, text = token.lstrip("-").partition("=")
        if name in flags.FLAGS and flags.FLAGS[name].boolean and not has_value:
            values[name] = True
        elif name.startswith("no") and name[2:] in flags.FLAGS and flags.FLAGS[name[2:]].boolean:
            values[name[2:]] = False
        elif name in flags.FLAGS:
            text = text if has_value else next(tokens, "")
            try:
                values[name] = flags.FLAGS[name].parser.parse(text)
            except (ValueError, flags.Error):  # A value this version refuses: a difference, shown as recorded.
                values[name] = text
        else:  # A flag this version lacks; its value, if any, was given with `=`.
            values[name] = text
    return values


def write_csv(path: pathlib.Path, rows: Sequence[dict]) -> None:
    """Writes `rows` (dicts with the same keys) as a CSV with a header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
