"""Evaluate a trained LASER run: IMPALA's protocol (sampling from pi; Atari: no-op starts).

    python -m laser.evaluate RUN_DIR [--episodes 200] [--seed 1]

Writes RUN_DIR/eval_step<N>.json; see `impala.evaluate` for the protocol.

This is IMPALA's protocol, not LASER's: LASER's Atari scores (App. D) are the
mean of the last 100 training episodes before 50M or 200M frames, from up to 37
no-op starts. The LASER studies here report that training measure (`last100`).
"""

from __future__ import annotations

from common import cli
from impala import evaluation
from laser.config import LaserConfig

main = evaluation.command(
    "laser.evaluate", LaserConfig, "IMPALA App. G: 200; LASER's App. D scores training episodes instead"
)

if __name__ == "__main__":
    cli.run(main)
