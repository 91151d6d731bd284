"""Double Q-learning TD errors and PER's importance-weighted loss.

Pure TensorFlow functions over a batch axis: B is the batch (the minibatch k of
PER's Algorithm 1), A the number of actions. With theta the online network and
theta^- the target network (van Hasselt et al. 2016, "Double DQN"):

    Y_j = R_j + gamma_j Q(S_j, argmax_a Q(S_j, a; theta); theta^-)      (Y^DoubleDQN)
    delta_j = Y_j - Q(S_{j-1}, A_{j-1}; theta)                          (PER Algorithm 1, line 11)
    loss = reduce_j w_j huber(delta_j)                                  (Algorithm 1, line 13; §4)

Y_j is a constant (no gradient). The Huber loss with threshold 1 has gradient
clip(delta, -1, 1): PER §4 clips TD errors to [-1, 1], as DQN did.
Both functions trace inside `tf.function(jit_compile=True)`.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

REDUCTIONS = ("mean", "sum")


class PrioritizedLoss(NamedTuple):
    loss: tf.Tensor  # [] reduce_j w_j huber(delta_j).
    td_error: tf.Tensor  # [B] delta_j. No gradient.
    new_priorities: tf.Tensor  # [B] |delta_j|, before epsilon. No gradient.


def _check_rank(name: str, tensor: tf.Tensor, rank: int, floating: bool = True) -> None:
    if floating and not tensor.dtype.is_floating:
        raise TypeError(f"{name} must be a float tensor, got dtype {tensor.dtype.name}")
    if not floating and not tensor.dtype.is_integer:
        raise TypeError(f"{name} must be an integer tensor, got dtype {tensor.dtype.name}")
    if tensor.shape.rank is not None and tensor.shape.rank != rank:
        raise ValueError(f"{name} must have rank {rank}, got shape {tensor.shape}")


def double_q_learning(
    q_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    q_t_value: tf.Tensor,
    q_t_selector: tf.Tensor,
) -> tf.Tensor:
    """Double Q-learning TD errors delta_j (Y^DoubleDQN; PER Algorithm 1, line 11).

    The argument order follows `rlax.double_q_learning`, batched.

    Args:
      q_tm1: [B, A] Q(S_{j-1}, .; theta), the online network at the first state.
      a_tm1: [B] integer A_{j-1}, the action taken.
      r_t: [B] R_j, the reward that followed.
      discount_t: [B] gamma_j = gamma * (1 - terminal_j); 0 cuts the bootstrap.
      q_t_value: [B, A] Q(S_j, .; theta^-), the target network: values the action.
      q_t_selector: [B, A] Q(S_j, .; theta), the online network: selects it.

    Returns:
      [B] delta_j = Y_j - q_tm1[j, a_tm1[j]]; the target Y_j has no gradient.
      Ties in q_t_selector go to the lowest action index (`tf.argmax` returns
      the first maximum, eagerly and under XLA; tested).

    Raises:
      TypeError: float actions or integer values. ValueError: a wrong rank or shape.
    """
    q_tm1, r_t, discount_t, q_t_value, q_t_selector = (
        tf.convert_to_tensor(x) for x in (q_tm1, r_t, discount_t, q_t_value, q_t_selector)
    )
    a_tm1 = tf.convert_to_tensor(a_tm1)
    for name, tensor in (("q_tm1", q_tm1), ("q_t_value", q_t_value), ("q_t_selector", q_t_selector)):
        _check_rank(name, tensor, rank=2)
        if not tensor.shape.is_compatible_with(q_tm1.shape):
            raise ValueError(f"{name} has shape {tensor.shape}, expected {q_tm1.shape} ([B, A], as q_tm1)")
    _check_rank("a_tm1", a_tm1, rank=1, floating=False)
    for name, tensor in (("r_t", r_t), ("discount_t", discount_t)):
        _check_rank(name, tensor, rank=1)
    for name, tensor in (("a_tm1", a_tm1), ("r_t", r_t), ("discount_t", discount_t)):
        if not tensor.shape.is_compatible_with(q_tm1.shape[:1]):
            raise ValueError(f"{name} has shape {tensor.shape}, expected [{q_tm1.shape[0]}] ([B], as q_tm1)")

    best_t = tf.argmax(q_t_selector, axis=1, output_type=tf.int32)
    target = tf.stop_gradient(r_t + discount_t * tf.gather(q_t_value, best_t, batch_dims=1))
    return target - tf.gather(q_tm1, a_tm1, batch_dims=1)


def _huber(x: tf.Tensor) -> tf.Tensor:
    """0.5 x^2 for |x| <= 1, |x| - 0.5 beyond: its gradient is clip(x, -1, 1)."""
    quadratic = tf.minimum(tf.abs(x), 1.0)
    return 0.5 * tf.square(quadratic) + (tf.abs(x) - quadratic)


def prioritized_double_q_loss(
    q_tm1: tf.Tensor,
    a_tm1: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    q_t_value: tf.Tensor,
    q_t_selector: tf.Tensor,
    importance_weights: tf.Tensor,
    reduction: str = "mean",
) -> PrioritizedLoss:
    """PER's weighted Double DQN loss (Algorithm 1, lines 11 and 13, and |delta| for line 12; §3.4, §4).

    Args:
      q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector: as in
        `double_q_learning`.
      importance_weights: [B] w_j = (N P(j))^-beta / max_i w_i (§3.4), e.g.
        `per.replay.Batch.weights`.
      reduction: how the batch of w_j huber(delta_j) is reduced. Algorithm 1
        sums the weighted updates over the minibatch (line 13); "mean" divides
        by B, as Dopamine and dqn_zoo do. A choice, not a paper fact.

    Returns:
      `PrioritizedLoss(loss, td_error, new_priorities)`. new_priorities is
      |delta_j|: the caller adds epsilon for proportional replay (p = |delta| +
      epsilon, §3.3); `per.replay.PrioritizedReplay.update` does so.

    Raises:
      TypeError, ValueError: as `double_q_learning`, for importance_weights of
      the wrong rank or shape, or an unknown reduction.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; accepted: {', '.join(REDUCTIONS)}")
    importance_weights = tf.convert_to_tensor(importance_weights)
    _check_rank("importance_weights", importance_weights, rank=1)
    td_error = double_q_learning(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector)
    if not importance_weights.shape.is_compatible_with(td_error.shape):
        raise ValueError(f"importance_weights has shape {importance_weights.shape}, expected {td_error.shape}")
    weighted = importance_weights * _huber(td_error)
    loss = tf.reduce_mean(weighted) if reduction == "mean" else tf.reduce_sum(weighted)
    td_error = tf.stop_gradient(td_error)
    return PrioritizedLoss(loss, td_error, tf.abs(td_error))
