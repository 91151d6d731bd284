"""Runs every reproduce script: `python -m reproduce --profile quick`.

Scripts are found, not listed: every module `reproduce/<paper>/<study>.py`
whose name does not start with an underscore, except the benchmark-suite
driver in `reproduce/suite/`, which is not a study. Before it starts, it
prints the profile's expected wall time (`reproduce._scripts.EXPECTED_S`), and
each script's before that script.

Each script runs in a session of its own, so Ctrl-C or SIGTERM, to this
process or its group (a terminal's Ctrl-C, `kill` of `make`, which hands
SIGTERM to this process), reaches it once, from here: it hands the signal to
its training run, which saves a checkpoint. A SIGHUP (the terminal closed) is
handed on as SIGTERM. This process waits for the script, runs no later one,
and exits 128 + the signal.
"""

from __future__ import annotations

import sys
import time

from absl import flags

import reproduce
from common import cli
from common.errors import UsageError
from common.signals import call_handing_on
from reproduce._scripts import discover, duration, expected, expected_s

flags.DEFINE_enum("profile", "quick", reproduce.PROFILES, "Profile passed to every script.")
flags.DEFINE_string("only", "", "Run only scripts whose module name contains this text.")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    if FLAGS["only"].present and not FLAGS.only:  # Else every script, as if --only were not given.
        raise UsageError(f"--only= is empty; give part of a script's name: {', '.join(discover())}")
    scripts = [s for s in discover() if FLAGS.only in s]
    if not scripts:
        raise UsageError(f"no reproduce script matches --only={FLAGS.only!r}; scripts: {', '.join(discover())}")
    print(f"expected wall time: {expected(scripts, FLAGS.profile)}", flush=True)
    failed = []
    for script in scripts:
        seconds = expected_s(script, FLAGS.profile)
        estimate = f"expected {duration(seconds)}" if seconds else "not measured yet"
        print(f"== {script} --profile {FLAGS.profile} ({estimate})", flush=True)
        start = time.monotonic()
        code, stop = run_script([sys.executable, "-m", script, f"--profile={FLAGS.profile}"])
        outcome = "ok" if code == 0 else f"stopped ({code})" if stop else f"FAILED ({code})"
        print(f"== {script}: {outcome} in {time.monotonic() - start:.0f}s", flush=True)
        if stop:  # Whatever the script's status: it may have ended on its own as the stop came.
            print(f"python -m reproduce: stopped in {script}; run the same command again to go on", file=sys.stderr)
            sys.exit(128 + stop)
        if code:
            failed.append(script)
    if failed:
        print(f"{len(failed)} of {len(scripts)} reproduce scripts failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"all {len(scripts)} reproduce scripts completed; outputs in results/")


def run_script(command: list[str]) -> tuple[int, int | None]:
    """Runs a script in a session of its own, handing it every stop (`call_handing_on`); its status and stop."""
    return call_handing_on(command, hang_up=True, start_new_session=True)


# The README's top section names study scripts' flags (--fresh, say), which a reader may give the driver.
STUDY_FLAGS_HINT = (
    "a study's own flags, such as --fresh, --games and --frames, go to its script: "
    "python -m reproduce.per.minatar --profile quick --fresh, say"
)

if __name__ == "__main__":
    cli.run(main, unknown_flag_hint=STUDY_FLAGS_HINT)
