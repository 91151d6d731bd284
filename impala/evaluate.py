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

import time

import numpy as np
import tensorflow as tf
from absl import flags

from common import cli, evaluation
from impala import networks
from impala.config import ImpalaConfig

evaluation.define_flags(200, "IMPALA App. G: 200")
FLAGS = flags.FLAGS


def make_network(config: ImpalaConfig, env) -> networks.ActorCritic:
    network = networks.make(config, env.observation_space, int(env.action_space.n))
    observation, _ = env.reset()
    network.step(observation[None], tf.zeros((1,), tf.bool), network.initial_state(1))  # Creates the variables.
    return network


class Sampling:
    """Samples actions from pi = softmax(logits), carrying the recurrent state."""

    def __init__(self, config: ImpalaConfig, network: networks.ActorCritic, seed: int):
        self._network = network
        self._step = tf.function(network.step, jit_compile=networks.xla_compiles_network(config.xla))
        self._rng = np.random.default_rng(seed)

    def reset(self) -> None:
        self._state, self._first = self._network.initial_state(1), True

    def __call__(self, observation: np.ndarray) -> int:
        output, self._state = self._step(observation[None], tf.constant([self._first]), self._state)
        self._first = False
        probs = tf.nn.softmax(output.policy_logits[0]).numpy().astype(np.float64)
        return int(self._rng.choice(len(probs), p=probs / probs.sum()))


def main(argv: list[str]) -> None:
    directory = evaluation.run_directory(argv, "impala.evaluate", FLAGS.episodes)
    config, network, step = evaluation.restore(directory, ImpalaConfig, make_network)
    start = time.time()
    returns = evaluation.play(config, Sampling(config, network, FLAGS.seed), FLAGS.episodes, FLAGS.seed,
                              FLAGS.log_every_s)  # fmt: skip
    evaluation.report(directory, config, step, returns, FLAGS.seed, time.time() - start, "atari_noop")


if __name__ == "__main__":
    cli.run(main)
