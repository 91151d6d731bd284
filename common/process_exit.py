"""Leaving a process at once, without the files its skipped exit handlers would have removed.

A training run's processes end with `os._exit` (Reverb's server and client
threads can hold an interpreter's normal exit), which runs no `atexit`
handler. TensorFlow's AutoGraph writes the source of each function it
converts to a file `__autograph_generated_file*.py` in the temporary
directory and removes it from an `atexit` handler: each run left a score of
them in /tmp, and each of its actor processes as many again.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from common import native_log

# AutoGraph imports each file it writes as a module of the file's own name.
AUTOGRAPH_MODULE_PREFIX = "__autograph_generated_file"


def now(status: int) -> NoReturn:
    """Exits with `status` at once, once what is printed is out and AutoGraph's files are gone."""
    sys.stdout.flush()
    sys.stderr.flush()
    native_log.flush()
    remove_autograph_files()
    os._exit(status)


def remove_autograph_files() -> None:
    """Removes the files AutoGraph wrote for this process's functions (it would at a normal exit)."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith(AUTOGRAPH_MODULE_PREFIX) and path:
            try:
                os.remove(path)
            except OSError:  # Gone already (a cleaner of /tmp), or never ours to remove.
                pass
