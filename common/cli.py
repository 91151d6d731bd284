"""Entry-point plumbing: absl flags with one-line errors and exit status 2."""

from __future__ import annotations

import math
import os
import re
import sys
from typing import Any, Callable, Iterable, Mapping

from absl import app, flags

from common.errors import UsageError, cli, exit_with_usage_error

# `define_frames` defines flags for its callers: they, not this module, own them (`--help`, unknown-flag errors).
flags.disclaim_key_flags()

# Far beyond any budget (Atari-57 at 200M frames a game is 1.1e10); frame
# counters are int64 tensors, which 1e20 would overflow. Here, not in `common.config`,
# so that drivers check --frames before importing the envs.
MAX_FRAMES = 10**15

# What absl says of an integer flag given a word: Python's own message, which names nothing accepted.
_NOT_AN_INTEGER = re.compile(r"invalid literal for int\(\) with base 10: .*$")
_MISSING = re.compile(r"Flag --(\w+) must have a value other than None")  # absl, per required flag left out.


class _FramesParser(flags.FloatParser):
    """A frame budget as a float (5e6 or 5000000); a word is refused naming what is accepted."""

    def convert(self, argument: Any) -> float:
        try:
            return super().convert(argument)
        except ValueError:
            raise ValueError(f"{argument!r} is not a number of frames; expected a whole number, e.g. 5e6") from None


def define_frames(help_text: str) -> None:
    """`--frames`, a float flag (default None) whose parse error names what is accepted."""
    flags.DEFINE(_FramesParser(), "frames", None, help_text, serializer=flags.ArgumentSerializer())


def run(main: Callable[[list[str]], Any], unknown_flag_hint: str = "") -> None:
    """`absl.app.run(main)`, where a bad flag or a `UsageError` is one line, exit 2.

    `unknown_flag_hint`: said after the accepted flags when a flag is unknown,
    where a user may have meant another entry point's (in parentheses).
    """
    _without_keras()

    def parse_flags(argv: list[str]) -> list[str]:
        if any(arg in ("-h", "--help", "--helpshort", "-help") for arg in argv[1:]):
            try:
                print_help()
                sys.stdout.flush()
            except BrokenPipeError:  # `--help | head`: the reader has gone, which is no error of ours.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit.
            sys.exit(0)
        try:
            remaining = flags.FLAGS(argv)
            check_finite_floats()
            return remaining
        except flags.UnrecognizedFlagError as error:
            hint = f" ({unknown_flag_hint})" if unknown_flag_hint else ""
            exit_with_usage_error(UsageError(f"unknown flag --{error.flagname}; accepted: {accepted_flags()}{hint}"))
        except (flags.Error, UsageError) as error:
            exit_with_usage_error(
                _missing_flags(str(error)) or _NOT_AN_INTEGER.sub("expected a whole number", str(error))
            )

    app.run(cli(main), flags_parser=parse_flags)


def _missing_flags(text: str) -> str | None:
    """absl's error for required flags left out ("flag --frames=None: Flag --frames must have a value other than
    None.", once per flag) as one line naming each with its help, or None for another error."""
    names = _MISSING.findall(text)
    if not names:
        return None
    return f"missing required flag{'s' if len(names) > 1 else ''}: " + "; ".join(
        f"--{name} ({_sentence(flags.FLAGS[name].help)})" for name in names
    )


def _sentence(text: str) -> str:
    """`text` without its closing full stop (an ellipsis kept), to stand in parentheses."""
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


def _without_keras() -> None:
    """Spares an entry point's process TensorFlow's import of Keras: about 1.4 s of CPU per process here.

    TF 2.15 imports `keras.src.optimizers` as it loads (for Keras' SavedModel
    registrations) and carries on if that import fails. Nothing here uses Keras:
    the networks are Sonnet's, the checkpoints `tf.train.Checkpoint`'s. Every run
    starts at least one such process (IMPALA and LASER one more per actor
    process). Where TensorFlow is loaded already, this changes nothing.
    """
    if "tensorflow" not in sys.modules:
        sys.modules.setdefault("keras", None)  # An import of keras then raises ImportError.


def flags_only(argv: list[str]) -> None:
    """A `UsageError` for words left after the flags: an entry point that takes none would ignore them."""
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments {argv[1:]}; flags only (see --help)")


def positive_integers(flag: str, texts: list[str], example: str) -> list[int]:
    """A list flag's values as positive integers, or a `UsageError` naming the first that is not one."""
    if not texts:
        raise UsageError(f"{flag}= names no count; expected positive integers, e.g. {example}")
    for text in texts:
        if not text.isdigit() or int(text) < 1:
            raise UsageError(f"{flag}: {text!r} is not a positive integer; expected e.g. {example}")
    return [int(text) for text in texts]


def check_finite_floats() -> None:
    """A `UsageError` for a float flag given as nan or ±inf.

    absl's bounds cannot refuse NaN (every comparison with it is false), and no
    budget, duration or rate here means anything at infinity.
    """
    for name in flags.FLAGS:
        value = flags.FLAGS[name].value
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--{name}={value}: expected a finite number")


def accepted_flags() -> str:
    """The entry point's flags, as `--help` lists them: `--a, --b, ...`."""
    names = sorted(flag.name for flag in flags.FLAGS.get_key_flags_for_module(sys.argv[0]))
    return ", ".join(f"--{name}" for name in names) or "none (it takes no flags)"


def list_as_main_flags(names: Iterable[str]) -> None:
    """Lists flags defined elsewhere as the entry point's own, in its `--help` and unknown-flag errors.

    `flags.adopt_module_key_flags` does this for its caller; here the caller is
    a shared module, so the entry point is named: absl keys the module run as
    __main__ by its path, argv[0].
    """
    for name in names:
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[name])


def print_help() -> None:
    """The entry point's docstring and its flags (with those it adopts), on stdout."""
    main = sys.modules["__main__"]
    print((main.__doc__ or "").strip() + "\n")
    print(flags.FLAGS.main_module_help())


def parse_value(name: str, text: str, default: Any) -> Any:
    """`text` converted to the type of `default`, or a `UsageError`."""
    if isinstance(default, bool):
        lowered = text.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise UsageError(f"option {name}={text!r}: expected true or false")
    kind = type(default) if default is not None else str
    if kind is int:  # Accept 5e6-style integers, as RL budgets are written.
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value.is_integer():
            raise UsageError(f"option {name}={text!r}: expected an integer")
        return int(value)
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise UsageError(f"option {name}={text!r}: expected a {kind.__name__}") from None
    if kind is float and not math.isfinite(value):
        raise UsageError(f"option {name}={text!r}: expected a finite number")
    return value


def parse_assignments(
    items: Iterable[str], fields: Mapping[str, Any], flag: str, what: str = "option"
) -> dict[str, Any]:
    """`["name=value", ...]` → `{name: typed value}`, typed by `fields`' defaults.

    `flag` (e.g. "--config_override") and `what` name the flag and a field in errors.
    """
    parsed = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"{flag} {item!r}: expected NAME=VALUE")
        if name not in fields:
            raise UsageError(f"unknown {what} {name!r}; accepted: {', '.join(fields)}")
        value = parse_value(name, text, fields[name])
        if name in parsed and parsed[name] != value:  # Which one was meant is not ours to guess.
            raise UsageError(f"{flag} sets {name} twice, to {parsed[name]!r} and {value!r}; give it once")
        parsed[name] = value
    return parsed
