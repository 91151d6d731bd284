"""Checks an env: runs a uniform random policy and prints returns and speed.

python -m common.envs atari:pong --steps 2000 --option sticky_action_prob=0.25
"""

from __future__ import annotations

import time

import numpy as np
from absl import flags

from common import cli, envs
from common.config import MAX_SEED
from common.errors import UsageError

flags.DEFINE_integer(
    "seed", 0, "Seed of the env and of the random policy.", lower_bound=0, upper_bound=MAX_SEED
)  # Past the envs' own seed ranges, ale-py and numpy raised tracebacks.
flags.DEFINE_integer("steps", 1000, "Agent steps to run.", lower_bound=1)
flags.DEFINE_multi_string("option", [], "Env option NAME=VALUE; repeat for more")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise UsageError("expected one env spec, e.g. atari:pong, minatar:breakout or toy:catch")
    spec = argv[1]
    options = cli.parse_assignments(FLAGS.option, envs.option_fields(spec), "--option")
    env = envs.make(spec, seed=FLAGS.seed, **options)
    rng = np.random.default_rng(FLAGS.seed)
    env.reset()
    returns, episode_return, start = [], 0.0, time.perf_counter()
    for _ in range(FLAGS.steps):
        _, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        episode_return += reward
        if terminated or truncated:
            returns.append(episode_return)
            episode_return = 0.0
            env.reset()
    elapsed = time.perf_counter() - start
    mean = f"{np.mean(returns):.2f}" if returns else "n/a"
    print(
        f"{spec}: observation {env.observation_space.shape}, {env.action_space.n} actions, "
        f"{FLAGS.steps} steps in {elapsed:.2f}s ({FLAGS.steps / elapsed:.0f} steps/s), "
        f"{len(returns)} episodes, mean return {mean}"
    )


if __name__ == "__main__":
    cli.run(main)
