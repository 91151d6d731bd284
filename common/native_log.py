"""Drops known-harmless lines that Reverb's and XLA's C++ write to stderr.

They bypass Python's logging, so the filter sits on file descriptor 2: a pipe
read by a small filter *process* that passes every other line through
unchanged. A process, not a thread: a C++ call that logs while holding
Python's GIL (Reverb loading a table checkpoint) would block a reader thread
that needs the GIL, and with it itself once the pipe is full.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pathlib
import subprocess
import sys
from typing import Iterator

# Each is harmless and printed on every run, burying the progress lines.
HARMLESS = (
    "are owned by the same process",  # Reverb: an in-process sampler reads its table without gRPC.
    "SetPriority unimplemented",  # XLA on CPU: stream priorities are a GPU feature.
    "tfrecord_checkpointer.cc",  # Reverb: the (empty) temporary checkpointer every server makes.
    "before absl::InitializeLog() is called",  # absl: a note about its own set-up.
    "Compiled cluster using XLA",  # TF: XLA's once-per-process notice.
)

# The filter: copy stdin to stdout line by line, less the harmless lines. It
# ignores Ctrl-C and SIGTERM (meant for the trainer) and ends when the pipe closes.
_FILTER = """
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
markers = [m.encode() for m in sys.argv[1:]]
for line in sys.stdin.buffer:
    if not any(m in line for m in markers):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
"""

_flush = None


def filter_stderr() -> None:
    """Installs the filter once per process; it is flushed at exit and by `flush`."""
    global _flush
    if _flush is not None:
        return
    sys.stderr.flush()
    original = os.dup(2)
    process = subprocess.Popen(
        [sys.executable, "-S", "-c", _FILTER, *HARMLESS], stdin=subprocess.PIPE, stdout=original, close_fds=True
    )
    os.dup2(process.stdin.fileno(), 2)
    process.stdin.close()  # File descriptor 2 now holds the pipe's only write end here.

    def flush() -> None:
        sys.stderr.flush()
        os.dup2(original, 2)  # Closes the pipe: the filter drains it and exits.
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()

    _flush = flush
    atexit.register(flush)


def flush() -> None:
    """Lets every filtered line out before an `os._exit`."""
    if _flush is not None:
        _flush()


@contextlib.contextmanager
def redirected(path: pathlib.Path) -> Iterator[None]:
    """Sends file descriptor 2 to `path` (appending) for the body, whether or not the filter is on.

    For start-up chatter worth keeping but not showing, e.g. Reverb loading a
    large table checkpoint, which logs a line per 100 chunks.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
