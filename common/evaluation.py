"""Evaluating a trained run, shared by the agents' `evaluate.py` entry points.

A run is played in its own env with only what the evaluation protocol fixes
put back to the papers' values (`common.envs.evaluation_options`), from the
latest checkpoint's network, printing progress with an ETA. The result goes
to RUN_DIR/eval_step<N>.json with, for Atari and DMLab, the human-normalised
score. A DMLab level is played and scored as its test level (IMPALA App. B).

A multi-task run (IMPALA §5.3, e.g. `dmlab:dmlab30`) is evaluated on each of
its levels: eval_step<N>.json then holds `levels`, one entry per scored level
with the single-task keys (`mean_return`, `std_return`, `episodes`,
`human_normalized`) and the level it was trained as, and the median, mean
and mean capped at 100% of the levels' human-normalised scores (IMPALA
Table 4's median; Table 3's mean capped).
"""

from __future__ import annotations

import itertools
import json
import pathlib
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np
from absl import flags

from common import cli, envs, provenance, run_dir, scores
from common import config as config_lib
from common.errors import UsageError

if TYPE_CHECKING:
    import tensorflow as tf


class Policy(Protocol):
    def reset(self, num_envs: int) -> None:
        """Play begins in `num_envs` envs, each at the start of an episode."""

    def __call__(self, observations: np.ndarray, first: np.ndarray) -> np.ndarray:
        """[N] actions for [N, ...] observations; first[i]: env i's observation begins an episode."""


# Envs played at once: one batched policy call per step instead of one per env and step.
EVAL_ENVS = 16


def define_flags(default_episodes: int, source: str) -> None:
    flags.DEFINE_integer("episodes", default_episodes, f"Evaluation episodes ({source}).")
    flags.DEFINE_integer(
        "envs", EVAL_ENVS, "Envs played at once; each plays a share of the episodes fixed before play begins."
    )
    flags.DEFINE_integer(
        "seed", 1, "Seed of the evaluation env and the policy's random choices.", lower_bound=0,
        upper_bound=config_lib.MAX_SEED,
    )  # fmt: skip
    flags.DEFINE_float("log_every_s", 10.0, "Seconds between progress lines.", lower_bound=0.0)
    cli.list_as_main_flags(("episodes", "envs", "seed", "log_every_s"))


# The score table each env family is normalised with (`common.scores`); Atari's is the caller's choice.
SCORE_PROTOCOLS = {"dmlab": "dmlab30"}


def evaluation_env(config: Any, seed: int, task: str | None = None, num_envs: int | None = None):
    """The run's env (or its `task`, in a multi-task run) as scored, with the options the
    evaluation protocol fixes at the papers' values; `num_envs` of them stepped together if given."""
    spec = envs.scored(config.env if task is None else envs.task_spec(config.env, task))
    options = envs.evaluation_options(spec, config.env_options)
    if num_envs is None:
        return envs.make(spec, seed=seed, **options)
    return envs.make_batched(spec, num_envs, seed=seed, **options)


def load_config(directory: pathlib.Path, config_class: type, module: str) -> Any:
    """The run's config.json, once RUN_DIR holds a checkpoint. An entry point loads it before TensorFlow: a
    wrong RUN_DIR is answered at once.

    `module`: the entry point (`per.evaluate`, ...); a run of another agent is refused by name.
    """
    if not directory.exists():
        raise UsageError(f"{directory}: no such run directory")
    if not (directory / "config.json").is_file():
        what = "a directory without a config.json" if directory.is_dir() else "a file"  # /dev/null too.
        raise UsageError(f"{directory} is {what}, not a run directory (give the directory a training run wrote)")
    run_dir.check_trained_by(directory, module)
    config = config_lib.load(config_class, directory / "config.json", "the run's")
    if not run_dir.has_checkpoint(directory):  # A run stopped before its first save: said before TensorFlow too.
        raise UsageError(f"{directory} has no checkpoint to evaluate")
    return config


def restore(
    directory: pathlib.Path, config: Any, make_network: Callable[[Any, Any], tf.Module]
) -> tuple[tf.Module, int]:
    """The learner's network from the run's latest checkpoint, and its update count.

    `make_network(config, env)` builds the network (with its variables) for
    the evaluation env; the checkpoint holds it as `learner.network`.
    """
    import tensorflow as tf

    # Checked first: TensorFlow logs an error line of its own for a state file naming missing files.
    latest = tf.train.latest_checkpoint(str(directory / "checkpoints")) if run_dir.has_checkpoint(directory) else None
    if latest is None:
        raise UsageError(f"{directory} has no checkpoint to evaluate")
    env = evaluation_env(config, seed=0)
    network = make_network(config, env)
    env.close()
    learner = tf.Module()
    learner.network, learner.steps = network, tf.Variable(0, dtype=tf.int64)
    with run_dir.reading_checkpoint(latest):
        tf.train.Checkpoint(learner=learner).restore(latest).expect_partial()
    return network, int(learner.steps.numpy())


def shares(episodes: int, num_envs: int) -> np.ndarray:
    """[N] episodes each env plays: `episodes` split as evenly as it goes over N = min(num_envs, episodes).

    Fixed before play, because counting whichever episodes end first would
    favour short episodes, i.e. (in most games) bad ones.
    """
    n = min(num_envs, episodes)
    counts = np.full(n, episodes // n)
    counts[: episodes % n] += 1
    return counts


def play(
    config: Any, policy: Policy, episodes: int, seed: int, log_every_s: float, task: str | None = None,
    num_envs: int = EVAL_ENVS,
) -> list[float]:  # fmt: skip
    """Undiscounted returns of `episodes` full episodes (of `task`, in a multi-task run), with progress lines.

    Up to `num_envs` envs play at once (the batch env resets an env in the
    step its episode ends), env i its `shares` of the episodes; the returns
    are listed env by env, each env's in the order played.
    """
    quota = shares(episodes, num_envs)
    batch = evaluation_env(config, seed, task, num_envs=len(quota))
    observations, _ = batch.reset()
    policy.reset(len(quota))
    first = np.ones(len(quota), bool)
    totals, returns = np.zeros(len(quota)), [[] for _ in quota]
    played, start = 0, time.monotonic()
    last_line = start
    while played < episodes:
        observations, rewards, terminated, truncated, _ = batch.step(policy(observations, first))
        totals += rewards
        first = terminated | truncated
        for i in np.flatnonzero(first):
            if len(returns[i]) < quota[i]:
                returns[i].append(float(totals[i]))
                played += 1
                if time.monotonic() - last_line >= log_every_s or played == episodes:
                    last_line = _progress(returns, episodes, start)
            totals[i] = 0.0
    batch.close()
    return [r for env_returns in returns for r in env_returns]


def _progress(returns: list[list[float]], episodes: int, start: float) -> float:
    """Prints episodes played, their mean return and the ETA; the time it printed."""
    played = [r for env_returns in returns for r in env_returns]
    now = time.monotonic()
    # Until every env has ended a game, the envs' first games end together, and episodes/s is far too low.
    if all(env_returns for env_returns in returns):
        eta = run_dir.duration((now - start) / len(played) * (episodes - len(played)))
    else:
        eta = "?"
    print(f"episodes {len(played)}/{episodes} | mean return {np.mean(played):.2f} | ETA {eta}", flush=True)
    return now


def write_result(directory: pathlib.Path, step: int, result: dict[str, Any]) -> pathlib.Path:
    """Writes RUN_DIR/eval_step<step>.json, with what made it (the commit may differ from training's).

    An earlier evaluation of the step is kept as eval_step<step>.json.<k>.
    """
    path = directory / f"eval_step{step}.json"
    if path.exists():
        kept = next(p for k in itertools.count(1) if not (p := path.with_name(f"{path.name}.{k}")).exists())
        path.rename(kept)
        print(f"an earlier evaluation of learner step {step} is kept as {kept}")
    path.write_text(json.dumps({**result, "provenance": provenance.stamp()}, indent=2) + "\n")
    return path


def report(
    directory: pathlib.Path, config: Any, step: int, returns: list[float], seed: int, wall_time_s: float,
    atari_protocol: str, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Writes RUN_DIR/eval_step<step>.json and prints the summary line."""
    family, name = envs.parse(envs.scored(config.env))
    result = {
        "env": config.env, "checkpoint_step": step, "episodes": len(returns), "seed": seed,
        "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
        "wall_time_s": round(wall_time_s, 1), **(extra or {}),
    }  # fmt: skip
    protocol = {"atari": atari_protocol, **SCORE_PROTOCOLS}.get(family)
    if protocol is not None:
        result["human_normalized"] = scores.normalized(name, result["mean_return"], protocol)
    path = write_result(directory, step, result)
    normalized = ""
    if protocol is not None:  # Which table, and how the episodes started where the agent says (PER's Atari).
        starts = f", played from {result['start_protocol']}" if "start_protocol" in result else ""
        normalized = f", {100 * result['human_normalized']:.1f}% of human (the {protocol} table{starts})"
    print(
        f"{config.env} at learner step {step}: mean return {result['mean_return']:.2f} "
        f"± {result['std_return']:.2f} over {len(returns)} episodes{normalized}; written to {path}"
    )
    return result


def play_suite(
    config: Any, policy: Policy, episodes: int, seed: int, log_every_s: float, num_envs: int = EVAL_ENVS
) -> dict[str, list[float]]:
    """`{level: returns}`: `episodes` episodes of each level of a multi-task run, each played as scored."""
    returns = {}
    for task in envs.tasks(config.env):
        print(f"evaluating {envs.scored(envs.task_spec(config.env, task))}", flush=True)
        returns[task] = play(config, policy, episodes, seed, log_every_s, task, num_envs)
    return returns


def suite_result(config: Any, returns: dict[str, list[float]]) -> dict[str, Any]:
    """Per scored level, its returns and human-normalised score; the median, mean and
    mean capped at 100% over the levels (IMPALA Table 4, Table 3 and §5.3)."""
    family, _ = envs.parse(config.env, suites=True)
    protocol = SCORE_PROTOCOLS[family]
    levels = {}
    for task, task_returns in returns.items():
        level = envs.parse(envs.scored(envs.task_spec(config.env, task)))[1]
        mean = float(np.mean(task_returns))
        levels[level] = {
            "trained_as": task, "episodes": len(task_returns), "mean_return": mean,
            "std_return": float(np.std(task_returns)), "human_normalized": scores.normalized(level, mean, protocol),
        }  # fmt: skip
    aggregate = scores.aggregate({level: entry["mean_return"] for level, entry in levels.items()}, protocol)
    return {"protocol": protocol, "levels": levels, **{f"human_normalized_{k}": v for k, v in aggregate.items()}}


def report_suite(
    directory: pathlib.Path, config: Any, step: int, returns: dict[str, list[float]], seed: int, wall_time_s: float
) -> dict[str, Any]:
    """Writes a multi-task run's RUN_DIR/eval_step<step>.json and prints the per-level table."""
    result = {
        "env": config.env, "checkpoint_step": step, "episodes": len(next(iter(returns.values()))), "seed": seed,
        "wall_time_s": round(wall_time_s, 1), **suite_result(config, returns),
    }  # fmt: skip
    path = write_result(directory, step, result)
    print(f"{'level':40s} {'mean return':>12s} {'human':>8s}")
    for level, entry in result["levels"].items():
        print(f"{level:40s} {entry['mean_return']:12.2f} {100 * entry['human_normalized']:7.1f}%")
    print(
        f"{config.env} at learner step {step}, {result['episodes']} episodes per level: median "
        f"{100 * result['human_normalized_median']:.1f}% of human, mean capped "
        f"{100 * result['human_normalized_mean_capped']:.1f}%, mean {100 * result['human_normalized_mean']:.1f}%; "
        f"written to {path}"
    )
    return result


def run_directory(argv: list[str], module: str, episodes: int, num_envs: int = EVAL_ENVS) -> pathlib.Path:
    """The one positional argument, RUN_DIR, after checking the flags' values."""
    if len(argv) != 2:
        raise UsageError(f"expected one run directory: python -m {module} RUN_DIR")
    if episodes < 1:
        raise UsageError(f"--episodes={episodes}: must be >= 1")
    if num_envs < 1:
        raise UsageError(f"--envs={num_envs}: must be >= 1")
    return pathlib.Path(argv[1])
