"""`impala.losses.vtrace_actor_critic_loss` against a float64 reference of IMPALA §4.2.

The reference is written from the formulas: V-trace targets from the O(T^2) sum
of eq. (1) (`test_vtrace.reference_vtrace`), then the three terms of §4.2, with
LASER's per-step lambda, mask and entropy mask.
"""

import numpy as np
import pytest
import tensorflow as tf
from test_vtrace import reference_vtrace

from impala import losses

T, B, A = 6, 3, 4


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "behaviour_logits": rng.standard_normal((T, B, A)),
        "target_logits": rng.standard_normal((T, B, A)),
        "actions": rng.integers(A, size=(T, B)),
        "discounts": 0.9 * (rng.random((T, B)) > 0.2),
        "rewards": rng.standard_normal((T, B)),
        "values": rng.standard_normal((T, B)),
        "bootstrap_value": rng.standard_normal(B),
    }


def reference(
    x, baseline_cost, entropy_cost, reduction, lambda_=1.0, mask=1.0, entropy_mask=1.0, rho_bar=1.0, pg_rho_bar=1.0
):
    log_pi_all = log_softmax(x["target_logits"])
    log_pi = np.take_along_axis(log_pi_all, x["actions"][..., None], -1)[..., 0]
    log_mu = np.take_along_axis(log_softmax(x["behaviour_logits"]), x["actions"][..., None], -1)[..., 0]
    vs, advantages = reference_vtrace(
        log_pi - log_mu, x["discounts"], x["rewards"], x["values"], x["bootstrap_value"], lambda_=lambda_,
        rho_bar=rho_bar, pg_rho_bar=pg_rho_bar,
    )  # fmt: skip
    entropies = -(np.exp(log_pi_all) * log_pi_all).sum(-1)
    reduce = np.sum if reduction == "sum" else np.mean
    mask, entropy_mask = np.broadcast_to(mask, (T, B)), np.broadcast_to(entropy_mask, (T, B))
    pg = reduce(-log_pi * advantages * mask)
    baseline = reduce(0.5 * (vs - x["values"]) ** 2 * mask)
    bonus = reduce(entropies * entropy_mask)
    return {
        "loss": pg + baseline_cost * baseline - entropy_cost * bonus,
        "pg_loss": pg,
        "baseline_loss": baseline,
        "entropy": (entropies * entropy_mask).sum() / max(entropy_mask.sum(), 1.0),
    }


def call(x, jit, **kwargs):
    tensors = {k: tf.constant(v, tf.int32 if k == "actions" else tf.float32) for k, v in x.items()}
    kwargs = {k: tf.constant(v, tf.float32) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    fn = tf.function(losses.vtrace_actor_critic_loss, jit_compile=True) if jit else losses.vtrace_actor_critic_loss
    return fn(**tensors, **kwargs)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_loss_terms_match_the_papers_formulas(jit, reduction):
    x = inputs(0)
    out = call(x, jit, baseline_cost=0.5, entropy_cost=0.01, reduction=reduction)
    expected = reference(x, 0.5, 0.01, reduction)
    for name, value in expected.items():
        assert float(getattr(out, name)) == pytest.approx(value, rel=1e-4, abs=1e-5), name


@pytest.mark.parametrize("jit", [False, True])
def test_per_step_lambda_mask_and_entropy_mask(jit):
    """LASER's inputs: a trust-region cut of the traces and masked terms (LASER §4.2, §5.1)."""
    x = inputs(1)
    rng = np.random.default_rng(2)
    lambda_ = (rng.random((T, B)) > 0.3).astype(np.float64)
    mask = lambda_.copy()
    entropy_mask = np.zeros((T, B))
    entropy_mask[:, 0] = 1.0  # Only the first trajectory is online data.
    out = call(x, jit, baseline_cost=0.5, entropy_cost=0.02, lambda_=lambda_, mask=mask, entropy_mask=entropy_mask)
    expected = reference(x, 0.5, 0.02, "sum", lambda_, mask, entropy_mask)
    for name, value in expected.items():
        assert float(getattr(out, name)) == pytest.approx(value, rel=1e-4, abs=1e-5), name
    # The cut matters: without it the targets differ.
    uncut = reference(x, 0.5, 0.02, "sum", 1.0, mask, entropy_mask)
    assert abs(uncut["baseline_loss"] - expected["baseline_loss"]) > 1e-3


@pytest.mark.parametrize("jit", [False, True])
def test_the_truncation_levels_reach_the_targets_each_in_its_place(jit):
    """rho-bar truncates v_s's weights, rho-bar-pg the policy gradient's (eq. 1, §4.2): here 2 and 0.5."""
    x = inputs(3)
    out = call(x, jit, baseline_cost=0.5, entropy_cost=0.01, clip_rho_threshold=2.0, clip_pg_rho_threshold=0.5)
    expected = reference(x, 0.5, 0.01, "sum", rho_bar=2.0, pg_rho_bar=0.5)
    for name, value in expected.items():
        assert float(getattr(out, name)) == pytest.approx(value, rel=1e-4, abs=1e-5), name
    swapped = reference(x, 0.5, 0.01, "sum", rho_bar=0.5, pg_rho_bar=2.0)
    assert abs(swapped["pg_loss"] - expected["pg_loss"]) > 1e-2
    assert abs(swapped["baseline_loss"] - expected["baseline_loss"]) > 1e-2


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_gradients_flow_through_log_pi_the_entropy_and_v_only(reduction):
    """With the targets held fixed (§4.2), dL/d logits = -(onehot(a_s) - pi) A_s m_s + c_H m^H_s pi (log pi + H)
    and dL/dV(x_s) = -c_V (v_s - V(x_s)) m_s, per step (divided by T B for the mean), in float64."""
    x = inputs(4)
    rng = np.random.default_rng(5)
    mask, entropy_mask = (rng.random((T, B)) > 0.3).astype(np.float64), (rng.random((T, B)) > 0.5).astype(np.float64)
    logits, values = tf.Variable(x["target_logits"], dtype=tf.float32), tf.Variable(x["values"], dtype=tf.float32)
    tensors = {k: tf.constant(v, tf.int32 if k == "actions" else tf.float32) for k, v in x.items()}
    with tf.GradientTape() as tape:
        out = losses.vtrace_actor_critic_loss(
            **{**tensors, "target_logits": logits, "values": values}, baseline_cost=0.5, entropy_cost=0.03,
            reduction=reduction, mask=tf.constant(mask, tf.float32), entropy_mask=tf.constant(entropy_mask, tf.float32),
        )  # fmt: skip
    d_logits, d_values = tape.gradient(out.loss, [logits, values])

    log_pi_all = log_softmax(x["target_logits"])
    pi = np.exp(log_pi_all)
    log_mu_all = log_softmax(x["behaviour_logits"])
    pick = lambda all_: np.take_along_axis(all_, x["actions"][..., None], -1)[..., 0]  # noqa: E731
    vs, advantages = reference_vtrace(
        pick(log_pi_all) - pick(log_mu_all), x["discounts"], x["rewards"], x["values"], x["bootstrap_value"]
    )
    onehot = np.eye(A)[x["actions"]]
    entropies = -(pi * log_pi_all).sum(-1, keepdims=True)
    scale = 1.0 if reduction == "sum" else 1.0 / (T * B)
    expected_logits = -(onehot - pi) * (advantages * mask)[..., None] + 0.03 * entropy_mask[..., None] * pi * (
        log_pi_all + entropies
    )
    np.testing.assert_allclose(d_logits.numpy(), scale * expected_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_values.numpy(), scale * -0.5 * (vs - x["values"]) * mask, rtol=1e-4, atol=1e-6)


def test_unknown_reduction_names_the_accepted_ones():
    with pytest.raises(ValueError, match="accepted: sum, mean"):
        call(inputs(0), False, baseline_cost=0.5, entropy_cost=0.01, reduction="median")
