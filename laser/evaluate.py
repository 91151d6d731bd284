"""Evaluate a trained LASER run: IMPALA's protocol (sampling from pi; Atari: no-op starts).

    python -m laser.evaluate RUN_DIR [--episodes 200] [--seed 1]

Writes RUN_DIR/eval_step<N>.json; see `impala.evaluate` for the protocol.
"""

from __future__ import annotations

import time

from absl import flags

from common import cli, evaluation
from impala.agent import Sampling, make_network
from laser.config import LaserConfig

evaluation.define_flags(200, "IMPALA App. G: 200, the protocol LASER's Atari results follow")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> None:
    directory = evaluation.run_directory(argv, "laser.evaluate", FLAGS.episodes)
    config, network, step = evaluation.restore(directory, LaserConfig, make_network)
    start = time.time()
    returns = evaluation.play(config, Sampling(config, network, FLAGS.seed), FLAGS.episodes, FLAGS.seed,
                              FLAGS.log_every_s)  # fmt: skip
    evaluation.report(directory, config, step, returns, FLAGS.seed, time.time() - start, "atari_noop")


if __name__ == "__main__":
    cli.run(main)
