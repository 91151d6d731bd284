"""Runs every reproduce script: `python -m reproduce --profile quick`.

Scripts are found, not listed: every module `reproduce/<paper>/<study>.py`
whose name does not start with an underscore, except the benchmark-suite
driver in `reproduce/suite/`, which is not a study. Before it starts, it
prints the profile's expected wall time (`reproduce._scripts.EXPECTED_S`).
"""

from __future__ import annotations

import subprocess
import sys
import time

from absl import flags

import reproduce
from common import cli
from common.errors import UsageError
from reproduce._scripts import discover, expected

flags.DEFINE_enum("profile", "quick", reproduce.PROFILES, "Profile passed to every script.")
flags.DEFINE_string("only", "", "Run only scripts whose module name contains this text.")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    scripts = [s for s in discover() if FLAGS.only in s]
    if not scripts:
        raise UsageError(f"no reproduce script matches --only={FLAGS.only!r}; scripts: {', '.join(discover())}")
    print(f"expected wall time: {expected(scripts, FLAGS.profile)}", flush=True)
    failed = []
    for script in scripts:
        print(f"== {script} --profile {FLAGS.profile}", flush=True)
        start = time.monotonic()
        code = subprocess.call([sys.executable, "-m", script, f"--profile={FLAGS.profile}"])
        print(
            f"== {script}: {'ok' if code == 0 else f'FAILED ({code})'} in {time.monotonic() - start:.0f}s",
            flush=True,
        )
        if code:
            failed.append(script)
    if failed:
        print(f"{len(failed)} of {len(scripts)} reproduce scripts failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"all {len(scripts)} reproduce scripts completed; outputs in results/")


if __name__ == "__main__":
    cli.run(main)
