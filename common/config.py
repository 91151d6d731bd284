"""Configs are frozen dataclasses; overrides replace fields by name.

Presets are module-level instances. An entry point turns its flags into a
`Request` (what the user asked for) and calls `resolve`, a pure function of
the request and the agent's presets; `resume` applies a request to a run's
saved config, where only the operational fields may change.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Mapping, Sequence, TypeVar

from common import cli, envs
from common.errors import UsageError, choice_error

C = TypeVar("C")

# What a resumed run may change: its budget and how it is run, never its maths.
OPERATIONAL_FIELDS = ("total_frames", "num_actors", "learner_threads", "log_every_s", "checkpoint_every_s")
# The envs' and numpy's legacy seeders take seeds below 2^32, and env i of a
# batch is seeded seed + i (`common.envs`): half the range leaves room for both.
MAX_SEED = 2**31 - 1
MAX_FRAMES = cli.MAX_FRAMES  # The largest budget a config takes.
# Reverb keeps a table's max_size as a C int: a larger one raised a TypeError from its bindings.
MAX_TABLE_SIZE = 2**31 - 1


def check_table_size(name: str, value: int, unit: str = "items") -> None:
    """A `UsageError` unless `value`, a config field that sizes a Reverb table, fits one."""
    if value > MAX_TABLE_SIZE:
        raise UsageError(f"{name}={value}: must be at most {MAX_TABLE_SIZE:,} {unit} (a Reverb table's largest)")


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The fields every agent's config starts with: its training env and its network's torso."""

    env: str = "toy:catch"
    # Training-env options, as (name, value) pairs; evaluation uses the env's
    # defaults, which are the papers' evaluation protocol.
    env_options: tuple[tuple[str, Any], ...] = ()
    network: str = "toy"

    # Fields added after runs were first saved, which a saved config may lack (`from_json`): each one's
    # default is what runs saved before it did. Not annotated, so a class attribute, not a field.
    ADDED_FIELDS = ()


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user asked for; None means "not given" (never 0 or "")."""

    preset: str | None = None
    config_file: str | None = None
    env: str | None = None
    frames: float | None = None
    actors: int | None = None
    seed: int | None = None
    overrides: tuple[str, ...] = ()  # NAME=VALUE, from --config_override.
    env_options: tuple[str, ...] = ()  # NAME=VALUE, from --env_option.


def override(config: C, overrides: Mapping[str, Any], what: str) -> C:
    """`config` with `overrides` applied; unknown names raise a `UsageError`."""
    known = [field.name for field in dataclasses.fields(config)]
    for name in overrides:
        if name not in known:
            raise choice_error(f"{what} option", name, known)
    return dataclasses.replace(config, **overrides)


def check_run_fields(config: Any) -> None:
    """A `UsageError` for a bad value of the fields every agent's config has: seed, budget and the run's periods."""
    if not 0 <= config.seed <= MAX_SEED:
        raise UsageError(f"seed={config.seed}: must be in [0, {MAX_SEED}]")
    if not 1 <= config.total_frames <= MAX_FRAMES:
        raise UsageError(f"total_frames={config.total_frames:g}: must be in [1, {MAX_FRAMES:g}]")
    for name in ("log_every_s", "checkpoint_every_s"):
        if not getattr(config, name) > 0:  # 0 would log or checkpoint after every step.
            raise UsageError(f"{name}={getattr(config, name)}: must be > 0 seconds")


RMSPROP_FORMS = ("tf1", "torch")  # `common.optimizers.rmsprop(form, ...)`'s choices.


def check_rmsprop(config: Any) -> None:
    """A `UsageError` for RMSProp hyper-parameters outside their ranges (`common.optimizers`)."""
    for name in ("rmsprop_decay", "rmsprop_momentum"):  # Averaging weights: 1 would never move.
        if not 0.0 <= getattr(config, name) < 1.0:
            raise UsageError(f"{name}={getattr(config, name)}: must be in [0, 1)")
    if not config.rmsprop_epsilon > 0:  # It keeps the step finite where the mean square is 0.
        raise UsageError(f"rmsprop_epsilon={config.rmsprop_epsilon}: must be > 0")


def to_json(config: Any) -> str:
    """The resolved config as JSON, for the run directory."""
    return json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True, default=str)


def from_json(cls: type[C], text: str, source: str) -> C:
    """A config of `cls` from JSON text; a one-line `UsageError` for anything else."""
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{source} is not valid JSON ({error.msg}, line {error.lineno})") from None
    if not isinstance(fields, dict):
        raise UsageError(f"{source} must hold a JSON object of config fields")
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - set(defaults))
    if unknown:
        raise UsageError(f"{source} has unknown config fields {', '.join(unknown)}; accepted: {', '.join(defaults)}")
    for name, value in fields.items():
        fields[name] = _typed(name, value, defaults[name], source)
    # A saved config names every field: one that lacked, say, its learning rate would run at the default's.
    missing = [name for name in defaults if name not in fields and name not in cls.ADDED_FIELDS]
    if missing:
        raise UsageError(
            f"{source} lacks config field(s) {', '.join(missing)}: a saved config names every field (a run's "
            "provenance.json records its config too)"
        )
    try:
        return cls(**fields)
    except (TypeError, UsageError) as error:  # A value the config refuses: named with its file, as the rest.
        raise UsageError(f"{source}: {error}") from None


def load(cls: type[C], path: str | pathlib.Path, what: str = "--config") -> C:
    """The config saved at `path`, checked like `from_json`."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise UsageError(f"{what} {path}: {'a directory, not a file' if path.is_dir() else 'no such file'}")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{what} {path}: not readable as JSON text ({error})") from None
    return from_json(cls, text, str(path))


def _typed(name: str, value: Any, default: Any, source: str) -> Any:
    """`value` from JSON as the type of the field's default (tuples of pairs stay tuples)."""
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
            raise UsageError(f"{source}: field {name} must be a list of [name, value] pairs")
        return tuple(tuple(pair) for pair in value)
    expected = type(default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise UsageError(f"{source}: field {name}={value!r} must be a {expected.__name__}")
    return value


# The flags that set a config field of another name.
_FLAG_FIELDS = {"frames": "total_frames", "actors": "num_actors"}


def requested_fields(request: Request, base: Any) -> dict[str, Any]:
    """The fields `request` sets on top of `base`, typed, without env options."""
    defaults = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.name != "env_options"}
    # Env options are pairs, set one by one with --env_option, not by --config_override.
    fields = cli.parse_assignments(request.overrides, defaults, "--config_override", what="config field")
    if request.frames is not None and (not 1 <= request.frames <= MAX_FRAMES or not float(request.frames).is_integer()):
        raise UsageError(
            f"--frames={request.frames:g}: must be a whole number of frames in [1, {MAX_FRAMES:g}], e.g. 5e6"
        )
    flagged = {
        "env": request.env,
        "frames": None if request.frames is None else int(request.frames),
        "actors": request.actors,
        "seed": request.seed,
    }
    for flag, value in flagged.items():
        if value is None:
            continue
        name = _FLAG_FIELDS.get(flag, flag)
        if name in fields and fields[name] != value:  # Neither may win silently.
            raise UsageError(f"--{flag} and --config_override {name}=... disagree; pass one of them")
        fields[name] = value
    return fields


def overrides_field(overrides: Sequence[str], name: str) -> bool:
    """Whether `--config_override` values (NAME=VALUE) set the field `name`."""
    return any(o.split("=", 1)[0].strip() == name for o in overrides)


def resolve(presets: Mapping[str, C], default_preset: str, request: Request, what: str) -> C:
    """The preset (or the saved config file) with every requested field applied."""
    if request.config_file is not None:
        base = load(type(presets[default_preset]), request.config_file)
        if request.preset is not None:
            raise UsageError("--config and --preset exclude each other: a saved config already names its settings")
    else:
        preset = request.preset if request.preset is not None else default_preset
        if preset not in presets:
            raise choice_error("preset", preset, presets)
        base = presets[preset]
    fields = requested_fields(request, base)
    spec = fields.get("env", base.env)
    # The agent's config decides whether it trains on a suite (IMPALA §5.3).
    envs.parse(spec, suites=True)
    # A preset's env options (e.g. App. G's life-loss terminals) hold for every
    # game of its env family and mean nothing to another family.
    same_family = envs.parse(spec, suites=True)[0] == envs.parse(base.env, suites=True)[0]
    env_options = dict(base.env_options) if same_family else {}
    env_options.update(cli.parse_assignments(request.env_options, envs.option_fields(spec), "--env_option"))
    fields["env_options"] = tuple(sorted(env_options.items()))
    return override(base, fields, what)


# A preset's fields that the flags set run by run, not its maths.
_PER_RUN = ("env", "env_options", "seed")


def start_flags(saved: Any, config: Any) -> list[str]:
    """The flags that give a resumed start `config`'s operational changes to the `saved` config again: `--actors N`,
    `--config_override NAME=VALUE`. Its budget is left out: the run's record keeps it (`run_dir.last_budget`).

    config.json stays as saved, so a resume hint without them would quietly start the saved actors again.
    """
    flags = []
    for name in OPERATIONAL_FIELDS:
        if name != "total_frames" and hasattr(saved, name) and getattr(config, name) != getattr(saved, name):
            value = getattr(config, name)
            flags.append(f"--actors {value}" if name == "num_actors" else f"--config_override {name}={value}")
    return flags


def _how_given(saved: Any, allowed: Sequence[str], by_override: bool) -> str:
    """The fields of `allowed` that `saved` has, each with the flags that set it on a resume.

    A sweep takes its budget and actors only as flags; a run (`by_override`) also by --config_override.
    """
    flag_of = {
        field: f"--{flag}" + (" or --config_override" if by_override else "") for flag, field in _FLAG_FIELDS.items()
    }
    named = [n for n in allowed if hasattr(saved, n)]
    by_flag = [f"{n} ({flag_of[n]})" for n in named if n in flag_of]
    others = [n for n in named if n not in flag_of]
    if others:
        by_flag.append(f"{', '.join(others)} (--config_override)")
    return ", ".join(by_flag)


def resume(
    saved: C,
    request: Request,
    presets: Mapping[str, C],
    what: str,
    kind: str = "run",
    allowed: Sequence[str] | None = None,
) -> C:
    """The run's saved config with the requested operational changes.

    Anything else the request would change (the env, the network, the maths)
    is a `UsageError` naming the field: a resumed run is the same experiment.
    `kind` names what resumes in that error; `allowed`, if given, narrows the
    fields it may change below `OPERATIONAL_FIELDS` (a sweep's resume: its budget and actors).
    """
    by_override = allowed is None
    allowed = OPERATIONAL_FIELDS if allowed is None else allowed
    if request.config_file is not None:
        raise UsageError("--resume runs the run's own config.json; drop --config")
    preset = saved
    if request.preset is not None:
        if request.preset not in presets:
            raise choice_error("preset", request.preset, presets)
        preset = presets[request.preset]

    def base(name: str) -> Any:
        # The preset's maths must be the run's; its env and seed are a start's
        # choice (the flags), so a run's own command without --env resumes it.
        return getattr(saved if name in _PER_RUN else preset, name)

    fields = {f.name: base(f.name) for f in dataclasses.fields(saved) if f.name not in OPERATIONAL_FIELDS}
    requested = requested_fields(request, saved)
    fields.update(requested)
    if request.env_options:
        given = cli.parse_assignments(request.env_options, envs.option_fields(saved.env), "--env_option")
        fields["env_options"] = tuple(sorted({**dict(saved.env_options), **given}.items()))
    changed = [name for name, value in fields.items() if value != getattr(saved, name)]
    forbidden = [name for name in changed if name not in allowed]
    if forbidden:
        name = forbidden[0]
        from_flags = name in requested or (name == "env_options" and request.env_options)
        from_preset = request.preset is not None and not from_flags
        cause = f"--preset={request.preset}'s {name}" if from_preset else name
        raise UsageError(
            f"--resume keeps the {kind}'s saved config: {cause} would change from {getattr(saved, name)!r} to "
            f"{fields[name]!r}; a resumed {kind} may change only {_how_given(saved, allowed, by_override)}"
        )
    return override(saved, {name: fields[name] for name in changed}, what)
