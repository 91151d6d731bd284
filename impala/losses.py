"""IMPALA's V-trace actor-critic loss as a pure function (IMPALA §4.2).

    pg:       -sum_s rho_s log pi(a_s|x_s) (r_s + gamma v_{s+1} - V(x_s))   (§4.2, policy gradient)
    baseline:  sum_s 1/2 (v_s - V(x_s))^2                                   (§4.2, value update)
    entropy:   sum_s H(pi(.|x_s))                                            (§4.2, exploration bonus)
    loss = pg + baseline_cost * baseline - entropy_cost * entropy

with v_s the V-trace targets of eq. (1) (`impala/vtrace.py`). Losses are
summed over time and batch as IMPALA's release (scalable_agent) or averaged. LASER needs
two more inputs: a per-step `lambda_` that cuts the V-trace traces (its trust
region, LASER §4.2: lambda = 1[beta(s) < b]) together with a per-step `mask`
on the policy-gradient and baseline terms, and an `entropy_mask` (LASER takes
the entropy on online data only, §5.1).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Union

import tensorflow as tf

from impala import vtrace

REDUCTIONS = ("sum", "mean")
Scalar = Union[float, tf.Tensor]


class LossOutput(NamedTuple):
    loss: tf.Tensor  # [] the total, to minimise.
    pg_loss: tf.Tensor  # [] the reduced policy-gradient term.
    baseline_loss: tf.Tensor  # [] the reduced baseline term (without baseline_cost).
    entropy: tf.Tensor  # [] the mean entropy of pi over the (masked) steps.
    mean_rho: tf.Tensor  # [] the mean unclipped importance ratio pi/mu.


def entropy(logits: tf.Tensor) -> tf.Tensor:
    """H(pi(.|x)) per step: logits [..., A] -> [...]."""
    log_probs = tf.nn.log_softmax(logits)
    return -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)


def clip_rewards(rewards: tf.Tensor, mode: str) -> tf.Tensor:
    """Reward clipping: [-1, 1] (IMPALA App. G) or DMLab's asymmetric (App. D)."""
    if mode == "abs_one":
        return tf.clip_by_value(rewards, -1.0, 1.0)
    if mode == "dmlab_asymmetric":
        squashed = tf.tanh(rewards)
        return 0.3 * tf.minimum(squashed, 0.0) + 5.0 * tf.maximum(squashed, 0.0)
    return rewards


def vtrace_actor_critic_loss(
    behaviour_logits: tf.Tensor,
    target_logits: tf.Tensor,
    actions: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    *,
    baseline_cost: float,
    entropy_cost: float,
    reduction: str = "sum",
    correction: str = "vtrace",
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    lambda_: Scalar = 1.0,
    mask: Optional[tf.Tensor] = None,
    entropy_mask: Optional[tf.Tensor] = None,
) -> LossOutput:
    """The loss of IMPALA §4.2 on time-major unrolls.

    Args:
      behaviour_logits: [T, B, A] logits of mu, the actors' policy.
      target_logits: [T, B, A] logits of pi, the learner's policy.
      actions: [T, B] a_s, int.
      discounts: [T, B] gamma_s = gamma * (1 - terminal_s).
      rewards: [T, B] r_s, already clipped.
      values: [T, B] V(x_s).
      bootstrap_value: [B] V(x_T).
      baseline_cost, entropy_cost: the weights of the baseline and entropy terms.
      reduction: "sum" over time and batch (IMPALA's release) or "mean".
      correction: one of `impala.config.CORRECTIONS` (IMPALA Table 2).
      clip_rho_threshold: rho_bar; clip_pg_rho_threshold: the policy
        gradient's rho_bar.
      lambda_: Remark 2's lambda, a scalar or [T, B]; a 0 cuts the traces.
      mask: None or [T, B] weights of the pg and baseline terms per step.
      entropy_mask: None or [T, B] weights of the entropy term per step.

    Returns a `LossOutput`.
    """
    targets = vtrace.off_policy_targets(
        correction, behaviour_logits, target_logits, actions, discounts, rewards, values, bootstrap_value,
        clip_rho_threshold, clip_pg_rho_threshold, lambda_,
    )  # fmt: skip
    epsilon = vtrace.EPSILON_CORRECTION if correction == "epsilon" else 0.0
    return actor_critic_loss(
        target_logits, actions, values, targets.vs, targets.pg_advantages, targets.log_rhos,
        baseline_cost=baseline_cost, entropy_cost=entropy_cost, reduction=reduction, epsilon=epsilon, mask=mask,
        entropy_mask=entropy_mask,
    )  # fmt: skip


def actor_critic_loss(
    target_logits: tf.Tensor,
    actions: tf.Tensor,
    values: tf.Tensor,
    vs: tf.Tensor,
    pg_advantages: tf.Tensor,
    log_rhos: tf.Tensor,
    *,
    baseline_cost: float,
    entropy_cost: float,
    reduction: str = "sum",
    epsilon: float = 0.0,
    mask: Optional[tf.Tensor] = None,
    entropy_mask: Optional[tf.Tensor] = None,
) -> LossOutput:
    """§4.2's three terms from given targets (V-trace's, or LASER's trust-region V-trace).

    Args:
      target_logits: [T, B, A]; actions, values, vs, pg_advantages, log_rhos: [T, B].
      epsilon: the epsilon-correction's floor on pi(a|x) in log pi (0: none).
      mask, entropy_mask, baseline_cost, entropy_cost, reduction: as in
        `vtrace_actor_critic_loss`.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; accepted: {', '.join(REDUCTIONS)}")
    reduce = tf.reduce_sum if reduction == "sum" else tf.reduce_mean
    log_probs = vtrace.action_log_probs(target_logits, actions, epsilon)
    mask = tf.ones_like(values) if mask is None else tf.cast(mask, values.dtype)
    entropy_mask = tf.ones_like(values) if entropy_mask is None else tf.cast(entropy_mask, values.dtype)
    entropies = entropy(target_logits)
    pg_loss = reduce(-log_probs * pg_advantages * mask)
    baseline_loss = reduce(0.5 * tf.square(vs - values) * mask)
    entropy_bonus = reduce(entropies * entropy_mask)
    return LossOutput(
        loss=pg_loss + baseline_cost * baseline_loss - entropy_cost * entropy_bonus,
        pg_loss=pg_loss,
        baseline_loss=baseline_loss,
        entropy=tf.reduce_sum(entropies * entropy_mask) / tf.maximum(tf.reduce_sum(entropy_mask), 1.0),
        mean_rho=tf.reduce_mean(tf.exp(log_rhos)),
    )
