"""User-facing errors: one line naming what is accepted, exit status 2.

Library code raises `UsageError`; entry points wrap their `main` in `cli` so a
user who mistypes a flag, name or file sees one line and no traceback, and a
Ctrl-C or SIGTERM that no loop handles (an evaluation, a start-up) is one line
too, exit 130 or 143 as a shell reports it.
"""

from __future__ import annotations

import functools
import signal
import sys
from typing import Callable, Collection, Iterable, Sequence, TypeVar

from common.signals import StopRequested

USAGE_EXIT_CODE = 2
# After the program's name, where a Ctrl-C stopped a command before it wrote anything it could go on from.
INTERRUPTED = "interrupted; run the same command again"

F = TypeVar("F", bound=Callable)


class UsageError(ValueError):
    """Bad user input: an unknown name, a bad option value or a missing file."""


def choice_error(what: str, value: object, accepted: Iterable[object]) -> UsageError:
    """An error for `value` not among `accepted`, listing what is."""
    names = ", ".join(str(a) for a in accepted)
    return UsageError(f"unknown {what} {value!r}; accepted: {names}")


def check_choices(flag: str, what: str, given: Sequence[str], accepted: Collection[str]) -> None:
    """Refuses a list flag's names not in `accepted` (games, variants...), and an empty list, listing those that are.

    An empty list (`--games=`) is a mistake, not "the default", which the
    script puts in place of a flag left out before this check.
    """
    if not given:
        raise UsageError(f"{flag}= names no {what}; accepted: {', '.join(accepted)}")
    for name in given:
        if name not in accepted:
            raise UsageError(f"{flag}: {choice_error(what, name, accepted)}")


def exit_with_usage_error(error: Exception, program: str | None = None) -> None:
    """Prints `error` as one line on stderr and exits with status 2."""
    program = program or _program_name()
    message = " ".join(str(error).split())
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(USAGE_EXIT_CODE)


def _program_name() -> str:
    """`python -m package` for module entry points, else the script's name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return sys.argv[0].rsplit("/", 1)[-1]


def _terminated(signum: int, _) -> None:
    """SIGTERM as the Ctrl-C of `cli` (exit 143); a second ends the process at once, as without a handler."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise StopRequested(signum)


def cli(main: F) -> F:
    """Wraps an entry point so `UsageError` becomes a one-line exit 2."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        # Python leaves Ctrl-C ignored in a process started with it ignored (a
        # background job, a test runner's worker); here it stops any entry point.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # And `kill` as Ctrl-C: by its default action it ended a command with no word (a server without saying
        # where its tables are, a learner waiting for its server). Put back after, for a caller in a library use.
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            return main(*args, **kwargs)
        except UsageError as error:
            exit_with_usage_error(error)
        except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM outside a training loop (which saves and says so).
            # What such a command leaves resumes nothing (an evaluation, an exact study, a benchmark write only
            # at their end; a collection skips what it copied): the way on is the same command.
            print(f"{_program_name()}: {INTERRUPTED}", file=sys.stderr)
            sys.exit(getattr(interrupt, "exit_code", 128 + signal.SIGINT))
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    return wrapped  # type: ignore[return-value]
