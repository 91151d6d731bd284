"""Runs every reproduce script: `python -m reproduce --profile quick`.

Scripts are found, not listed: every module `reproduce/<paper>/<study>.py`
whose name does not start with an underscore, except the benchmark-suite
driver in `reproduce/suite/`, which is not a study. Before it starts, it
prints the profile's expected wall time (`reproduce._scripts.EXPECTED_S`), and
each script's before that script.

Each script runs in a session of its own, so Ctrl-C or SIGTERM, to this
process or its group (a terminal's Ctrl-C, `kill` of `make`, which hands
SIGTERM to this process), reaches it once, from here: it hands the signal to
its training run, which saves a checkpoint. This process waits for that, runs
no later script, and exits with the script's status (128 + the signal).
"""

from __future__ import annotations

import subprocess
import sys
import time

from absl import flags

import reproduce
from common import cli
from common.errors import UsageError
from common.signals import INTERRUPTED_EXIT_CODES, exit_status, on_stop_signals
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
        code = run_script([sys.executable, "-m", script, f"--profile={FLAGS.profile}"])
        outcome = "ok" if code == 0 else f"stopped ({code})" if code in INTERRUPTED_EXIT_CODES else f"FAILED ({code})"
        print(f"== {script}: {outcome} in {time.monotonic() - start:.0f}s", flush=True)
        if code in INTERRUPTED_EXIT_CODES:
            print(f"python -m reproduce: stopped in {script}; run the same command again to go on", file=sys.stderr)
            sys.exit(code)
        if code:
            failed.append(script)
    if failed:
        print(f"{len(failed)} of {len(scripts)} reproduce scripts failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"all {len(scripts)} reproduce scripts completed; outputs in results/")


def run_script(command: list[str]) -> int:
    """Runs `command` to its end, handing it the stop signals that reach this process; its exit status.

    A stop that came while it started is handed to it once it has: one signal, not two.
    """
    early: list[int] = []
    process: subprocess.Popen | None = None

    def hand_on(signum: int, _) -> None:
        if process is None:
            early.append(signum)
        else:
            process.send_signal(signum)

    with on_stop_signals(hand_on):
        process = subprocess.Popen(command, start_new_session=True)
        if early:
            process.send_signal(early[0])
        return exit_status(process.wait())


if __name__ == "__main__":
    cli.run(main)
