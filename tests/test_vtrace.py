"""V-trace against a literal float64 reading of IMPALA eq. (1), eagerly and under XLA."""

import numpy as np
import pytest
import tensorflow as tf

from impala import vtrace


def reference_vtrace(
    log_rhos, discounts, rewards, values, bootstrap_value,
    rho_bar=1.0, pg_rho_bar=1.0, c_bar=1.0, lambda_=1.0,
):  # fmt: skip
    """O(T^2) float64 evaluation of the sum in eq. (1), not of the recursion.

    v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)).
    """
    log_rhos, discounts, rewards, values, bootstrap_value = (
        np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values, bootstrap_value)
    )
    T, B = log_rhos.shape
    lambdas = np.broadcast_to(np.asarray(lambda_, np.float64), (T, B))
    ratios = np.exp(log_rhos)
    clip = lambda x, bar: x if bar is None else np.minimum(bar, x)  # noqa: E731
    rhos, cs, pg_rhos = clip(ratios, rho_bar), lambdas * clip(ratios, c_bar), clip(ratios, pg_rho_bar)
    next_values = np.concatenate([values[1:], bootstrap_value[None]])
    vs = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            total = values[s, b]
            for t in range(s, T):
                trace = np.prod([discounts[i, b] * cs[i, b] for i in range(s, t)])
                delta = rhos[t, b] * (rewards[t, b] + discounts[t, b] * next_values[t, b] - values[t, b])
                total += trace * delta
            vs[s, b] = total
    next_vs = np.concatenate([vs[1:], bootstrap_value[None]])
    pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return vs, pg_advantages


def n_step_returns(discounts, rewards, bootstrap_value):
    """G_s = r_s + gamma_s G_{s+1}, G_T = V(x_T), in float64: the uncorrected targets (§5.2.2's no-correction)."""
    returns, following = np.zeros(np.shape(rewards)), np.asarray(bootstrap_value, np.float64)
    for s in reversed(range(len(rewards))):
        returns[s] = following = rewards[s] + discounts[s] * following
    return returns


def random_unroll(T, B, seed=0, terminal_prob=0.1, spread=1.0):
    rng = np.random.default_rng(seed)
    return dict(
        log_rhos=(spread * rng.standard_normal((T, B))).astype(np.float32),
        discounts=(0.9 * (rng.random((T, B)) > terminal_prob)).astype(np.float32),
        rewards=rng.standard_normal((T, B)).astype(np.float32),
        values=rng.standard_normal((T, B)).astype(np.float32),
        bootstrap_value=rng.standard_normal(B).astype(np.float32),
    )


def compiled(fn):
    return tf.function(fn, jit_compile=True)


MODES = {"eager": lambda fn: fn, "xla": compiled}


def check_against_reference(mode, unroll, **kwargs):
    names = {
        "clip_rho_threshold": "rho_bar",
        "clip_pg_rho_threshold": "pg_rho_bar",
        "clip_c_threshold": "c_bar",
    }
    reference_kwargs = {names.get(k, k): v for k, v in kwargs.items()}
    expected_vs, expected_pg = reference_vtrace(**unroll, **reference_kwargs)
    result = MODES[mode](lambda u: vtrace.from_importance_weights(**u, **kwargs))(unroll)
    np.testing.assert_allclose(result.vs.numpy(), expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "T, B, kwargs",
    [
        (5, 3, {}),
        (8, 4, {"clip_rho_threshold": 3.7}),  # rho_bar > c_bar.
        (8, 4, {"clip_rho_threshold": None, "clip_pg_rho_threshold": None}),
        (8, 4, {"clip_c_threshold": None, "clip_rho_threshold": None}),
        (8, 4, {"clip_pg_rho_threshold": 2.0, "clip_rho_threshold": 0.5, "clip_c_threshold": 0.5}),
        (8, 4, {"lambda_": 0.7}),  # Remark 2.
        (1, 1, {}),
        (1, 5, {}),
        (20, 1, {}),
    ],
)
def test_matches_the_sum_in_eq_1(mode, T, B, kwargs):
    check_against_reference(mode, random_unroll(T, B, seed=T * 100 + B), **kwargs)


@pytest.mark.parametrize("mode", MODES)
def test_per_step_lambda_mask_cuts_the_trace(mode):
    unroll = random_unroll(12, 6, seed=3)
    mask = (np.random.default_rng(4).random((12, 6)) > 0.3).astype(np.float32)
    check_against_reference(mode, unroll, lambda_=mask)


def test_large_batch_matches_reference_on_a_slice():
    unroll = random_unroll(20, 256, seed=9)
    result = compiled(lambda u: vtrace.from_importance_weights(**u))(unroll)
    columns = slice(0, 256, 37)
    expected_vs, expected_pg = reference_vtrace(
        **{k: v[..., columns] if v.ndim == 2 else v[columns] for k, v in unroll.items()}
    )
    np.testing.assert_allclose(result.vs.numpy()[:, columns], expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.pg_advantages.numpy()[:, columns], expected_pg, rtol=1e-5, atol=1e-5)


def test_on_policy_equals_n_step_bootstrapped_returns():
    """Eq. (2): with pi = mu and c_bar >= 1, v_s = sum gamma^{t-s} r_t + gamma^{n} V(x_{s+n})."""
    T, B, gamma = 7, 3, 0.9
    unroll = random_unroll(T, B, seed=1)
    unroll["log_rhos"] = np.zeros((T, B), np.float32)
    unroll["discounts"] = np.full((T, B), gamma, np.float32)
    result = vtrace.from_importance_weights(**unroll, clip_rho_threshold=2.0)
    for s in range(T):
        n = T - s
        expected = sum(gamma**k * unroll["rewards"][s + k] for k in range(n))
        expected = expected + gamma**n * unroll["bootstrap_value"]
        np.testing.assert_allclose(result.vs.numpy()[s], expected, rtol=1e-5)


def test_episode_end_inside_the_unroll_stops_bootstrap_and_trace():
    """Splitting at a zero discount gives the same targets as two separate unrolls."""
    unroll = random_unroll(10, 2, seed=5, terminal_prob=0.0)
    unroll["discounts"][3] = 0.0  # The episode ends at step 3.
    whole = vtrace.from_importance_weights(**unroll, clip_rho_threshold=2.0)
    first = {k: v[:4] if v.ndim == 2 else np.full_like(v, 123.0) for k, v in unroll.items()}
    second = {k: v[4:] if v.ndim == 2 else v for k, v in unroll.items()}
    head = vtrace.from_importance_weights(**first, clip_rho_threshold=2.0)
    tail = vtrace.from_importance_weights(**second, clip_rho_threshold=2.0)
    np.testing.assert_allclose(whole.vs.numpy()[:4], head.vs.numpy(), rtol=1e-6)
    np.testing.assert_allclose(whole.vs.numpy()[4:], tail.vs.numpy(), rtol=1e-6)
    # The last step's reward stays in its own target (no RLlib-style drop).
    expected_last = unroll["values"][3] + np.minimum(1.0, np.exp(unroll["log_rhos"][3])) * (
        unroll["rewards"][3] - unroll["values"][3]
    )
    np.testing.assert_allclose(whole.vs.numpy()[3], expected_last, rtol=1e-5)


def test_outputs_carry_no_gradient():
    unroll = {k: tf.Variable(v) for k, v in random_unroll(6, 3, seed=2).items()}
    with tf.GradientTape() as tape:
        result = vtrace.from_importance_weights(**unroll)
        total = tf.reduce_sum(result.vs) + tf.reduce_sum(result.pg_advantages)
    gradients = tape.gradient(total, list(unroll.values()))
    assert all(g is None for g in gradients)


def test_from_logits_matches_from_importance_weights():
    T, B, A = 6, 4, 5
    rng = np.random.default_rng(7)
    behaviour = rng.standard_normal((T, B, A)).astype(np.float32)
    target = rng.standard_normal((T, B, A)).astype(np.float32)
    actions = rng.integers(A, size=(T, B)).astype(np.int32)
    unroll = random_unroll(T, B, seed=8)
    unroll.pop("log_rhos")
    result = compiled(lambda: vtrace.from_logits(behaviour, target, actions, **unroll))()
    log_softmax = lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))  # noqa: E731
    pick = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]  # noqa: E731
    log_rhos = pick(log_softmax(target)) - pick(log_softmax(behaviour))
    np.testing.assert_allclose(result.log_rhos.numpy(), log_rhos, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.behaviour_action_log_probs.numpy(), pick(log_softmax(behaviour)), rtol=1e-5)
    expected_vs, expected_pg = reference_vtrace(log_rhos, **unroll)
    np.testing.assert_allclose(result.vs.numpy(), expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)


def test_table_2_corrections():
    T, B, A = 6, 4, 3
    rng = np.random.default_rng(11)
    behaviour = rng.standard_normal((T, B, A)).astype(np.float32)
    target = rng.standard_normal((T, B, A)).astype(np.float32)
    actions = rng.integers(A, size=(T, B)).astype(np.int32)
    unroll = random_unroll(T, B, seed=12)
    log_rhos = unroll.pop("log_rhos")
    run = lambda c: vtrace.off_policy_targets(c, behaviour, target, actions, **unroll)  # noqa: E731
    uncorrected_vs, uncorrected_pg = reference_vtrace(np.zeros_like(log_rhos), **unroll)
    for correction in ("none", "epsilon"):
        np.testing.assert_allclose(run(correction).vs.numpy(), uncorrected_vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(run(correction).pg_advantages.numpy(), uncorrected_pg, rtol=1e-5, atol=1e-5)
    one_step = run("one_step_is")
    rhos = np.minimum(1.0, np.exp(one_step.log_rhos.numpy()))
    np.testing.assert_allclose(one_step.vs.numpy(), uncorrected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(one_step.pg_advantages.numpy(), rhos * uncorrected_pg, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        run("vtrace").vs.numpy(),
        reference_vtrace(one_step.log_rhos.numpy(), **unroll)[0],
        rtol=1e-5,
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="accepted: vtrace, none, epsilon, one_step_is"):
        run("retrace")


def test_table_2_corrections_bootstrap_n_step_returns_whatever_the_truncation_levels():
    """`none`'s and `epsilon`'s targets are n-step returns G_s = r_s + gamma_s G_{s+1}, G_T = V(x_T), with
    q_s - V(x_s) = G_s - V(x_s) for the policy; `one_step_is` weights that by min(rho-bar-pg, rho_s) (§5.2.2).
    The truncation levels, here below and above 1 and each different, must not touch a weight of 1."""
    T, B, A = 7, 3, 4
    rng = np.random.default_rng(5)
    behaviour, target = (rng.standard_normal((T, B, A)).astype(np.float32) for _ in range(2))
    actions = rng.integers(A, size=(T, B)).astype(np.int32)
    unroll = random_unroll(T, B, seed=6)
    unroll.pop("log_rhos")
    levels = dict(clip_rho_threshold=0.5, clip_pg_rho_threshold=2.0, clip_c_threshold=0.7)
    returns = n_step_returns(unroll["discounts"], unroll["rewards"], unroll["bootstrap_value"])
    advantages = returns - unroll["values"]
    for correction in ("none", "epsilon", "one_step_is"):
        targets = vtrace.off_policy_targets(correction, behaviour, target, actions, **unroll, **levels)
        np.testing.assert_allclose(targets.vs.numpy(), returns, rtol=1e-5, atol=1e-5)
        pg_rhos = np.minimum(2.0, np.exp(targets.log_rhos.numpy().astype(np.float64)))
        expected_pg = pg_rhos * advantages if correction == "one_step_is" else advantages
        np.testing.assert_allclose(targets.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)


def test_epsilon_correction_adds_epsilon_inside_the_log():
    logits = tf.constant([[[0.0, -40.0]]])
    actions = tf.constant([[1]])
    plain = vtrace.action_log_probs(logits, actions)
    corrected = vtrace.action_log_probs(logits, actions, epsilon=vtrace.EPSILON_CORRECTION)
    assert float(plain[0, 0]) < -39.0
    np.testing.assert_allclose(float(corrected[0, 0]), np.log(np.exp(-40.0) + 1e-6), rtol=1e-4)


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda u: {**u, "values": u["values"][:-1]}, ValueError, "values has shape"),
        (lambda u: {**u, "rewards": u["rewards"][:, :-1]}, ValueError, "rewards has shape"),
        (lambda u: {**u, "bootstrap_value": u["values"]}, ValueError, "bootstrap_value must have rank 1"),
        (lambda u: {**u, "discounts": u["discounts"][0]}, ValueError, "discounts must have rank 2"),
        (lambda u: {**u, "rewards": u["rewards"].astype(np.int32)}, TypeError, "rewards must be a float"),
        (lambda u: {**u, "log_rhos": np.where(u["log_rhos"] > 0, np.inf, 0).astype(np.float32)}, ValueError,
         "log_rhos has non-finite"),
        (lambda u: {**u, "log_rhos": np.full_like(u["log_rhos"], np.nan)}, ValueError,
         "log_rhos has non-finite"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument(change, error, message):
    with pytest.raises(error, match=message):
        vtrace.from_importance_weights(**change(random_unroll(4, 3)))


def test_bad_lambda_shape_and_threshold_and_actions():
    unroll = random_unroll(4, 3)
    with pytest.raises(ValueError, match="lambda_ has shape"):
        vtrace.from_importance_weights(**unroll, lambda_=np.ones((3, 3), np.float32))
    with pytest.raises(ValueError, match="clip_rho_threshold must be >= 0"):
        vtrace.from_importance_weights(**unroll, clip_rho_threshold=-1.0)
    unroll.pop("log_rhos")
    logits = np.zeros((4, 3, 2), np.float32)
    with pytest.raises(TypeError, match="actions must be an integer"):
        vtrace.from_logits(logits, logits, np.zeros((4, 3), np.float32), **unroll)
