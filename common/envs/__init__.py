"""One factory for every env family: `make("family:name", seed=..., **options)`.

Families and their names:

* `atari:<game>`: the 57 games of `atari.ATARI57`, options `atari.AtariOptions`;
* `minatar:<game>`: `minatar.GAMES`, options `minatar.MinAtarOptions`;
* `dmlab:<level>`: `dmlab.LEVELS`, options `dmlab.DmLabOptions`; the suite
  `dmlab:dmlab30` (`dmlab.SUITES`);
* `toy:catch`: a tiny env for tests, options `toy.ToyOptions`.

`make` returns a gymnasium `Env` (evaluation); `make_batched` returns N envs
stepped together with same-step autoreset (actors). Both take the same spec,
seed and options; env i of a batch is seeded `seed + i`.

A suite, `dmlab:dmlab30`, names several tasks for one multi-task agent
(IMPALA §5.3). Only agents that train on a mixture accept it
(`parse(spec, suites=True)`). Its batches play fixed tasks round-robin
(`task_indices`); `make` gives its first task, whose spaces all its tasks share.
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
    suites: Mapping[str, tuple[str, ...]] = {}  # Suite name -> its tasks.
    scored: Callable[[str], str] = str  # The task a task's returns are scored as.


FAMILIES = {
    "atari": _Family(atari.ATARI57, atari.AtariOptions, atari.AtariEnv),
    "minatar": _Family(minatar.GAMES, minatar.MinAtarOptions, minatar.MinAtarEnv),
    "dmlab": _Family(dmlab.LEVELS, dmlab.DmLabOptions, dmlab.DmLabEnv, dmlab.SUITES, dmlab.score_level),
    "toy": _Family(toy.GAMES, toy.ToyOptions, toy.CatchEnv),
}


def parse(spec: str, suites: bool = False) -> tuple[str, str]:
    """Splits and checks `"family:name"`, naming what is accepted on error.

    A suite name is accepted only with `suites=True`: the callers that train
    one agent on a mixture (IMPALA §5.3) or that only look at the spec.
    """
    family, sep, name = spec.partition(":")
    if not sep or not name:
        raise UsageError(f"bad env spec {spec!r}: expected FAMILY:NAME, FAMILY one of {', '.join(FAMILIES)}")
    if family not in FAMILIES:
        raise choice_error("env family", family, FAMILIES)
    if name in FAMILIES[family].suites:
        if not suites:
            raise UsageError(
                f"{spec} is a multi-task suite (IMPALA §5.3) and only IMPALA trains on one: "
                f"python -m impala.train --preset {name}"
            )
        return family, name
    if name not in FAMILIES[family].names:
        raise choice_error(f"{family} name", name, (*FAMILIES[family].names, *FAMILIES[family].suites))
    return family, name


def check_installed(spec: str) -> None:
    """A `UsageError` saying how to install `spec`'s simulator where this machine lacks it: DeepMind Lab, built
    by hand (the other families come with the pinned requirements)."""
    family, _ = parse(spec, suites=True)
    if family == "dmlab":
        dmlab.import_lab()


def is_suite(spec: str) -> bool:
    """Whether `spec` names a multi-task suite rather than one env."""
    family, name = parse(spec, suites=True)
    return name in FAMILIES[family].suites


def tasks(spec: str) -> tuple[str, ...]:
    """The names `spec` trains on, in its family: a suite's tasks in order, or its one name."""
    family, name = parse(spec, suites=True)
    return FAMILIES[family].suites.get(name, (name,))


def task_spec(spec: str, task: str) -> str:
    """The spec of one of `spec`'s tasks, e.g. `task_spec("dmlab:dmlab30", "rooms_watermaze")`."""
    family, _ = parse(spec, suites=True)
    return f"{family}:{task}"


def task_indices(spec: str, num_envs: int, first_env: int = 0) -> list[int]:
    """Index into `tasks(spec)` of each env of a batch whose first env is env `first_env` overall.

    Round-robin: env g overall plays task g mod K. IMPALA §5.3 allocates a fixed
    number of actors to each task, and its release gives actor i task i mod K
    (scalable_agent `experiment.py`); here an actor steps a batch of envs, so
    the rule runs over every env of every actor, and a few actors of many envs
    still train every task.
    """
    count = len(tasks(spec))
    return [(first_env + j) % count for j in range(num_envs)]


def scored(spec: str) -> str:
    """The spec an evaluation plays and scores for a task: `rooms_*_train` -> `rooms_*_test` (IMPALA App. B)."""
    family, name = parse(spec, suites=True)
    return spec if name in FAMILIES[family].suites else f"{family}:{FAMILIES[family].scored(name)}"


def resolve_options(spec: str, **options) -> Any:
    """The family's options dataclass for `spec` with `options` applied."""
    family, _ = parse(spec, suites=True)
    defaults = FAMILIES[family].options()
    try:
        return config.override(defaults, options, family)
    except TypeError as error:  # A value of the wrong type for a field.
        raise UsageError(f"bad {family} option value: {error}") from error


def make(spec: str, seed: int = 0, **options) -> gym.Env:
    """One env for `spec`, e.g. `make("atari:pong", seed=1, terminal_on_life_loss=True)`; a suite's first task."""
    family, _ = parse(spec, suites=True)
    return FAMILIES[family].single(tasks(spec)[0], seed, resolve_options(spec, **options))


def make_batched(spec: str, num_envs: int, seed: int = 0, first_env: int = 0, **options):
    """`num_envs` envs stepped together: ale-py's threaded C++ vector env for
    Atari, a serial batch for the other families. A suite's env j plays task
    `task_indices(spec, num_envs, first_env)[j]`."""
    if num_envs < 1:
        raise UsageError(f"num_envs={num_envs}: must be >= 1")
    family, name = parse(spec, suites=True)
    resolved = resolve_options(spec, **options)
    if family == "atari":
        return atari.AtariBatchEnv(name, num_envs, seed, resolved)
    names = [tasks(spec)[i] for i in task_indices(spec, num_envs, first_env)]
    single = FAMILIES[family].single
    return SerialBatchEnv(lambda j, s: single(names[j], s, resolved), num_envs, seed)


def frames_per_step(spec: str, **options) -> int:
    """Environment frames per agent step: the frame skip or action repeat."""
    family, _ = parse(spec, suites=True)
    resolved = resolve_options(spec, **options)
    if family == "atari":
        return resolved.frame_skip
    if family == "dmlab":
        return resolved.action_repeat
    return 1


def option_fields(spec: str) -> dict[str, Any]:
    """The option names and defaults for `spec`'s family."""
    family, _ = parse(spec, suites=True)
    return {f.name: f.default for f in dataclasses.fields(FAMILIES[family].options)}


# The options an evaluation protocol fixes (IMPALA App. G, PER §4): they go back
# to their defaults, which are the papers' evaluation protocol; every other
# training option (sticky actions, the frame stack, ...) stays as trained.
EVALUATION_PROTOCOL = {"atari": ("terminal_on_life_loss", "max_episode_frames", "noop_max")}


def evaluation_options(spec: str, training_options: Mapping[str, Any]) -> dict[str, Any]:
    """The training options of `spec` less those the evaluation protocol fixes."""
    family, _ = parse(spec, suites=True)
    fixed = EVALUATION_PROTOCOL.get(family, ())
    return {name: value for name, value in dict(training_options).items() if name not in fixed}
