"""Runs every reproduce script: `python -m reproduce --profile quick`.

Scripts are found, not listed: every module `reproduce/<paper>/<study>.py`
whose name does not start with an underscore, except the benchmark-suite
driver in `reproduce/suite/`, which is not a study.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import time

from absl import flags

import reproduce
from common import cli
from common.errors import UsageError

flags.DEFINE_enum("profile", "quick", reproduce.PROFILES, "Profile passed to every script.")
flags.DEFINE_string("only", "", "Run only scripts whose module name contains this text.")
FLAGS = flags.FLAGS


def discover() -> list[str]:
    """Module names of all reproduce scripts, sorted."""
    found = []
    for package in pkgutil.iter_modules(reproduce.__path__):
        if not package.ispkg or package.name.startswith("_") or package.name == "suite":
            continue
        path = [f"{reproduce.__path__[0]}/{package.name}"]
        for module in pkgutil.iter_modules(path):
            if not module.ispkg and not module.name.startswith("_"):
                found.append(f"reproduce.{package.name}.{module.name}")
    return sorted(found)


def main(argv: list[str]) -> None:
    scripts = [s for s in discover() if FLAGS.only in s]
    if not scripts:
        raise UsageError(f"no reproduce script matches --only={FLAGS.only!r}; scripts: {', '.join(discover())}")
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
