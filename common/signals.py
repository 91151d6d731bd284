"""Ctrl-C and SIGTERM: how a training run, and each driver of training runs, stops and says it stopped.

A training run stopped by either signal saves its checkpoint and exits 128 +
the signal's number, as a shell reports a process a signal ended, so a script
tells it from a finished run (0) and from a failed one. A driver (a sweep, a
suite, a study script) hands the signal on to its runs, waits while they save,
and exits with the same status.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from typing import Any, Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTED_EXIT_CODES = tuple(128 + signum for signum in STOP_SIGNALS)

Handler = Callable[[int, object], None]


def exit_status(returncode: int) -> int:
    """A child process's exit status as a shell reports it: 128 + N where signal N ended it.

    `subprocess` gives -N for a child that a signal ended. A training run
    that Ctrl-C or SIGTERM reaches before it installs its handler (while it
    imports TensorFlow, say) ends that way, and a driver must tell that stop
    (130, 143) from a failure, as it does for a run that saved and exited.
    """
    return 128 - returncode if returncode < 0 else returncode


@contextlib.contextmanager
def on_stop_signals(handler: Handler) -> Iterator[None]:
    """Within the block, Ctrl-C and SIGTERM call `handler`; the handlers it replaced come back after it."""
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, replaced in previous.items():
            signal.signal(signum, replaced)


def call_handing_on(command: list[str], hang_up: bool = False, **popen: Any) -> tuple[int, int | None]:
    """Runs `command` to its end, handing it each Ctrl-C or SIGTERM that reaches this process.

    Returns its exit status (`exit_status`) and the first stop signal handed
    on, or None. A stop that came while the child started is handed on once it
    has: one signal, not two. With `hang_up`, a SIGHUP (the terminal closed) is
    handed on as SIGTERM, for a child in a session of its own, which no
    terminal's signal reaches.
    """
    stops: list[int] = []
    handed: list[int] = []
    process: subprocess.Popen | None = None

    def hand_on(signum: int, _) -> None:
        signum = signal.SIGTERM if signum == signal.SIGHUP else signum
        stops.append(signum)
        if process is not None:
            handed.append(signum)
            process.send_signal(signum)

    previous = signal.signal(signal.SIGHUP, hand_on) if hang_up else None
    try:
        with on_stop_signals(hand_on):
            process = subprocess.Popen(command, **popen)
            if stops and not handed:
                process.send_signal(stops[0])
            return exit_status(process.wait()), (stops[0] if stops else None)
    finally:
        if hang_up:
            signal.signal(signal.SIGHUP, previous)


class StopRequested(KeyboardInterrupt):
    """Ctrl-C or SIGTERM reached a driver of child processes (or SIGTERM any command); it exits `exit_code`."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


def raise_on_stop_signals() -> None:
    """From now on the first Ctrl-C or SIGTERM raises `StopRequested` in the main thread; later ones are ignored.

    For a driver whose children save a checkpoint when signalled: it must wait
    for them, so a second signal changes nothing. Python alone would raise
    nothing where SIGINT came ignored (a background job of a non-interactive
    shell, `nohup ... &`), and a SIGTERM would end the driver and leave its
    children without it.
    """

    def handler(signum: int, _) -> None:
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, signal.SIG_IGN)
        if _deferred.depth:
            _deferred.signals.append(signum)
            return
        raise StopRequested(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)


class _Deferred:
    def __init__(self):
        self.depth = 0  # Nested `stops_deferred` blocks now running.
        self.signals: list[int] = []  # The stop that came within them.


_deferred = _Deferred()


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """Within the block, the stop `raise_on_stop_signals` raises waits for the block's end.

    For a driver's start of a child process and its record of it, which must
    happen both or neither: raised between the two, the stop would reach every
    child the driver knows of, and not the one it just started, which runs on
    in a session of its own.
    """
    _deferred.depth += 1
    try:
        yield
    finally:
        _deferred.depth -= 1
    if not _deferred.depth and _deferred.signals:
        raise StopRequested(_deferred.signals.pop())
