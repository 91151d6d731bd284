"""Double Q-learning TD errors and PER's weighted Huber loss against float64 NumPy references."""

import numpy as np
import pytest
import tensorflow as tf

from per import losses

B, A = 6, 4


def compiled(function):
    return tf.function(function, jit_compile=True)


MODES = pytest.mark.parametrize("mode", [lambda f: f, compiled], ids=["eager", "jit"])


def first_argmax(row):
    """The lowest index among the maxima, by a literal scan."""
    best = 0
    for a in range(1, len(row)):
        if row[a] > row[best]:
            best = a
    return best


def reference_td(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector):
    """delta_j = r_j + gamma_j Q^-(S_j, argmax_a Q(S_j, a)) - Q(S_{j-1}, A_{j-1}), one sample at a time."""
    td = np.empty(len(r_t))
    for j in range(len(r_t)):
        target = float(r_t[j]) + float(discount_t[j]) * float(q_t_value[j, first_argmax(q_t_selector[j])])
        td[j] = target - float(q_tm1[j, a_tm1[j]])
    return td


def reference_huber(x):
    return np.where(np.abs(x) <= 1.0, 0.5 * x**2, np.abs(x) - 0.5)


def batch(seed=0):
    """A batch with terminal steps (discount 0), ties in the selector, and selector != value argmax."""
    rng = np.random.default_rng(seed)
    q_t_selector = rng.normal(size=(B, A)).astype(np.float32)
    q_t_selector[1] = [0.5, 2.0, 2.0, -1.0]  # Tie between actions 1 and 2: action 1.
    q_t_selector[2] = [3.0, 3.0, 3.0, 3.0]  # All tied: action 0.
    q_t_value = rng.normal(size=(B, A)).astype(np.float32) * 2
    q_t_value[1] = [0.0, 1.0, -5.0, 9.0]  # Action 1 and 2 differ; the value argmax (3) is not selected.
    q_t_value[2] = [-2.0, 4.0, 4.0, 4.0]
    return dict(
        q_tm1=rng.normal(size=(B, A)).astype(np.float32),
        a_tm1=rng.integers(0, A, size=B).astype(np.int32),
        r_t=rng.uniform(-1, 1, size=B).astype(np.float32),
        # Terminal steps at 3 and 5: the tied rows 1 and 2 bootstrap, so their ties decide the TD error.
        discount_t=np.array([0.99, 0.99, 0.99, 0.0, 0.99, 0.0], np.float32),
        q_t_value=q_t_value,
        q_t_selector=q_t_selector,
    )


@MODES
def test_double_q_td_errors_match_the_reference(mode):
    data = batch()
    td = mode(losses.double_q_learning)(**data).numpy()
    np.testing.assert_allclose(td, reference_td(**data), rtol=1e-5, atol=1e-6)
    # Terminal steps do not bootstrap; ties pick the first action, valued by the target network.
    q_tm1, a_tm1, r_t = data["q_tm1"], data["a_tm1"], data["r_t"]
    for j in (3, 5):
        assert td[j] == pytest.approx(r_t[j] - q_tm1[j, a_tm1[j]], abs=1e-6)
    assert td[1] == pytest.approx(r_t[1] + 0.99 * 1.0 - q_tm1[1, a_tm1[1]], abs=1e-6)
    assert td[2] == pytest.approx(r_t[2] + 0.99 * -2.0 - q_tm1[2, a_tm1[2]], abs=1e-6)  # All tied: action 0.


@MODES
def test_ties_go_to_the_first_action(mode):
    q_t_selector = np.array([[1.0, 1.0, 1.0], [0.0, 2.0, 2.0], [-1.0, -3.0, -1.0]], np.float32)
    q_t_value = np.tile(np.array([[10.0, 20.0, 30.0]], np.float32), [3, 1])
    zeros = np.zeros(3, np.float32)
    td = mode(losses.double_q_learning)(np.zeros((3, 3), np.float32), np.zeros(3, np.int32), zeros,
                                        np.ones(3, np.float32), q_t_value, q_t_selector)  # fmt: skip
    np.testing.assert_array_equal(td.numpy(), [10.0, 20.0, 10.0])


@MODES
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_loss_is_the_importance_weighted_huber_of_the_td_errors(mode, reduction):
    data = batch(1)
    w = np.array([1.0, 0.5, 0.25, 0.0, 0.8, 0.1], np.float32)
    out = mode(lambda **kw: losses.prioritized_double_q_loss(**kw, importance_weights=w, reduction=reduction))(**data)
    td = reference_td(**data)
    assert (np.abs(td) > 1).any() and (np.abs(td) < 1).any()  # Both Huber branches.
    weighted = w * reference_huber(td)
    expected = weighted.mean() if reduction == "mean" else weighted.sum()
    assert out.loss.numpy() == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(out.td_error.numpy(), td, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.new_priorities.numpy(), np.abs(td), rtol=1e-5, atol=1e-6)  # No epsilon.


@MODES
@pytest.mark.parametrize("reduction", ["mean", "sum"])  # The MinAtar presets average; PER's Atari ones sum.
def test_gradients_are_the_weighted_clipped_td_errors_on_the_taken_actions_only(mode, reduction):
    data = batch(2)
    w = np.array([1.0, 0.5, 0.25, 0.7, 0.8, 0.1], np.float32)

    def gradients(q_tm1, q_t_value, q_t_selector):
        with tf.GradientTape() as tape:
            tape.watch([q_tm1, q_t_value, q_t_selector])
            inputs = {**data, "q_tm1": q_tm1, "q_t_value": q_t_value, "q_t_selector": q_t_selector}
            loss = losses.prioritized_double_q_loss(**inputs, importance_weights=w, reduction=reduction).loss
        return tape.gradient(loss, [q_tm1, q_t_value, q_t_selector], unconnected_gradients="zero")

    d_q_tm1, d_value, d_selector = (g.numpy() for g in mode(gradients)(
        *(tf.constant(data[k]) for k in ("q_tm1", "q_t_value", "q_t_selector"))))  # fmt: skip
    td = reference_td(**data)
    assert (np.abs(td) > 1).any() and (np.abs(td) < 1).any()
    expected = np.zeros((B, A))
    expected[np.arange(B), data["a_tm1"]] = -w * np.clip(td, -1.0, 1.0) / (B if reduction == "mean" else 1)
    np.testing.assert_allclose(d_q_tm1, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(d_value, 0.0)  # The target is a constant.
    np.testing.assert_array_equal(d_selector, 0.0)


@MODES
def test_the_gradient_is_the_clipped_td_error_at_the_huber_kink_too(mode):
    """At |delta| = 1 exactly (and 0) the gradient is still clip(delta, -1, 1), not a half-step or a zero."""
    r_t = np.array([1.0, -1.0, 0.0, 0.5, 1.5, -2.0], np.float32)  # delta = r_t: no bootstrap, Q(S_{j-1}) = 0.
    zeros = np.zeros(B, np.float32)

    def gradient(q_tm1):
        with tf.GradientTape() as tape:
            tape.watch(q_tm1)
            loss = losses.prioritized_double_q_loss(
                q_tm1, np.zeros(B, np.int32), r_t, zeros, np.zeros((B, A), np.float32),
                np.zeros((B, A), np.float32), importance_weights=np.ones(B, np.float32), reduction="sum",
            ).loss  # fmt: skip
        return tape.gradient(loss, q_tm1)

    d_q_tm1 = mode(gradient)(tf.zeros((B, A))).numpy()
    np.testing.assert_array_equal(d_q_tm1[:, 0], -np.clip(r_t, -1.0, 1.0))
    np.testing.assert_array_equal(d_q_tm1[:, 1:], 0.0)


def test_bad_ranks_shapes_and_types_raise():
    data = batch()
    w = np.ones(B, np.float32)
    bad_ranks = {
        "q_tm1": data["q_tm1"][0],
        "a_tm1": data["a_tm1"][:, None],
        "r_t": data["r_t"][:, None],
        "discount_t": np.float32(0.99),
        "q_t_value": data["q_t_value"][None],
    }
    for name, value in bad_ranks.items():
        with pytest.raises(ValueError, match=f"{name} must have rank"):
            losses.double_q_learning(**{**data, name: value})
    for name, value in {"q_t_selector": data["q_t_selector"][:, :2], "r_t": data["r_t"][:3]}.items():
        with pytest.raises(ValueError, match=f"{name} has shape"):
            losses.double_q_learning(**{**data, name: value})
    with pytest.raises(TypeError, match="a_tm1 must be an integer"):
        losses.double_q_learning(**{**data, "a_tm1": data["a_tm1"].astype(np.float32)})
    with pytest.raises(ValueError, match="importance_weights must have rank 1"):
        losses.prioritized_double_q_loss(**data, importance_weights=w[:, None])
    with pytest.raises(ValueError, match="importance_weights has shape"):
        losses.prioritized_double_q_loss(**data, importance_weights=w[:3])
    with pytest.raises(ValueError, match="accepted: mean, sum"):
        losses.prioritized_double_q_loss(**data, importance_weights=w, reduction="median")
