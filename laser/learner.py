"""LASER's learner: IMPALA's (optimizer, schedule, counters) with Algorithm 1's loss.

Each batch holds B_online fresh unrolls from the queue first, then B_replay
replayed ones (`laser.agent`); the loss is `laser.losses.laser_loss`. Frames
count fresh experience only: a replayed unroll was counted when it was fresh.

With prioritized replay (App. A.2) an update also takes each unroll's
importance weight w_i and yields each unroll's critic loss L_i, for the new
priorities (`laser.priorities`). Both pass through [B] variables, because
IMPALA's compiled step takes only the batch's loss fields and returns scalars:
`step` sets the weights before the update, and `critic_losses` reads the
losses after it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from impala import learner as impala_learner
from impala.networks import ActorCritic, AgentOutput
from laser import losses
from laser.config import LaserConfig


class Learner(impala_learner.Learner):
    def __init__(self, config: LaserConfig, network: ActorCritic, strategy: tf.distribute.Strategy | None = None):
        if strategy is not None:
            # IMPALA's replicas split the batch along B, but every replica would take the global
            # B_online and the full [B] weights: replayed unrolls would count as online.
            raise ValueError("LASER's learner runs on one device: its mixed batch is not split over replicas")
        super().__init__(config, network, strategy)
        self._importance_weights = self._critic_losses = None
        if config.prioritized_replay:  # Only then: a uniform run's checkpoints keep their layout.
            ones = tf.ones([config.batch_size])
            self._importance_weights = tf.Variable(ones, trainable=False, name="importance_weights")
            self._critic_losses = tf.Variable(tf.zeros_like(ones), trainable=False, name="critic_losses")

    @staticmethod
    def new_unrolls_per_batch(config: LaserConfig) -> int:
        return config.dequeued_per_step

    def step(self, batch: dict, importance_weights: np.ndarray | None = None) -> dict[str, float]:
        """One update; with prioritized replay, unroll i's terms weighted by `importance_weights` [B] (None: 1)."""
        if self._importance_weights is not None:
            weights = np.ones(self.config.batch_size) if importance_weights is None else importance_weights
            self._importance_weights.assign(np.asarray(weights, np.float32))
        elif importance_weights is not None:
            raise ValueError("importance_weights need prioritized replay (config.prioritized_replay)")
        return super().step(batch)

    @property
    def critic_losses(self) -> np.ndarray:
        """[B] L_i of the last update's unrolls (prioritized replay only)."""
        return self._critic_losses.numpy()

    def _losses_from_outputs(self, b: dict[str, tf.Tensor], outputs: AgentOutput) -> dict[str, tf.Tensor]:
        c = self.config
        result = losses.laser_loss(
            *self._loss_inputs(b, outputs),
            num_online=c.online_batch_size, trust_region_threshold=c.trust_region_threshold if c.trust_region else None,
            baseline_cost=c.baseline_cost, entropy_cost=c.entropy_cost, reduction=c.loss_reduction,
            correction=c.correction, clip_rho_threshold=c.clip_rho_threshold,
            clip_pg_rho_threshold=c.clip_pg_rho_threshold, importance_weights=self._importance_weights,
        )  # fmt: skip
        if self._critic_losses is not None:
            self._critic_losses.assign(result.unroll_critic_loss)
        return {name: value for name, value in result._asdict().items() if name != "unroll_critic_loss"}
