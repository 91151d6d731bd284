"""V-trace off-policy targets (Espeholt et al. 2018, §4 and Appendix A).

Pure, time-major TensorFlow functions. Shapes: T is the unroll length, B the
batch, A the number of actions.

    v_s = V(x_s) + sum_{t=s}^{s+n-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V      (eq. 1)
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)),
    c_i = lambda_i min(c_bar, pi(a_i|x_i) / mu(a_i|x_i))                      (Remark 2)

where gamma^{t-s} of eq. (1) becomes the product of per-step discounts.

computed backwards with the recursion of Remark 1,

    v_s - V(x_s) = delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1})),

and the policy-gradient advantage of §4.2,

    A_s = rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s)),  rho^pg_s = min(rho_bar_pg, pi/mu).

Per-step discounts gamma_t = gamma * (1 - terminal_t) make an episode end inside
an unroll cut both the bootstrap and the trace. Every output is wrapped in
`tf.stop_gradient`: targets are constants for the learner's losses.

All functions trace inside `tf.function(jit_compile=True)`; the time loop is a
`tf.while_loop`, not a Python loop.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Union

import tensorflow as tf

from impala.config import CORRECTIONS

# ε added inside log π by IMPALA Table 2's "ε-correction" (Babaeizadeh et al. 2016).
EPSILON_CORRECTION = 1e-6


class VTraceReturns(NamedTuple):
    vs: tf.Tensor  # [T, B] V-trace targets v_s. No gradient.
    pg_advantages: tf.Tensor  # [T, B] rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s)). No gradient.


class VTraceFromLogitsReturns(NamedTuple):
    vs: tf.Tensor  # [T, B]. No gradient.
    pg_advantages: tf.Tensor  # [T, B]. No gradient.
    log_rhos: tf.Tensor  # [T, B] log pi(a_t|x_t) - log mu(a_t|x_t). No gradient.
    behaviour_action_log_probs: tf.Tensor  # [T, B] log mu(a_t|x_t). No gradient.
    target_action_log_probs: tf.Tensor  # [T, B] log pi(a_t|x_t). No gradient.


Scalar = Union[float, tf.Tensor]


def _check_float(name: str, tensor: tf.Tensor, rank: int) -> None:
    if not tensor.dtype.is_floating:
        raise TypeError(f"vtrace: {name} must be a float tensor, got dtype {tensor.dtype.name}")
    if tensor.shape.rank is not None and tensor.shape.rank != rank:
        raise ValueError(f"vtrace: {name} must have rank {rank}, got shape {tensor.shape}")


def _check_same_shape(reference: tf.Tensor, named: dict[str, tf.Tensor]) -> None:
    for name, tensor in named.items():
        if not tensor.shape.is_compatible_with(reference.shape):
            raise ValueError(
                f"vtrace: {name} has shape {tensor.shape}, expected {reference.shape} "
                "(time-major [T, B], the shape of log_rhos)"
            )


def from_importance_weights(
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    lambda_: Scalar = 1.0,
    clip_c_threshold: Optional[float] = 1.0,
) -> VTraceReturns:
    """V-trace targets and advantages from log importance weights (IMPALA eq. 1, §4.2).

    Args:
      log_rhos: [T, B] log pi(a_t|x_t) / mu(a_t|x_t), untruncated.
      discounts: [T, B] gamma_t = gamma * (1 - terminal_t): the discount from
        x_t to x_{t+1}; zero where the episode ended at step t.
      rewards: [T, B] r_t.
      values: [T, B] V(x_t) under the current value function.
      bootstrap_value: [B] V(x_T), the value of the state after the unroll.
      clip_rho_threshold: rho_bar, truncating rho_t in delta_t V. None: no clip.
      clip_pg_rho_threshold: rho_bar for the policy-gradient weight. None: no clip.
      lambda_: Remark 2's lambda, a scalar or a [T, B] tensor; a per-step 0/1
        mask cuts the trace at chosen steps (LASER's trust region).
      clip_c_threshold: c_bar, truncating the trace coefficients c_i. IMPALA
        uses 1 and Theorem 1 assumes rho_bar >= c_bar. None: no clip.

    Returns:
      `VTraceReturns(vs, pg_advantages)`, both [T, B] and without gradient.

    Raises:
      TypeError: an integer input. ValueError: a wrong rank or shape, a
      threshold below zero, or (eagerly) non-finite log_rhos.
    """
    log_rhos, discounts, rewards, values, bootstrap_value = (
        tf.convert_to_tensor(x) for x in (log_rhos, discounts, rewards, values, bootstrap_value)
    )
    for name, tensor in (
        ("log_rhos", log_rhos),
        ("discounts", discounts),
        ("rewards", rewards),
        ("values", values),
    ):
        _check_float(name, tensor, rank=2)
    _check_float("bootstrap_value", bootstrap_value, rank=1)
    _check_same_shape(log_rhos, {"discounts": discounts, "rewards": rewards, "values": values})
    if not bootstrap_value.shape.is_compatible_with(log_rhos.shape[1:]):
        raise ValueError(
            f"vtrace: bootstrap_value has shape {bootstrap_value.shape}, expected [B] = {log_rhos.shape[1:]}"
        )
    lambda_ = tf.convert_to_tensor(lambda_, dtype=log_rhos.dtype)
    if lambda_.shape.rank not in (0, None):
        _check_same_shape(log_rhos, {"lambda_": lambda_})
    thresholds = {
        "clip_rho_threshold": clip_rho_threshold,
        "clip_pg_rho_threshold": clip_pg_rho_threshold,
        "clip_c_threshold": clip_c_threshold,
    }
    for name, threshold in thresholds.items():
        if threshold is not None and threshold < 0:
            raise ValueError(f"vtrace: {name} must be >= 0 or None, got {threshold}")
    if tf.executing_eagerly() and not bool(tf.reduce_all(tf.math.is_finite(log_rhos))):
        raise ValueError("vtrace: log_rhos has non-finite entries (inf or nan)")

    rhos = tf.exp(log_rhos)
    clipped_rhos = _clip(rhos, clip_rho_threshold)
    cs = lambda_ * _clip(rhos, clip_c_threshold)
    values_t_plus_1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

    vs_minus_v = _discounted_trace_sum(deltas, discounts * cs)
    vs = values + vs_minus_v

    vs_t_plus_1 = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    pg_advantages = _clip(rhos, clip_pg_rho_threshold) * (rewards + discounts * vs_t_plus_1 - values)
    return VTraceReturns(vs=tf.stop_gradient(vs), pg_advantages=tf.stop_gradient(pg_advantages))


def _clip(rhos: tf.Tensor, threshold: Optional[float]) -> tf.Tensor:
    return rhos if threshold is None else tf.minimum(tf.cast(threshold, rhos.dtype), rhos)


def _discounted_trace_sum(deltas: tf.Tensor, decays: tf.Tensor) -> tf.Tensor:
    """acc_s = deltas_s + decays_s * acc_{s+1}, acc_T = 0, for s = T-1 .. 0 (Remark 1).

    A `tf.while_loop` over time, so it compiles to one XLA loop and traces in
    constant time whatever T is.
    """
    length = tf.shape(deltas)[0]
    outputs = tf.TensorArray(deltas.dtype, size=length)

    def body(t, acc, outputs):
        acc = deltas[t] + decays[t] * acc
        return t - 1, acc, outputs.write(t, acc)

    _, _, outputs = tf.while_loop(
        lambda t, *_: t >= 0,
        body,
        (length - 1, tf.zeros_like(deltas[0]), outputs),
    )
    return tf.reshape(outputs.stack(), tf.shape(deltas))


def action_log_probs(policy_logits: tf.Tensor, actions: tf.Tensor, epsilon: float = 0.0) -> tf.Tensor:
    """log pi(a_t|x_t) for [T, B, A] logits and [T, B] integer actions.

    With `epsilon` > 0 returns log(pi(a_t|x_t) + epsilon), IMPALA Table 2's
    "ε-correction". Keeps the gradient: this is what the policy loss uses.
    """
    if epsilon:
        probs = tf.nn.softmax(policy_logits)
        return tf.math.log(tf.gather(probs, actions, batch_dims=2) + epsilon)
    return -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=policy_logits)


def from_logits(
    behaviour_policy_logits: tf.Tensor,
    target_policy_logits: tf.Tensor,
    actions: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    lambda_: Scalar = 1.0,
    clip_c_threshold: Optional[float] = 1.0,
) -> VTraceFromLogitsReturns:
    """V-trace from the policies' logits (IMPALA §4).

    Args:
      behaviour_policy_logits: [T, B, A] logits of mu, the actor's policy.
      target_policy_logits: [T, B, A] logits of pi, the learner's policy.
      actions: [T, B] integer actions a_t, drawn from mu.
      discounts, rewards, values, bootstrap_value, clip_rho_threshold,
      clip_pg_rho_threshold, lambda_, clip_c_threshold: as in
      `from_importance_weights`.

    Returns:
      `VTraceFromLogitsReturns`; every field is [T, B] and without gradient.
    """
    for name, logits in (
        ("behaviour_policy_logits", behaviour_policy_logits),
        ("target_policy_logits", target_policy_logits),
    ):
        _check_float(name, tf.convert_to_tensor(logits), rank=3)
    actions = tf.convert_to_tensor(actions)
    if not actions.dtype.is_integer:
        raise TypeError(f"vtrace: actions must be an integer tensor, got dtype {actions.dtype.name}")
    target_log_probs = action_log_probs(target_policy_logits, actions)
    behaviour_log_probs = action_log_probs(behaviour_policy_logits, actions)
    log_rhos = target_log_probs - behaviour_log_probs
    returns = from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap_value,
        clip_rho_threshold, clip_pg_rho_threshold, lambda_, clip_c_threshold,
    )  # fmt: skip
    return VTraceFromLogitsReturns(
        vs=returns.vs,
        pg_advantages=returns.pg_advantages,
        log_rhos=tf.stop_gradient(log_rhos),
        behaviour_action_log_probs=tf.stop_gradient(behaviour_log_probs),
        target_action_log_probs=tf.stop_gradient(target_log_probs),
    )


def off_policy_targets(
    correction: str,
    behaviour_policy_logits: tf.Tensor,
    target_policy_logits: tf.Tensor,
    actions: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    lambda_: Scalar = 1.0,
    clip_c_threshold: Optional[float] = 1.0,
) -> VTraceFromLogitsReturns:
    """The targets of one of IMPALA Table 2's off-policy corrections (§5.2.2).

    * `vtrace`: V-trace, as `from_logits`.
    * `none`: no correction; n-step returns for V and q_s - V(x_s) for the policy.
    * `epsilon`: targets as `none`; the learner adds `EPSILON_CORRECTION` inside
      log pi through `action_log_probs(..., epsilon=EPSILON_CORRECTION)`.
    * `one_step_is`: targets for V as `none`; the policy advantage is weighted by
      the (clipped) one-step importance weight rho_s.

    Arguments and returns are those of `from_logits`.
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"vtrace: unknown correction {correction!r}; accepted: {', '.join(CORRECTIONS)}")
    vtrace = from_logits(
        behaviour_policy_logits, target_policy_logits, actions, discounts, rewards, values,
        bootstrap_value, clip_rho_threshold, clip_pg_rho_threshold, lambda_, clip_c_threshold,
    )  # fmt: skip
    if correction == "vtrace":
        return vtrace
    # Weights of 1, unclipped: a threshold below 1 would scale every delta (rho-bar, rho-bar-pg) or
    # cut the trace (c-bar), and the targets would no longer be n-step returns.
    uncorrected = from_importance_weights(
        tf.zeros_like(vtrace.log_rhos), discounts, rewards, values, bootstrap_value,
        clip_rho_threshold=None, clip_pg_rho_threshold=None, lambda_=lambda_, clip_c_threshold=None,
    )  # fmt: skip
    pg_advantages = uncorrected.pg_advantages
    if correction == "one_step_is":
        pg_advantages = _clip(tf.exp(vtrace.log_rhos), clip_pg_rho_threshold) * pg_advantages
    return vtrace._replace(vs=uncorrected.vs, pg_advantages=pg_advantages)
