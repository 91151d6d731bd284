"""Evaluate a trained LASER run: IMPALA's protocol (sampling from pi; Atari: no-op starts).

    python -m laser.evaluate RUN_DIR [--episodes 200] [--seed 1]

Writes RUN_DIR/eval_step<N>.json; see `impala.evaluate` for the protocol.
"""

from __future__ import annotations

from common import cli
from impala import evaluation
from laser.config import LaserConfig

main = evaluation.command(
    "laser.evaluate", LaserConfig, "IMPALA App. G: 200, the protocol LASER's Atari results follow"
)

if __name__ == "__main__":
    cli.run(main)
