"""Evaluate a trained prioritized Double DQN run (PER App. B.2.3).

    python -m per.evaluate RUN_DIR [--episodes 100] [--seed 1]

Plays `--episodes` full episodes with the run's latest checkpoint, acting
epsilon-greedily with the run's `eval_epsilon` (PER Table 5: 0.001), in the
run's own env with only what the evaluation protocol fixes put back to the
papers' values (for Atari: up to 30 no-op starts, the 108K-frame cap, no
life-loss terminals; rewards are never clipped by the env). PER evaluates from
human starts, which are not public: we use no-op starts and, for Atari, the
human-starts normalisation table (PER Table 7's random and human scores). Its
human-starts scores are of the best agent found during training (App. B.2.3,
after van Hasselt et al. 2016); this plays whichever checkpoint is latest.
Prints progress, then the mean raw return, and writes RUN_DIR/eval_step<N>.json.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from absl import flags

from common import cli, envs, evaluation
from per.config import PerConfig

if TYPE_CHECKING:
    from per import networks

evaluation.define_flags(100, "PER App. B.2.3: 100")
FLAGS = flags.FLAGS


def make_network(config: PerConfig, env) -> networks.QNetwork:
    from per import networks

    return networks.make(config, env.observation_space, int(env.action_space.n), name="q_network")


def start_protocol(env: str) -> str:
    """How evaluation episodes start. PER reports Atari from human starts; they are not public, so ours are no-op."""
    if envs.parse(env, suites=True)[0] == "atari":
        return "no-op starts (PER used human starts)"
    return "the env's own starts"


def main(argv: list[str]) -> None:
    directory = evaluation.run_directory(argv, "per.evaluate", FLAGS.episodes, FLAGS.envs)
    config = evaluation.load_config(directory, PerConfig, "per.evaluate")
    from per import actor  # TensorFlow loads here, once the command and RUN_DIR have passed their checks.

    network, step = evaluation.restore(directory, config, make_network)
    start = time.time()
    policy = actor.EpsilonGreedy(network, config.eval_epsilon, FLAGS.seed)
    returns = evaluation.play(config, policy, FLAGS.episodes, FLAGS.seed, FLAGS.log_every_s, num_envs=FLAGS.envs)
    extra = {"epsilon": policy.epsilon, "start_protocol": start_protocol(config.env)}  # The epsilon it played.
    evaluation.report(directory, config, step, returns, FLAGS.seed, time.time() - start, "atari_human_starts", extra)


if __name__ == "__main__":
    cli.run(main)
