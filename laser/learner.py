"""LASER's learner: IMPALA's (optimizer, schedule, counters) with Algorithm 1's loss.

Each batch holds B_online fresh unrolls from the queue first, then B_replay
replayed ones (`laser.agent`); the loss is `laser.losses.laser_loss`. Frames
count fresh experience only: a replayed unroll was counted when it was fresh.
"""

from __future__ import annotations

import tensorflow as tf

from impala import learner as impala_learner
from impala.networks import AgentOutput
from laser import losses
from laser.config import LaserConfig


class Learner(impala_learner.Learner):
    @staticmethod
    def new_unrolls_per_batch(config: LaserConfig) -> int:
        return config.dequeued_per_step

    def _losses_from_outputs(self, b: dict[str, tf.Tensor], outputs: AgentOutput) -> dict[str, tf.Tensor]:
        c = self.config
        result = losses.laser_loss(
            *self._loss_inputs(b, outputs),
            num_online=c.online_batch_size, trust_region_threshold=c.trust_region_threshold if c.trust_region else None,
            baseline_cost=c.baseline_cost, entropy_cost=c.entropy_cost, reduction=c.loss_reduction,
            correction=c.correction, clip_rho_threshold=c.clip_rho_threshold,
            clip_pg_rho_threshold=c.clip_pg_rho_threshold,
        )  # fmt: skip
        return result._asdict()
