"""Evaluate a trained LASER run: IMPALA's protocol (sampling from pi; Atari: no-op starts).

    python -m laser.evaluate RUN_DIR [--episodes 200] [--seed 1]

Writes RUN_DIR/eval_step<N>.json; see `impala.evaluate` for the protocol.
"""

from __future__ import annotations

from absl import flags

from common import cli, evaluation
from impala.agent import evaluate
from laser.config import LaserConfig

evaluation.define_flags(200, "IMPALA App. G: 200, the protocol LASER's Atari results follow")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> None:
    evaluate(argv, "laser.evaluate", LaserConfig, FLAGS)


if __name__ == "__main__":
    cli.run(main)
