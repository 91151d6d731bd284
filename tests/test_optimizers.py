"""RMSPropTF1 against TensorFlow 1's own RMSPropOptimizer."""

import numpy as np
import pytest
import tensorflow as tf

from common.optimizers import RMSPropTF1


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
