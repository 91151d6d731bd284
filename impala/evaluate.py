"""Evaluate a trained IMPALA run by the paper's protocol (IMPALA App. G).

    python -m impala.evaluate RUN_DIR [--episodes 200] [--seed 1]

Plays `--episodes` full episodes with the run's latest checkpoint, sampling
actions from the policy, in the run's own env with only what the evaluation
protocol fixes put back to the papers' values (for Atari: up to 30 no-op
starts, the 108K-frame cap, no life-loss terminals; rewards are never clipped
by the env). Prints progress, then the mean raw return and, for Atari, the
human-normalised score (no-op protocol), and writes RUN_DIR/eval_step<N>.json.
"""

from __future__ import annotations

import json
import pathlib
import time

import numpy as np
import tensorflow as tf
from absl import flags

from common import cli, envs, run_dir, scores
from common import config as config_lib
from common.errors import UsageError
from impala import networks
from impala.config import ImpalaConfig

flags.DEFINE_integer("episodes", 200, "Evaluation episodes (IMPALA App. G: 200).")
flags.DEFINE_integer("seed", 1, "Seed of the evaluation env and the action sampling.")
flags.DEFINE_float("log_every_s", 10.0, "Seconds between progress lines.")
FLAGS = flags.FLAGS


def evaluation_env(config: ImpalaConfig, seed: int):
    """The run's env, with the options the evaluation protocol fixes at the papers' values."""
    return envs.make(config.env, seed=seed, **envs.evaluation_options(config.env, config.env_options))


def load(directory: pathlib.Path) -> tuple[ImpalaConfig, networks.ActorCritic, int]:
    """The run's config, its network restored from the latest checkpoint, and the step."""
    config = config_lib.load(ImpalaConfig, directory / "config.json", "the run's")
    latest = tf.train.latest_checkpoint(str(directory / "checkpoints"))
    if latest is None:
        raise UsageError(f"{directory} has no checkpoint to evaluate")
    env = evaluation_env(config, seed=0)
    network = networks.make(config, env.observation_space, int(env.action_space.n))
    observation, _ = env.reset()
    network.step(observation[None], tf.zeros((1,), tf.bool), network.initial_state(1))
    step = tf.Variable(0, dtype=tf.int64)
    learner = tf.Module()
    learner.network, learner.steps = network, step
    tf.train.Checkpoint(learner=learner).restore(latest).expect_partial()
    return config, network, int(step.numpy())


def evaluate(
    config: ImpalaConfig, network: networks.ActorCritic, episodes: int, seed: int, log_every_s: float = 10.0
) -> list[float]:
    env = evaluation_env(config, seed)
    policy = tf.function(network.step, jit_compile=networks.xla_compiles_network(config.xla))
    rng = np.random.default_rng(seed)
    returns, start, last_line = [], time.monotonic(), time.monotonic()
    for _ in range(episodes):
        observation, _ = env.reset()
        state, first, total, done = network.initial_state(1), True, 0.0, False
        while not done:
            output, state = policy(observation[None], tf.constant([first]), state)
            probs = tf.nn.softmax(output.policy_logits[0]).numpy().astype(np.float64)
            action = int(rng.choice(len(probs), p=probs / probs.sum()))
            observation, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done, first = terminated or truncated, False
        returns.append(total)
        if time.monotonic() - last_line >= log_every_s or len(returns) == episodes:
            last_line = time.monotonic()
            eta = (last_line - start) / len(returns) * (episodes - len(returns))
            print(f"episodes {len(returns)}/{episodes} | mean return {np.mean(returns):.2f} | "
                  f"ETA {run_dir.duration(eta)}", flush=True)  # fmt: skip
    return returns


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise UsageError("expected one run directory: python -m impala.evaluate RUN_DIR")
    if FLAGS.episodes < 1:
        raise UsageError(f"--episodes={FLAGS.episodes}: must be >= 1")
    directory = pathlib.Path(argv[1])
    config, network, step = load(directory)
    start = time.time()
    returns = evaluate(config, network, FLAGS.episodes, FLAGS.seed, FLAGS.log_every_s)
    family, name = envs.parse(config.env)
    result = {
        "env": config.env, "checkpoint_step": step, "episodes": len(returns), "seed": FLAGS.seed,
        "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
        "wall_time_s": round(time.time() - start, 1),
    }  # fmt: skip
    if family == "atari":
        result["human_normalized"] = scores.normalized(name, result["mean_return"], "atari_noop")
    (directory / f"eval_step{step}.json").write_text(json.dumps(result, indent=2) + "\n")
    normalized = f", {100 * result['human_normalized']:.1f}% of human" if "human_normalized" in result else ""
    print(
        f"{config.env} at learner step {step}: mean return {result['mean_return']:.2f} "
        f"± {result['std_return']:.2f} over {len(returns)} episodes{normalized}"
    )


if __name__ == "__main__":
    cli.run(main)
