"""LASER's trust region against literal float64 readings of eq. (8), eq. (9) and §4.3's beta_KL.

Every comparison with a reference goes through a `check_*` helper.
`test_planted_bug_fails_the_check` runs the same helpers on plausible wrong
implementations and expects them to fail, so no reference test passes vacuously.
"""

import numpy as np
import pytest
import tensorflow as tf

from impala import vtrace as impala_vtrace
from laser import trust_region

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def softmax(logits):
    logits = np.asarray(logits, np.float64)
    exps = np.exp(logits - logits.max(-1, keepdims=True))
    return exps / exps.sum(-1, keepdims=True)


def reference_implied_policy(target_logits, behaviour_logits, rho_bar):
    """Eq. (9): pi~(a) = min(rho_bar mu(a), pi(a)) / sum_b min(rho_bar mu(b), pi(b))."""
    unnormalised = np.minimum(rho_bar * softmax(behaviour_logits), softmax(target_logits))
    return unnormalised / unnormalised.sum(-1, keepdims=True)


def reference_kl(target_logits, behaviour_logits, rho_bar):
    """§4.3: beta_KL = KL(pi || pi~) = sum_a pi(a) log(pi(a) / pi~(a))."""
    pi = softmax(target_logits)
    return np.sum(pi * np.log(pi / reference_implied_policy(target_logits, behaviour_logits, rho_bar)), -1)


def reference_vtrace(log_rhos, discounts, rewards, values, bootstrap_value, mask, rho_bar=1.0, pg_rho_bar=1.0):
    """O(T^2) float64 evaluation of the sum in eq. (8), with c_bar = 1, not of a recursion.

    v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i lambda_i c_i) lambda_t rho_t delta_t,
    A_s = lambda_s rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s)).
    """
    log_rhos, discounts, rewards, values, bootstrap_value, lambdas = (
        np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values, bootstrap_value, mask)
    )
    T, B = log_rhos.shape
    ratios = np.exp(log_rhos)
    clip = lambda x, bar: x if bar is None else np.minimum(bar, x)  # noqa: E731
    rhos, cs, pg_rhos = clip(ratios, rho_bar), clip(ratios, 1.0), clip(ratios, pg_rho_bar)
    next_values = np.concatenate([values[1:], bootstrap_value[None]])
    vs = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            total = values[s, b]
            for t in range(s, T):
                trace = np.prod([discounts[i, b] * lambdas[i, b] * cs[i, b] for i in range(s, t)])
                delta = rewards[t, b] + discounts[t, b] * next_values[t, b] - values[t, b]
                total += trace * lambdas[t, b] * rhos[t, b] * delta
            vs[s, b] = total
    next_vs = np.concatenate([vs[1:], bootstrap_value[None]])
    pg_advantages = lambdas * pg_rhos * (rewards + discounts * next_vs - values)
    return vs, pg_advantages


def random_unroll(T, B, seed):
    """float32 [T, B] inputs with rho above and below 1 and two episode ends inside the unroll."""
    rng = np.random.default_rng(seed)
    unroll = {
        "log_rhos": rng.standard_normal((T, B)),
        "discounts": np.full((T, B), 0.9),
        "rewards": rng.standard_normal((T, B)),
        "values": rng.standard_normal((T, B)),
        "bootstrap_value": rng.standard_normal(B),
    }
    unroll["discounts"][1, 0] = 0.0
    unroll["discounts"][T - 3, B - 1] = 0.0
    return {k: v.astype(np.float32) for k, v in unroll.items()}


def rejection_mask(pattern, T, B, seed=0):
    """[T, B] lambda: 1 accepted, 0 rejected."""
    mask = np.ones((T, B), np.float32)
    if pattern == "first":
        mask[0] = 0.0
    elif pattern == "middle":
        mask[T // 2] = 0.0
    elif pattern == "last":
        mask[T - 1] = 0.0
    elif pattern == "staggered":  # One per column, one of them at an episode end.
        mask[0, 0], mask[T // 2, 1 % B], mask[T - 3, B - 1] = 0.0, 0.0, 0.0
    elif pattern == "random":
        mask = (np.random.default_rng(seed).random((T, B)) > 0.35).astype(np.float32)
    return mask


def random_logits(shape, seed, scale=2.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal(shape)).astype(np.float32), (scale * rng.standard_normal(shape)).astype(
        np.float32
    )


def check_vtrace(fn, unroll, mask, **kwargs):
    result = fn(**unroll, mask=mask, **kwargs)
    names = {"clip_rho_threshold": "rho_bar", "clip_pg_rho_threshold": "pg_rho_bar"}
    expected_vs, expected_pg = reference_vtrace(**unroll, mask=mask, **{names[k]: v for k, v in kwargs.items()})
    np.testing.assert_allclose(result.vs.numpy(), expected_vs, **TOLERANCE)
    np.testing.assert_allclose(result.pg_advantages.numpy(), expected_pg, **TOLERANCE)


def check_matches_impala(fn, unroll, **kwargs):
    result = fn(**unroll, mask=np.ones_like(unroll["log_rhos"]), **kwargs)
    expected = impala_vtrace.from_importance_weights(**unroll, **kwargs)
    np.testing.assert_array_equal(result.vs.numpy(), expected.vs.numpy())
    np.testing.assert_array_equal(result.pg_advantages.numpy(), expected.pg_advantages.numpy())


def check_implied_policy(fn, target, behaviour, rho_bar):
    result = fn(target, behaviour, rho_bar).numpy()
    np.testing.assert_allclose(result, reference_implied_policy(target, behaviour, rho_bar), **TOLERANCE)
    np.testing.assert_allclose(result.sum(-1), 1.0, atol=1e-6)


def check_kl(fn, target, behaviour, rho_bar):
    result = fn(target, behaviour, rho_bar).numpy()
    assert result.shape == target.shape[:-1]
    np.testing.assert_allclose(result, reference_kl(target, behaviour, rho_bar), **TOLERANCE)
    assert np.all(result >= -1e-6)


# --- Eq. (8) -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["first", "middle", "last", "staggered", "random"])
@pytest.mark.parametrize("T", [5, 6, 7])
def test_eq_8_with_rejected_steps(T, pattern):
    check_vtrace(trust_region.vtrace, random_unroll(T, 3, seed=T), rejection_mask(pattern, T, 3, seed=T))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"clip_rho_threshold": 2.0, "clip_pg_rho_threshold": 0.5},
        {"clip_rho_threshold": 0.5, "clip_pg_rho_threshold": 2.0},
        {"clip_rho_threshold": None, "clip_pg_rho_threshold": None},
    ],
)
def test_eq_8_with_other_thresholds(kwargs):
    check_vtrace(trust_region.vtrace, random_unroll(6, 3, seed=1), rejection_mask("random", 6, 3, seed=2), **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"clip_rho_threshold": 2.0, "clip_pg_rho_threshold": 0.5},
        {"clip_rho_threshold": None, "clip_pg_rho_threshold": None},
    ],
)
def test_all_accepted_is_impala_vtrace(kwargs):
    check_matches_impala(trust_region.vtrace, random_unroll(7, 3, seed=3), **kwargs)


def test_a_rejected_step_cuts_the_unroll():
    """Rejecting step k splits the unroll: steps before it bootstrap from V(x_k), as a
    prefix unroll ending at x_k would; steps after it ignore everything before; step k
    itself keeps vs = V(x_k) and a zero advantage."""
    T, k = 7, 3
    unroll = random_unroll(T, 3, seed=4)
    mask = np.ones((T, 3), np.float32)
    mask[k] = 0.0
    whole = trust_region.vtrace(**unroll, mask=mask, clip_rho_threshold=2.0)
    prefix = {n: v[:k] if v.ndim == 2 else unroll["values"][k] for n, v in unroll.items()}
    suffix = {n: v[k + 1 :] if v.ndim == 2 else v for n, v in unroll.items()}
    for part, steps in ((prefix, slice(0, k)), (suffix, slice(k + 1, T))):
        alone = impala_vtrace.from_importance_weights(**part, clip_rho_threshold=2.0)
        np.testing.assert_allclose(whole.vs.numpy()[steps], alone.vs.numpy(), rtol=1e-6)
        np.testing.assert_allclose(whole.pg_advantages.numpy()[steps], alone.pg_advantages.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(whole.vs.numpy()[k], unroll["values"][k])
    np.testing.assert_array_equal(whole.pg_advantages.numpy()[k], 0.0)


def test_outputs_carry_no_gradient():
    unroll = {k: tf.Variable(v) for k, v in random_unroll(5, 3, seed=5).items()}
    with tf.GradientTape() as tape:
        result = trust_region.vtrace(**unroll, mask=rejection_mask("staggered", 5, 3))
        total = tf.reduce_sum(result.vs) + tf.reduce_sum(result.pg_advantages)
    assert all(g is None for g in tape.gradient(total, list(unroll.values())))


# --- Eq. (9) and beta_KL -----------------------------------------------------------------------


@pytest.mark.parametrize("rho_bar", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("shape", [(4,), (3, 5), (5, 3, 4)])
def test_eq_9_and_kl(shape, rho_bar):
    target, behaviour = random_logits(shape, seed=len(shape))
    check_implied_policy(trust_region.implied_policy, target, behaviour, rho_bar)
    check_kl(trust_region.kl_to_implied, target, behaviour, rho_bar)


@pytest.mark.parametrize("rho_bar", [0.3, 1.0, 3.0])
def test_on_policy_implied_policy_is_pi_and_kl_is_zero(rho_bar):
    """mu = pi: min(rho_bar pi, pi) = min(rho_bar, 1) pi, which normalises back to pi."""
    target, _ = random_logits((5, 3, 4), seed=6)
    np.testing.assert_allclose(
        trust_region.implied_policy(target, target, rho_bar).numpy(), softmax(target), **TOLERANCE
    )
    np.testing.assert_allclose(trust_region.kl_to_implied(target, target, rho_bar).numpy(), 0.0, atol=1e-6)


def test_large_rho_bar_leaves_pi_unclipped():
    """rho_bar mu >= pi for every action: eq. (9)'s min picks pi everywhere."""
    target, behaviour = random_logits((3, 5), seed=7)
    rho_bar = float(np.max(softmax(target) / softmax(behaviour))) * 1.01
    np.testing.assert_allclose(
        trust_region.implied_policy(target, behaviour, rho_bar).numpy(), softmax(target), **TOLERANCE
    )
    np.testing.assert_allclose(trust_region.kl_to_implied(target, behaviour, rho_bar).numpy(), 0.0, atol=1e-6)


def test_the_papers_two_action_examples():
    """§2.3: mu = (phi, 1 - phi), pi = (1 - phi, phi), rho_bar = 1 give a uniform pi~.
    Appendix C, Proposition 2: mu = (0.9, 0.1), pi = (0.5, 0.5) give omega = (1, 0.2),
    so pi~ is proportional to pi omega = (0.5, 0.1)."""
    phi = 0.1
    pi, mu = np.log([1 - phi, phi]), np.log([phi, 1 - phi])
    np.testing.assert_allclose(trust_region.implied_policy(pi, mu, 1.0).numpy(), [0.5, 0.5], rtol=1e-6)
    expected_kl = (1 - phi) * np.log(2 * (1 - phi)) + phi * np.log(2 * phi)
    np.testing.assert_allclose(trust_region.kl_to_implied(pi, mu, 1.0).numpy(), expected_kl, rtol=1e-6)
    pi, mu = np.log([0.5, 0.5]), np.log([0.9, 0.1])
    np.testing.assert_allclose(trust_region.implied_policy(pi, mu, 1.0).numpy(), [5 / 6, 1 / 6], rtol=1e-6)


# --- XLA ---------------------------------------------------------------------------------------


def test_xla_gives_the_same_results():
    unroll, mask = random_unroll(6, 3, seed=8), rejection_mask("staggered", 6, 3)
    xla_vtrace = tf.function(trust_region.vtrace, jit_compile=True)
    check_vtrace(xla_vtrace, unroll, mask)
    eager, xla = trust_region.vtrace(**unroll, mask=mask), xla_vtrace(**unroll, mask=mask)
    np.testing.assert_allclose(xla.vs.numpy(), eager.vs.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xla.pg_advantages.numpy(), eager.pg_advantages.numpy(), rtol=1e-6, atol=1e-6)
    # exp(most negative float) is exactly 0 under XLA too, so rejected steps are exact.
    rejected = mask == 0
    np.testing.assert_array_equal(xla.vs.numpy()[rejected], unroll["values"][rejected])
    np.testing.assert_array_equal(xla.pg_advantages.numpy()[rejected], 0.0)

    target, behaviour = random_logits((6, 3, 4), seed=9)
    for check, fn in ((check_implied_policy, trust_region.implied_policy), (check_kl, trust_region.kl_to_implied)):
        xla_fn = tf.function(fn, jit_compile=True)
        check(xla_fn, target, behaviour, 1.0)
        expected = fn(target, behaviour, 1.0).numpy()
        np.testing.assert_allclose(xla_fn(target, behaviour, 1.0).numpy(), expected, rtol=1e-6, atol=1e-7)


# --- Planted bugs: each check above can fail -----------------------------------------------------


def vtrace_mask_on_c_only(log_rhos, discounts, rewards, values, bootstrap_value, mask, **kwargs):
    """Cuts the trace but keeps the rejected step's own rho_t delta_t."""
    return impala_vtrace.from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap_value, lambda_=mask, **kwargs
    )


def vtrace_mask_ignored(log_rhos, discounts, rewards, values, bootstrap_value, mask, **kwargs):
    return impala_vtrace.from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value, **kwargs)


def vtrace_mask_on_outputs(log_rhos, discounts, rewards, values, bootstrap_value, mask, **kwargs):
    """Replaces the rejected steps' own targets but lets earlier returns run through them."""
    plain = impala_vtrace.from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value, **kwargs)
    return plain._replace(vs=tf.where(mask > 0, plain.vs, values), pg_advantages=mask * plain.pg_advantages)


def vtrace_thresholds_swapped(*args, clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, **kwargs):
    return trust_region.vtrace(
        *args, clip_rho_threshold=clip_pg_rho_threshold, clip_pg_rho_threshold=clip_rho_threshold, **kwargs
    )


def implied_without_rho_bar(target, behaviour, rho_bar):
    return tf.nn.softmax(tf.minimum(tf.nn.log_softmax(behaviour), tf.nn.log_softmax(target)))


def implied_unnormalised(target, behaviour, rho_bar):
    return tf.minimum(rho_bar * tf.nn.softmax(behaviour), tf.nn.softmax(target))


def kl_reversed(target, behaviour, rho_bar):
    """KL(pi~ || pi) instead of KL(pi || pi~)."""
    pi_tilde = trust_region.implied_policy(target, behaviour, rho_bar)
    return tf.reduce_sum(pi_tilde * (tf.math.log(pi_tilde) - tf.nn.log_softmax(target)), -1)


def kl_to_behaviour(target, behaviour, rho_bar):
    """KL(pi || mu), Algorithm 1's wording, instead of §4.3's KL(pi || pi~)."""
    return tf.reduce_sum(tf.nn.softmax(target) * (tf.nn.log_softmax(target) - tf.nn.log_softmax(behaviour)), -1)


def _vtrace_case(pattern, T=6):
    return random_unroll(T, 3, seed=T), rejection_mask(pattern, T, 3, seed=T)


PLANTED = [
    *[
        pytest.param(check_vtrace, vtrace_mask_on_c_only, _vtrace_case(pattern), {}, id=f"mask_on_c_only-{pattern}")
        for pattern in ("first", "middle", "last", "staggered", "random")
    ],
    pytest.param(check_vtrace, vtrace_mask_ignored, _vtrace_case("random"), {}, id="mask_ignored"),
    pytest.param(check_vtrace, vtrace_mask_on_outputs, _vtrace_case("middle"), {}, id="mask_on_outputs"),
    pytest.param(
        check_vtrace,
        vtrace_thresholds_swapped,
        _vtrace_case("random"),
        {"clip_rho_threshold": 2.0, "clip_pg_rho_threshold": 0.5},
        id="eq_8_thresholds_swapped",
    ),
    pytest.param(
        check_matches_impala,
        vtrace_thresholds_swapped,
        (random_unroll(7, 3, seed=3),),
        {"clip_rho_threshold": 2.0, "clip_pg_rho_threshold": 0.5},
        id="impala_thresholds_swapped",
    ),
    pytest.param(check_implied_policy, implied_without_rho_bar, (*random_logits((3, 5), 2), 2.0), {}, id="no_rho_bar"),
    pytest.param(check_implied_policy, implied_unnormalised, (*random_logits((3, 5), 2), 1.0), {}, id="unnormalised"),
    pytest.param(check_kl, kl_reversed, (*random_logits((3, 5), 2), 1.0), {}, id="kl_reversed"),
    pytest.param(check_kl, kl_to_behaviour, (*random_logits((3, 5), 2), 1.0), {}, id="kl_to_behaviour"),
]


@pytest.mark.parametrize("check, buggy, args, kwargs", PLANTED)
def test_planted_bug_fails_the_check(check, buggy, args, kwargs):
    with pytest.raises(AssertionError):
        check(buggy, *args, **kwargs)


# --- Bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda u: {**u, "mask": u["mask"][:-1]}, ValueError, "mask has shape"),
        (lambda u: {**u, "mask": u["mask"][0]}, ValueError, "mask has shape"),
        (lambda u: {**u, "mask": u["mask"].astype(np.int32)}, TypeError, "mask must be a float"),
        (lambda u: {**u, "mask": 0.5 * u["mask"]}, ValueError, "only 0 .rejected. and 1"),
        (lambda u: {**u, "log_rhos": u["log_rhos"].astype(np.int32)}, TypeError, "log_rhos must be a float"),
        (lambda u: {**u, "values": u["values"][:-1]}, ValueError, "values has shape"),
        (lambda u: {**u, "clip_rho_threshold": -1.0}, ValueError, "clip_rho_threshold must be >= 0"),
        (lambda u: {**u, "clip_pg_rho_threshold": -1.0}, ValueError, "clip_pg_rho_threshold must be >= 0"),
    ],
)
def test_vtrace_bad_input_names_the_argument(change, error, message):
    with pytest.raises(error, match=message):
        trust_region.vtrace(**change({**random_unroll(5, 3, seed=0), "mask": rejection_mask("random", 5, 3)}))


@pytest.mark.parametrize("fn", [trust_region.implied_policy, trust_region.kl_to_implied])
def test_policy_bad_input_names_the_argument(fn):
    target, behaviour = random_logits((3, 4), seed=0)
    for rho_bar in (-1.0, 0.0):
        with pytest.raises(ValueError, match=r"clip_rho_threshold \(rho_bar\) must be > 0"):
            fn(target, behaviour, rho_bar)
    with pytest.raises(ValueError, match="behaviour_logits has shape"):
        fn(target, behaviour[:, :-1], 1.0)
    with pytest.raises(ValueError, match="must have an action axis"):
        fn(np.float32(0.0), np.float32(0.0), 1.0)
    with pytest.raises(TypeError, match="target_logits must be a float"):
        fn(target.astype(np.int32), behaviour, 1.0)
