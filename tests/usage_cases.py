"""Many bad-input cases of one entry point, run in one process through the entry point's own `cli.run(main)`.

A process per case imports TensorFlow and Reverb (about 6 CPU seconds) to print
one line. Here one process imports the entry point once and runs each case as
the command line does: `sys.argv` is the case, `cli.run(main)` parses the flags
(reset to their defaults first) and turns a `UsageError` into one line on
stderr and `SystemExit(2)`. Any other exception is caught and reported with its
traceback, so a test asserting "no traceback" still fails on it. A case that
is not refused starts its run, whose `os._exit` ends the process before it
reports: `run_cases` then fails for every case, showing the run's output.

Only cases that fail before the run starts its Reverb connection and its
stderr filter (`native_log`) belong here; each test file keeps real
subprocess cases too, proving the exit status and the one line end to end.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import subprocess
import sys
from typing import Callable, Sequence

REPO = pathlib.Path(__file__).resolve().parent.parent

# Runs in the child: argv[1] is the entry point's module, argv[2] the cases as JSON.
_RUNNER = """
import contextlib, importlib, io, json, sys, traceback
from absl import flags
from common import cli

module, cases = sys.argv[1], json.loads(sys.argv[2])
entry = importlib.import_module(module)
outcomes = []
for case in cases:
    flags.FLAGS.unparse_flags()
    sys.argv = [module, *case]
    stdout, stderr, status = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            cli.run(entry.main)
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else int(exit.code is not None)  # As Python exits.
        except BaseException:
            traceback.print_exc()
            status = 1
    outcomes.append({"returncode": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()})
print(json.dumps(outcomes))
"""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a subprocess.CompletedProcess would hold for one case."""

    returncode: int
    stdout: str
    stderr: str


def run_cases(
    module: str,
    cases: Sequence[tuple[str, ...]],
    directory: pathlib.Path,
    first: Sequence[str] = (),
    prepare: Callable[[pathlib.Path], None] | None = None,
    run_dir_flag: bool = True,
) -> dict[tuple[str, ...], tuple[Outcome, pathlib.Path]]:
    """Each case's outcome and the run directory it was given (`directory`/run<i>), from one process.

    A case's command line is `python -m module *first --run_dir=directory/run<i> *case`, without
    the `--run_dir` flag if not `run_dir_flag` (entry points that take none, e.g. the benchmarks);
    `prepare(run_dir)`, if given, sets up each case's run directory first.
    """
    run_dirs = [directory / f"run{i}" for i in range(len(cases))]
    for run_dir in run_dirs if prepare else ():
        prepare(run_dir)
    run_dir_flags = [[f"--run_dir={run_dir}"] if run_dir_flag else [] for run_dir in run_dirs]
    argvs = [[*first, *given, *case] for case, given in zip(cases, run_dir_flags)]
    command = [sys.executable, "-c", _RUNNER, module, json.dumps(argvs)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    outcomes = [Outcome(**outcome) for outcome in json.loads(result.stdout.splitlines()[-1])]
    return {tuple(case): (outcome, run_dir) for case, outcome, run_dir in zip(cases, outcomes, run_dirs)}


# What TensorFlow and Reverb's native code may print on stderr before a Python error: not the program's words.
NATIVE_LOG = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] tensorflow/|To enable the following instructions|\[reverb/)"
)


def assert_one_line_error(result: Outcome | subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit status 2, no traceback, and one line of stderr, besides native logs, that holds every fragment."""
    lines = [line for line in result.stderr.splitlines() if line.strip() and not NATIVE_LOG.match(line)]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def snapshot(directory: pathlib.Path) -> dict[str, bytes]:
    """Every file under `directory` and its bytes, to show that a refused command changed nothing."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}
