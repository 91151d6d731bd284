"""LASER's trust-region V-trace (Schmitt, Hessel & Simonyan 2020, §4, Appendix B and C).

Pure TensorFlow functions. Shapes: T is the unroll length, B the batch, A the
number of actions. Equation numbers are those of the ICLR 2020 text with its
appendix, which has §4.3 and Appendix B and C; the final ICML text numbers the
implied policy eq. (2) and has no eq. (8) or (9).

V-trace with truncation rho_bar converges to the value of the implied policy of
Proposition 1, eq. (9) (the same as eq. 3),

    pi~_mu(a|x) = min(rho_bar mu(a|x), pi(a|x)) / sum_b min(rho_bar mu(b|x), pi(b|x)),

and §4.3 measures how far that fixed point is from pi with the behaviour relevance

    beta_KL(pi, mu, s) = KL(pi(.|s) || pi~_mu(.|s)),

over the whole (discrete) action set, not by the Monte Carlo estimate §4.3 offers for
large action spaces. The learner accepts step t when beta_KL < b, which gives the
indicator lambda(s_t) = 1[beta(pi, mu, s_t) < b] of §4.2, and the trust-region
V-trace return of eq. (8), with gamma^k written as a product of per-step discounts:

    v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i lambda_i c_i) lambda_t rho_t delta_t V
    delta_t V = r_t + gamma_t V(x_{t+1}) - V(x_t)

A rejected step contributes no TD error and cuts the trace, so every return stops
bootstrapping at the first rejected state. Because lambda_t is 0 or 1,
lambda_t min(rho_bar, pi_t/mu_t) = min(rho_bar, lambda_t pi_t/mu_t), and the same for
c_bar and the policy-gradient rho_bar: eq. (8) is exactly IMPALA's V-trace with the
importance weight of every rejected step set to zero, which is how `vtrace` computes it.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from impala import vtrace as impala_vtrace


def implied_policy(target_logits: tf.Tensor, behaviour_logits: tf.Tensor, clip_rho_threshold: float) -> tf.Tensor:
    """pi~_mu(a|x), the policy whose value V-trace estimates (Proposition 1, eq. 9).

    Args:
      target_logits: [..., A] logits of pi, the learner's policy.
      behaviour_logits: [..., A] logits of mu, the policy that acted.
      clip_rho_threshold: rho_bar of V-trace, > 0.

    Returns:
      [..., A] probabilities of pi~_mu, summing to 1 over the last axis. It equals pi
      when mu = pi (for any rho_bar) and whenever rho_bar mu >= pi for every action.
    """
    return tf.exp(_log_policies(target_logits, behaviour_logits, clip_rho_threshold)[1])


def kl_to_implied(target_logits: tf.Tensor, behaviour_logits: tf.Tensor, clip_rho_threshold: float) -> tf.Tensor:
    """beta_KL(pi, mu, s) = KL(pi(.|s) || pi~_mu(.|s)), LASER's behaviour relevance (§4.3).

    Args:
      target_logits, behaviour_logits, clip_rho_threshold: as in `implied_policy`.

    Returns:
      [...] the divergence of each state, >= 0 up to rounding; the trust region
      accepts a state when it is below the threshold b.
    """
    log_pi, log_pi_tilde = _log_policies(target_logits, behaviour_logits, clip_rho_threshold)
    return tf.reduce_sum(tf.exp(log_pi) * (log_pi - log_pi_tilde), axis=-1)


def _log_policies(
    target_logits: tf.Tensor, behaviour_logits: tf.Tensor, clip_rho_threshold: float
) -> tuple[tf.Tensor, tf.Tensor]:
    """(log pi, log pi~_mu), both [..., A], after checking the arguments."""
    target_logits, behaviour_logits = (tf.convert_to_tensor(x) for x in (target_logits, behaviour_logits))
    for name, logits in (("target_logits", target_logits), ("behaviour_logits", behaviour_logits)):
        if not logits.dtype.is_floating:
            raise TypeError(f"trust_region: {name} must be a float tensor, got dtype {logits.dtype.name}")
        if logits.shape.rank == 0:
            raise ValueError(f"trust_region: {name} must have an action axis [..., A], got a scalar")
    if not behaviour_logits.shape.is_compatible_with(target_logits.shape):
        raise ValueError(
            f"trust_region: behaviour_logits has shape {behaviour_logits.shape}, "
            f"expected the shape of target_logits {target_logits.shape}"
        )
    # rho_bar = 0 would make eq. (9) 0/0.
    if not clip_rho_threshold > 0:
        raise ValueError(f"trust_region: clip_rho_threshold (rho_bar) must be > 0, got {clip_rho_threshold}")
    log_pi = tf.nn.log_softmax(target_logits)
    log_mu = tf.nn.log_softmax(behaviour_logits)
    log_rho_bar = tf.math.log(tf.cast(clip_rho_threshold, log_mu.dtype))
    # Eq. (9) in log space: log min(rho_bar mu, pi), normalised over actions, so that
    # small probabilities do not underflow before the normalisation.
    return log_pi, tf.nn.log_softmax(tf.minimum(log_rho_bar + log_mu, log_pi))


def vtrace(
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    mask: tf.Tensor,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
) -> impala_vtrace.VTraceReturns:
    """Trust-region V-trace targets and advantages (LASER eq. 8, Algorithm 1).

    The trace coefficients c_i are truncated at c_bar = 1, IMPALA's choice and the
    paper's "typically chosen rho_bar = c_bar = 1" (§2.3).

    Args:
      log_rhos: [T, B] log pi(a_t|x_t) - log mu(a_t|x_t), untruncated.
      discounts: [T, B] gamma_t, zero where the episode ended at step t.
      rewards: [T, B] r_t.
      values: [T, B] V(x_t) under the current value function.
      bootstrap_value: [B] V(x_T), the value of the state after the unroll.
      mask: [T, B] lambda(s_t) of eq. (8) as a float: 1 where the trust region
        accepts step t, 0 where it rejects it. Only 0 and 1 are allowed (eq. 8's
        lambda is an indicator); other values raise when run eagerly.
      clip_rho_threshold: rho_bar, truncating rho_t. None: no clip.
      clip_pg_rho_threshold: rho_bar for the policy-gradient weight. None: no clip.

    Returns:
      `impala.vtrace.VTraceReturns(vs, pg_advantages)`, both [T, B] and without
      gradient, where pg_advantages = lambda_s rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s)).
      At a rejected step vs = V(x_s) and pg_advantages = 0, so it adds nothing to the
      value or policy loss; the learner (`laser.losses`) masks it out of those terms
      all the same (§4.3). With the mask all ones this is
      `impala.vtrace.from_importance_weights`.

    Raises:
      TypeError: an integer input. ValueError: a wrong rank or shape, a threshold
      below zero, or (eagerly) a mask value other than 0 and 1 or non-finite log_rhos
      at an accepted step.
    """
    log_rhos, mask = tf.convert_to_tensor(log_rhos), tf.convert_to_tensor(mask)
    for name, tensor in (("log_rhos", log_rhos), ("mask", mask)):
        if not tensor.dtype.is_floating:
            raise TypeError(f"trust_region: {name} must be a float tensor, got dtype {tensor.dtype.name}")
    if mask.shape.rank not in (2, None) or not mask.shape.is_compatible_with(log_rhos.shape):
        raise ValueError(
            f"trust_region: mask has shape {mask.shape}, expected {log_rhos.shape} "
            "(time-major [T, B], the shape of log_rhos)"
        )
    if tf.executing_eagerly() and not bool(tf.reduce_all((mask == 0) | (mask == 1))):
        raise ValueError("trust_region: mask must hold only 0 (rejected) and 1 (accepted)")
    # A zero importance weight at rejected steps (see the module docstring). log 0 is
    # stood in for by the most negative finite float: its exp is exactly 0, and it
    # passes from_importance_weights' check that log_rhos are finite.
    log_rhos = tf.where(mask > 0, log_rhos, tf.constant(log_rhos.dtype.min, log_rhos.dtype))
    return impala_vtrace.from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap_value,
        clip_rho_threshold=clip_rho_threshold, clip_pg_rho_threshold=clip_pg_rho_threshold,
    )  # fmt: skip
