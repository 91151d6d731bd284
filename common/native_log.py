"""Drops known-harmless lines that Reverb's and XLA's C++ write to stderr.

They bypass Python's logging, so the filter sits on file descriptor 2: a
pipe whose reader thread passes every other line through unchanged. Errors
and everything Python prints still reach the terminal.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

# Each is harmless and printed on every run, burying the progress lines.
HARMLESS = (
    "are owned by the same process",  # Reverb: an in-process sampler reads its table without gRPC.
    "SetPriority unimplemented",  # XLA on CPU: stream priorities are a GPU feature.
    "tfrecord_checkpointer.cc",  # Reverb: the (empty) temporary checkpointer every server makes.
    "before absl::InitializeLog() is called",  # absl: a note about its own set-up.
    "Compiled cluster using XLA",  # TF: XLA's once-per-process notice.
)

_flush = None


def filter_stderr() -> None:
    """Installs the filter once per process; it is flushed at exit and by `flush`."""
    global _flush
    if _flush is not None:
        return
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if not any(marker.encode() in line for marker in HARMLESS):
                    os.write(original, line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()

    def flush() -> None:
        sys.stderr.flush()
        os.dup2(original, 2)  # Closes the pipe's last write end: the reader drains and stops.
        thread.join(timeout=5)

    _flush = flush
    atexit.register(flush)


def flush() -> None:
    """Lets every filtered line out before an `os._exit`."""
    if _flush is not None:
        _flush()
