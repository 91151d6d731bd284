"""One suite job, started by the suite driver's engine (a subprocess here, or a Ray task on a cluster node)
with its output in the job's log.

    python -m reproduce.suite._job AGENT_PACKAGE RUN_DIR EPISODES TRAIN_FLAG...

Trains (or resumes, or keeps) the run with `reproduce._runs.train`, then
evaluates its final checkpoint with `<package>.evaluate` unless that is done;
EPISODES 0 means the evaluate module's default (the agent's paper protocol).
A failed step exits with its status, which the driver reports.
"""

from __future__ import annotations

import pathlib
import signal
import sys

from reproduce import _runs
from reproduce.suite import _plan


def main(argv: list[str]) -> None:
    package, run_dir, episodes, train_flags = argv[1], pathlib.Path(argv[2]), int(argv[3]), argv[4:]
    _runs.train(f"{package}.train", run_dir, train_flags)
    if _plan.evaluation(run_dir) is not None:
        print(f"{run_dir.name}: evaluated earlier, kept", flush=True)
        return
    command = [sys.executable, "-m", f"{package}.evaluate", str(run_dir)]
    if episodes:
        command.append(f"--episodes={episodes}")
    _runs.run_to_completion(command, run_dir, lambda: _plan.evaluation(run_dir) is not None)


if __name__ == "__main__":
    # Not `common.errors.cli`'s line, which names this command: the suite's driver says how to go on. Ctrl-C
    # (the driver hands it to the job's group) stops the run or evaluation running, which saves.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        main(sys.argv)
    except KeyboardInterrupt:
        print(f"{sys.argv[2]}: interrupted", file=sys.stderr, flush=True)
        sys.exit(128 + signal.SIGINT)
