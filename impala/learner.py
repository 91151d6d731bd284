"""IMPALA's learner: V-trace actor-critic losses on batches of unrolls (§4.2).

The compiled `_train_step` is maths only. `step` around it counts frames,
anneals the learning rate and returns numbers; the training loop in
`impala/train.py` does the Reverb, logging and checkpoint side effects.

A batch holds B unrolls of T + 1 steps, batch-major as the dataset gives them.
Step t of an unroll carries the observation x_t, `first` (x_t opens an
episode), the action a_t, the behaviour logits of mu at x_t, and the reward
r_t and `terminal` flag that followed a_t. Steps 0..T-1 are learned from; step
T contributes only its observation, whose value is the bootstrap V(x_T), and is
learned from as step 0 of the next unroll.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from common.optimizers import RMSPropTF1
from impala import vtrace
from impala.config import ImpalaConfig
from impala.networks import ActorCritic


def clip_rewards(rewards: tf.Tensor, mode: str) -> tf.Tensor:
    """Reward clipping: [-1, 1] (IMPALA App. G) or DMLab's asymmetric (App. D)."""
    if mode == "abs_one":
        return tf.clip_by_value(rewards, -1.0, 1.0)
    if mode == "dmlab_asymmetric":
        squashed = tf.tanh(rewards)
        return 0.3 * tf.minimum(squashed, 0.0) + 5.0 * tf.maximum(squashed, 0.0)
    return rewards


def entropy(logits: tf.Tensor) -> tf.Tensor:
    """H(pi(.|x)) per step, [T, B]."""
    log_probs = tf.nn.log_softmax(logits)
    return -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)


class Learner(tf.Module):
    """Owns the network's optimizer state and counters (all checkpointable)."""

    def __init__(self, config: ImpalaConfig, network: ActorCritic):
        super().__init__(name="learner")
        self.config = config
        self.network = network
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="steps")
        self.frames = tf.Variable(0, dtype=tf.int64, trainable=False, name="frames")
        self._optimizer = None
        self._frames_per_batch = config.batch_size * config.unroll_length * config.frames_per_step

    @property
    def optimizer(self) -> RMSPropTF1:
        if self._optimizer is None:  # Variables exist only after the first call.
            self._optimizer = RMSPropTF1(
                self.network.trainable_variables,
                decay=self.config.rmsprop_decay,
                epsilon=self.config.rmsprop_epsilon,
                momentum=self.config.rmsprop_momentum,
            )
        return self._optimizer

    def build(self, batch: dict[str, tf.Tensor]) -> None:
        """Creates the variables (and the optimizer's) from one batch's shapes."""
        observations = _time_major(batch["observation"])
        self.network.unroll(observations, _time_major(batch["first"]), self._initial_state(batch))
        self.optimizer  # noqa: B018

    def learning_rate(self) -> float:
        """The learning rate, annealed linearly to 0 over the frame budget (App. G)."""
        progress = min(float(self.frames.numpy()) / self.config.total_frames, 1.0)
        return self.config.learning_rate * (1.0 - progress)

    def step(self, batch: dict[str, Any]) -> dict[str, float]:
        """One update; returns the losses and diagnostics as floats."""
        metrics = self._train_step(batch, tf.constant(self.learning_rate(), tf.float32))
        self.steps.assign_add(1)
        self.frames.assign_add(self._frames_per_batch)
        return {k: float(v) for k, v in metrics.items()}

    def _initial_state(self, batch):
        if "core_state" not in batch:
            return ()
        return tf.nest.map_structure(lambda s: s[:, 0], batch["core_state"])

    @tf.function(jit_compile=True)
    def _train_step(self, batch: dict[str, tf.Tensor], learning_rate: tf.Tensor) -> dict[str, tf.Tensor]:
        c = self.config
        reduce = tf.reduce_sum if c.loss_reduction == "sum" else tf.reduce_mean
        b = {k: _time_major(v) for k, v in batch.items() if k != "core_state"}
        actions = tf.cast(b["action"][:-1], tf.int32)
        rewards = clip_rewards(b["reward"][:-1], c.reward_clipping)
        discounts = c.discount * (1.0 - tf.cast(b["terminal"][:-1], tf.float32))
        with tf.GradientTape() as tape:
            outputs, _ = self.network.unroll(b["observation"], b["first"], self._initial_state(batch))
            values, logits = outputs.baseline[:-1], outputs.policy_logits[:-1]
            targets = vtrace.off_policy_targets(
                c.correction, b["behaviour_logits"][:-1], logits, actions, discounts, rewards,
                values, outputs.baseline[-1], c.clip_rho_threshold, c.clip_pg_rho_threshold,
            )  # fmt: skip
            epsilon = vtrace.EPSILON_CORRECTION if c.correction == "epsilon" else 0.0
            log_probs = vtrace.action_log_probs(logits, actions, epsilon)
            pg_loss = reduce(-log_probs * targets.pg_advantages)
            baseline_loss = reduce(0.5 * tf.square(targets.vs - values))
            entropy_bonus = reduce(entropy(logits))
            loss = pg_loss + c.baseline_cost * baseline_loss - c.entropy_cost * entropy_bonus
        variables = self.network.trainable_variables
        gradients = tape.gradient(loss, variables)
        gradient_norm = tf.linalg.global_norm(gradients)
        if c.max_grad_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, c.max_grad_norm, use_norm=gradient_norm)
        self.optimizer.apply(gradients, learning_rate)
        return {
            "loss": loss,
            "pg_loss": pg_loss,
            "baseline_loss": baseline_loss,
            "entropy": tf.reduce_mean(entropy(logits)),
            "gradient_norm": gradient_norm,
            "mean_rho": tf.reduce_mean(tf.exp(targets.log_rhos)),
            "learning_rate": learning_rate,
        }


def _time_major(x: tf.Tensor) -> tf.Tensor:
    """[B, T, ...] -> [T, B, ...]."""
    return tf.transpose(x, tf.concat([[1, 0], tf.range(2, tf.rank(x))], 0))
