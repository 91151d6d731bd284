"""LASER's actor-critic loss on a mixed batch (Algorithm 1, §4.3, §5.1), a pure function.

With the trust region, each step's behaviour relevance
beta_KL(pi, mu, s) = KL(pi(.|s) || pi~_mu(.|s)) (§4.3) decides the mask
lambda(s) = 1[beta_KL < b] (§4.2); the targets are the trust-region V-trace of
eq. (8) (`laser.trust_region.vtrace`), and a rejected step takes no part in the
policy-gradient or baseline terms (§4.3: "do not consider rejected transitions
for the policy gradient and value gradient updates"). Without it, the loss is
IMPALA's V-trace loss on the mixed batch, with any of IMPALA Table 2's
corrections. Either way the entropy bonus is taken on the online unrolls only
(§5.1), on all their steps: the trust region's mask does not apply to it (a
choice, see the README), and with no online unrolls there is none.

Equations and sections are numbered as in the ICLR 2020 text with its appendix
(`laser.trust_region`); the §4.3 sentence quoted above is in that text only.

With prioritized replay (App. A.2, Fig. 4 right) unroll i's policy-gradient and
baseline terms are scaled by its importance weight w_i (PER §3.4; online
unrolls: 1), and the output carries each unroll's critic loss, the baseline
term averaged over its T steps (unweighted),

    L_i = 1/T sum_s 1/2 (v_s - V(x_s))^2 lambda(s),

from which `laser.priorities` makes the replay's new priorities ("prioritization
via the critic's loss"). A rejected step adds nothing: there v_s = V(x_s).

Algorithm 1 writes the mask as KL(pi || mu) < b and the advantage as
v_s - V(x_s); we follow §4.3's KL to the implied policy pi~_mu (the text that
motivates it: pi~_mu fixes V-trace's bias, Proposition 1) and IMPALA's
advantage r_s + gamma_s v_{s+1} - V(x_s), on which LASER builds.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import tensorflow as tf

from impala import losses as impala_losses
from impala import vtrace as impala_vtrace
from laser import trust_region


class LaserLossOutput(NamedTuple):
    loss: tf.Tensor  # [] the total, to minimise.
    pg_loss: tf.Tensor
    baseline_loss: tf.Tensor
    entropy: tf.Tensor  # [] the mean entropy over the online steps.
    mean_rho: tf.Tensor
    accepted: tf.Tensor  # [] the fraction of steps the trust region accepted (1 without it).
    replay_accepted: tf.Tensor  # [] the same over the replayed unrolls only (1 without replay).
    mean_kl: tf.Tensor  # [] the mean beta_KL over all steps.
    unroll_critic_loss: tf.Tensor  # [B] L_i, each unroll's critic loss (App. A.2's priority). No gradient.


def online_mask(num_steps: int, num_online: int, batch_size: int) -> tf.Tensor:
    """[T, B] 1.0 on the first `num_online` unrolls (the queue's), 0.0 on the replayed ones."""
    return tf.tile(tf.cast(tf.range(batch_size) < num_online, tf.float32)[None], [num_steps, 1])


def laser_loss(
    behaviour_logits: tf.Tensor,
    target_logits: tf.Tensor,
    actions: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    *,
    num_online: int,
    trust_region_threshold: Optional[float],
    baseline_cost: float,
    entropy_cost: float,
    reduction: str = "sum",
    correction: str = "vtrace",
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    importance_weights: Optional[tf.Tensor] = None,
) -> LaserLossOutput:
    """The loss of Algorithm 1 on time-major unrolls, online unrolls first.

    Args:
      behaviour_logits, target_logits: [T, B, A] logits of mu and pi.
      actions, discounts, rewards, values: [T, B]; bootstrap_value: [B].
      num_online: B_online, how many of the B unrolls (the first) came from the queue.
      trust_region_threshold: b, or None for no trust region (plain V-trace, or
        `correction`, on the mixed batch).
      importance_weights: None, or [B] w_i scaling unroll i's policy-gradient and
        baseline terms (prioritized replay, App. A.2; 1 for the online unrolls).
      The rest: as `impala.losses.vtrace_actor_critic_loss`.
    """
    num_steps, batch_size = values.shape[0], values.shape[1]
    online = online_mask(num_steps, num_online, batch_size)
    if clip_rho_threshold is None:  # No truncation: pi~_mu = pi, and nothing is rejected.
        kl = tf.zeros_like(values)
    else:
        kl = tf.stop_gradient(trust_region.kl_to_implied(target_logits, behaviour_logits, clip_rho_threshold))
    if trust_region_threshold is None:
        mask = tf.ones_like(values)
        targets = impala_vtrace.off_policy_targets(
            correction, behaviour_logits, target_logits, actions, discounts, rewards, values, bootstrap_value,
            clip_rho_threshold, clip_pg_rho_threshold,
        )  # fmt: skip
        log_rhos = targets.log_rhos
    else:
        if correction != "vtrace":
            raise ValueError(f"the trust region is defined for V-trace (eq. 8), not correction={correction!r}")
        mask = tf.cast(kl < trust_region_threshold, values.dtype)
        log_rhos = impala_vtrace.action_log_probs(target_logits, actions) - impala_vtrace.action_log_probs(
            behaviour_logits, actions
        )
        targets = trust_region.vtrace(
            log_rhos, discounts, rewards, values, bootstrap_value, mask, clip_rho_threshold, clip_pg_rho_threshold
        )
    result = impala_losses.actor_critic_loss(
        target_logits, actions, values, targets.vs, targets.pg_advantages, log_rhos,
        baseline_cost=baseline_cost, entropy_cost=entropy_cost, reduction=reduction,
        epsilon=impala_vtrace.EPSILON_CORRECTION if correction == "epsilon" else 0.0,
        mask=weighted(mask, importance_weights),
        entropy_mask=online,
    )  # fmt: skip
    replayed = 1.0 - online
    return LaserLossOutput(
        **result._asdict(),
        accepted=tf.reduce_mean(mask),
        replay_accepted=tf.reduce_sum(mask * replayed) / tf.maximum(tf.reduce_sum(replayed), 1.0),
        mean_kl=tf.reduce_mean(kl),
        unroll_critic_loss=tf.reduce_mean(0.5 * tf.square(targets.vs - tf.stop_gradient(values)) * mask, axis=0),
    )


def weighted(mask: tf.Tensor, importance_weights: Optional[tf.Tensor]) -> tf.Tensor:
    """[T, B] mask times unroll i's weight w_i ([B]) on each of its steps; the mask itself without weights."""
    if importance_weights is None:
        return mask
    if importance_weights.shape.rank != 1 or importance_weights.shape[0] != mask.shape[1]:
        raise ValueError(f"importance_weights must be [B] = [{mask.shape[1]}], got {importance_weights.shape}")
    return mask * tf.cast(importance_weights, mask.dtype)[None]
