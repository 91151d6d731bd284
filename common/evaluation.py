"""Evaluating a trained run, shared by the agents' `evaluate.py` entry points.

A run is played in its own env with only what the evaluation protocol fixes
put back to the papers' values (`common.envs.evaluation_options`), from the
latest checkpoint's network, printing progress with an ETA. The result goes
to RUN_DIR/eval_step<N>.json with, for Atari, the human-normalised score.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any, Callable, Protocol

import numpy as np
import tensorflow as tf
from absl import flags

from common import config as config_lib
from common import envs, run_dir, scores
from common.errors import UsageError


class Policy(Protocol):
    def reset(self) -> None:
        """A new episode begins."""

    def __call__(self, observation: np.ndarray) -> int:
        """The action for one observation."""


def define_flags(default_episodes: int, source: str) -> None:
    flags.DEFINE_integer("episodes", default_episodes, f"Evaluation episodes ({source}).")
    flags.DEFINE_integer("seed", 1, "Seed of the evaluation env and the policy's random choices.")
    flags.DEFINE_float("log_every_s", 10.0, "Seconds between progress lines.")


def evaluation_env(config: Any, seed: int):
    """The run's env, with the options the evaluation protocol fixes at the papers' values."""
    return envs.make(config.env, seed=seed, **envs.evaluation_options(config.env, config.env_options))


def restore(
    directory: pathlib.Path, config_class: type, make_network: Callable[[Any, Any], tf.Module]
) -> tuple[Any, tf.Module, int]:
    """The run's config, the learner's network from the latest checkpoint, and its update count.

    `make_network(config, env)` builds the network (with its variables) for
    the evaluation env; the checkpoint holds it as `learner.network`.
    """
    config = config_lib.load(config_class, directory / "config.json", "the run's")
    latest = tf.train.latest_checkpoint(str(directory / "checkpoints"))
    if latest is None:
        raise UsageError(f"{directory} has no checkpoint to evaluate")
    env = evaluation_env(config, seed=0)
    network = make_network(config, env)
    env.close()
    learner = tf.Module()
    learner.network, learner.steps = network, tf.Variable(0, dtype=tf.int64)
    tf.train.Checkpoint(learner=learner).restore(latest).expect_partial()
    return config, network, int(learner.steps.numpy())


def play(config: Any, policy: Policy, episodes: int, seed: int, log_every_s: float) -> list[float]:
    """Undiscounted returns of `episodes` full episodes, with progress lines."""
    env = evaluation_env(config, seed)
    returns, start, last_line = [], time.monotonic(), time.monotonic()
    for _ in range(episodes):
        observation, _ = env.reset()
        policy.reset()
        total, done = 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(policy(observation))
            total += reward
            done = terminated or truncated
        returns.append(total)
        if time.monotonic() - last_line >= log_every_s or len(returns) == episodes:
            last_line = time.monotonic()
            eta = (last_line - start) / len(returns) * (episodes - len(returns))
            print(f"episodes {len(returns)}/{episodes} | mean return {np.mean(returns):.2f} | "
                  f"ETA {run_dir.duration(eta)}", flush=True)  # fmt: skip
    env.close()
    return returns


def report(
    directory: pathlib.Path, config: Any, step: int, returns: list[float], seed: int, wall_time_s: float,
    atari_protocol: str, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Writes RUN_DIR/eval_step<step>.json and prints the summary line."""
    family, name = envs.parse(config.env)
    result = {
        "env": config.env, "checkpoint_step": step, "episodes": len(returns), "seed": seed,
        "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
        "wall_time_s": round(wall_time_s, 1), **(extra or {}),
    }  # fmt: skip
    if family == "atari":
        result["human_normalized"] = scores.normalized(name, result["mean_return"], atari_protocol)
    (directory / f"eval_step{step}.json").write_text(json.dumps(result, indent=2) + "\n")
    normalized = f", {100 * result['human_normalized']:.1f}% of human" if "human_normalized" in result else ""
    print(
        f"{config.env} at learner step {step}: mean return {result['mean_return']:.2f} "
        f"± {result['std_return']:.2f} over {len(returns)} episodes{normalized}"
    )
    return result


def run_directory(argv: list[str], module: str, episodes: int) -> pathlib.Path:
    """The one positional argument, RUN_DIR, after checking the flags' values."""
    if len(argv) != 2:
        raise UsageError(f"expected one run directory: python -m {module} RUN_DIR")
    if episodes < 1:
        raise UsageError(f"--episodes={episodes}: must be >= 1")
    return pathlib.Path(argv[1])
