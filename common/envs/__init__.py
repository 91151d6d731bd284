"""One factory for every env family: `make("family:name", seed=..., **options)`.

Families and their names:

* `atari:<game>`: the 57 games of `atari.ATARI57`, options `atari.AtariOptions`;
* `minatar:<game>`: `minatar.GAMES`, options `minatar.MinAtarOptions`;
* `dmlab:<level>`: `dmlab.LEVELS`, options `dmlab.DmLabOptions`;
* `toy:catch`: a tiny env for tests, options `toy.ToyOptions`.

`make` returns a gymnasium `Env` (evaluation); `make_batched` returns N envs
stepped together with same-step autoreset (actors). Both take the same spec,
seed and options; env i of a batch is seeded `seed + i`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple

import gymnasium as gym

from common import config
from common.envs import atari, dmlab, minatar, toy
from common.envs.batch import SerialBatchEnv
from common.errors import UsageError, choice_error


class _Family(NamedTuple):
    names: tuple[str, ...]
    options: type
    single: Callable[[str, int, Any], gym.Env]


FAMILIES = {
    "atari": _Family(atari.ATARI57, atari.AtariOptions, atari.AtariEnv),
    "minatar": _Family(minatar.GAMES, minatar.MinAtarOptions, minatar.MinAtarEnv),
    "dmlab": _Family(dmlab.LEVELS, dmlab.DmLabOptions, dmlab.DmLabEnv),
    "toy": _Family(toy.GAMES, toy.ToyOptions, toy.CatchEnv),
}


def parse(spec: str) -> tuple[str, str]:
    """Splits and checks `"family:name"`, naming what is accepted on error."""
    family, sep, name = spec.partition(":")
    if not sep or not name:
        raise UsageError(f"bad env spec {spec!r}: expected FAMILY:NAME, FAMILY one of {', '.join(FAMILIES)}")
    if family not in FAMILIES:
        raise choice_error("env family", family, FAMILIES)
    if name not in FAMILIES[family].names:
        raise choice_error(f"{family} name", name, FAMILIES[family].names)
    return family, name


def resolve_options(spec: str, **options) -> Any:
    """The family's options dataclass for `spec` with `options` applied."""
    family, _ = parse(spec)
    defaults = FAMILIES[family].options()
    try:
        return config.override(defaults, options, family)
    except TypeError as error:  # A value of the wrong type for a field.
        raise UsageError(f"bad {family} option value: {error}") from error


def make(spec: str, seed: int = 0, **options) -> gym.Env:
    """One env for `spec`, e.g. `make("atari:pong", seed=1, terminal_on_life_loss=True)`."""
    family, name = parse(spec)
    return FAMILIES[family].single(name, seed, resolve_options(spec, **options))


def make_batched(spec: str, num_envs: int, seed: int = 0, **options):
    """`num_envs` envs stepped together: ale-py's threaded C++ vector env for
    Atari, a serial batch for the other families."""
    if num_envs < 1:
        raise UsageError(f"num_envs={num_envs}: must be >= 1")
    family, name = parse(spec)
    resolved = resolve_options(spec, **options)
    if family == "atari":
        return atari.AtariBatchEnv(name, num_envs, seed, resolved)
    single = FAMILIES[family].single
    return SerialBatchEnv(lambda s: single(name, s, resolved), num_envs, seed)


def frames_per_step(spec: str, **options) -> int:
    """Environment frames per agent step: the frame skip or action repeat."""
    family, _ = parse(spec)
    resolved = resolve_options(spec, **options)
    if family == "atari":
        return resolved.frame_skip
    if family == "dmlab":
        return resolved.action_repeat
    return 1


def option_fields(spec: str) -> dict[str, Any]:
    """The option names and defaults for `spec`'s family."""
    family, _ = parse(spec)
    return {f.name: f.default for f in dataclasses.fields(FAMILIES[family].options)}


# The options an evaluation protocol fixes (IMPALA App. G, PER §4): they go back
# to their defaults, which are the papers' evaluation protocol; every other
# training option (sticky actions, the frame stack, ...) stays as trained.
EVALUATION_PROTOCOL = {"atari": ("terminal_on_life_loss", "max_episode_frames", "noop_max")}


def evaluation_options(spec: str, training_options: Mapping[str, Any]) -> dict[str, Any]:
    """The training options of `spec` less those the evaluation protocol fixes."""
    family, _ = parse(spec)
    fixed = EVALUATION_PROTOCOL.get(family, ())
    return {name: value for name, value in dict(training_options).items() if name not in fixed}
