"""Pieces shared by the IMPALA, PER and LASER agents.

Importing this package first (every package's `__init__` does) silences
TensorFlow's C++ INFO and WARNING lines before TensorFlow loads, so a user's
one-line error is not buried under start-up chatter. Errors still print.

In a command (`python -m <package>.<module>`), it also makes a Ctrl-C or a
SIGTERM that comes while the command starts one line and exit 130 or 143, as
`common.errors.cli` does once it takes over.
"""

import os
import signal
import sys

from common.errors import INTERRUPTED

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _interrupted_while_starting(signum: int, _) -> None:
    """Ctrl-C or SIGTERM before the entry point's own handling: nothing is written yet, so leave at once.

    Python's own KeyboardInterrupt would come out of whichever import was
    running (absl's, NumPy's, TensorFlow's) as a traceback, and one inside an
    extension module's initialisation can abort the process instead (SIGABRT),
    which a driver of runs would report as a failure rather than a stop.
    SIGTERM's default action ended the command with no word.
    """
    option = next((i for i, arg in enumerate(sys.orig_argv) if arg.startswith("-m")), None)  # `-m M` or `-mM`.
    if option is None:
        module = "the command"
    else:
        module = sys.orig_argv[option][2:] or sys.orig_argv[option + 1]
    print(f"python -m {module}: {INTERRUPTED}", file=sys.stderr, flush=True)
    os._exit(128 + signum)


# Python sets argv[0] to "-m" only while `python -m` imports the packages of the
# module it runs: a library use (a test runner, a notebook) keeps its own handler.
if sys.argv[:1] == ["-m"]:
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    signal.signal(signal.SIGTERM, _interrupted_while_starting)
