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

from common import cli
from impala import evaluation
from impala.config import ImpalaConfig

main = evaluation.command("impala.evaluate", ImpalaConfig, "IMPALA App. G: 200")

if __name__ == "__main__":
    cli.run(main)
