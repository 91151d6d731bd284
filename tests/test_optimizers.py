"""RMSPropTF1 against TensorFlow 1's own RMSPropOptimizer; RMSPropTorch against PyTorch's documented update."""

import numpy as np
import pytest
import tensorflow as tf

from common.optimizers import RMSPropTF1, RMSPropTorch


@pytest.mark.parametrize("centered, momentum", [(False, 0.0), (True, 0.0), (False, 0.9)])
def test_matches_tf1_rmsprop(centered, momentum):
    rng = np.random.default_rng(0)
    init = rng.standard_normal((3, 2)).astype(np.float32)
    gradients = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(5)]

    ours = tf.Variable(init)
    optimizer = RMSPropTF1([ours], decay=0.95, epsilon=0.01, momentum=momentum, centered=centered)
    for g in gradients:
        optimizer.apply([tf.constant(g)], tf.constant(0.1))

    graph = tf.Graph()
    with graph.as_default():
        theirs = tf.compat.v1.Variable(init)
        g_in = tf.compat.v1.placeholder(tf.float32, (3, 2))
        tf1 = tf.compat.v1.train.RMSPropOptimizer(0.1, decay=0.95, momentum=momentum, epsilon=0.01, centered=centered)
        train = tf1.apply_gradients([(g_in, theirs)])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for g in gradients:
                session.run(train, {g_in: g})
            expected = session.run(theirs)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert int(optimizer.iterations) == 5


def test_differs_from_keras_rmsprop():
    """Keras puts epsilon outside the root and starts ms at 0: not the same optimizer."""
    ours, keras_var = tf.Variable([1.0]), tf.Variable([1.0])
    RMSPropTF1([ours], epsilon=0.01).apply([tf.constant([0.1])], tf.constant(0.01))
    tf.keras.optimizers.RMSprop(0.01, rho=0.99, epsilon=0.01).apply_gradients([(tf.constant([0.1]), keras_var)])
    assert abs(ours.numpy()[0] - keras_var.numpy()[0]) > 1e-4


def torch_rmsprop(w, gradients, lrs, alpha, eps, momentum, centered):
    """float64 NumPy of the algorithm in torch.optim.RMSprop's documentation (weight_decay 0)."""
    v, g_ave, b = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for g, lr in zip(gradients, lrs):
        v = alpha * v + (1 - alpha) * g**2
        v_tilde = v
        if centered:
            g_ave = alpha * g_ave + (1 - alpha) * g
            v_tilde = v - g_ave**2
        if momentum > 0:
            b = momentum * b + g / (np.sqrt(v_tilde) + eps)
            w = w - lr * b
        else:
            w = w - lr * g / (np.sqrt(v_tilde) + eps)
    return w


@pytest.mark.parametrize("centered, momentum", [(True, 0.0), (False, 0.0), (True, 0.95)])
def test_torch_form_matches_pytorchs_algorithm(centered, momentum):
    rng = np.random.default_rng(1)
    init = rng.standard_normal((4, 3))
    gradients = [rng.standard_normal((4, 3)) * 0.1 for _ in range(6)]
    ours = tf.Variable(init.astype(np.float32))
    optimizer = RMSPropTorch([ours], decay=0.95, epsilon=0.01, momentum=momentum, centered=centered)
    lrs = [0.00025 * (1 + t) for t in range(len(gradients))]  # Changing: lr multiplies the buffer, not its terms.
    for g, lr in zip(gradients, lrs):
        optimizer.apply([tf.constant(g.astype(np.float32))], tf.constant(lr))
    expected = torch_rmsprop(init, gradients, lrs, 0.95, 0.01, momentum, centered)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-7)
    assert not np.allclose(expected, init, rtol=0, atol=1e-4)  # The steps are large enough to tell apart.
    assert int(optimizer.iterations) == 6


def test_torch_form_is_not_tf1s_with_the_same_hyper_parameters():
    """Epsilon outside the root and ms from 0 (TF1's from 1): PyTorch's first steps are many times TF1's."""
    g = tf.constant([0.1])
    torch_form, tf1 = tf.Variable([1.0]), tf.Variable([1.0])
    RMSPropTorch([torch_form], decay=0.95, epsilon=0.01, centered=True).apply([g], tf.constant(0.01))
    RMSPropTF1([tf1], decay=0.95, epsilon=0.01, centered=True).apply([g], tf.constant(0.01))
    assert 1.0 - torch_form.numpy()[0] > 10 * (1.0 - tf1.numpy()[0])
