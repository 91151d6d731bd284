"""RMSProp with TensorFlow 1 semantics, as the IMPALA and LASER papers used, and PyTorch's.

    ms  <- decay ms + (1 - decay) g^2           (ms starts at 1, as in TF1)
    mom <- momentum mom + lr g / sqrt(ms + epsilon)
    w   <- w - mom

(DQN's Lua code: the centered form below, its averages starting at 0.)

With `centered=True` (DQN's variant; Graves 2013) the denominator is
sqrt(ms - mg^2 + epsilon), mg the running mean of g. Keras' `RMSprop` puts
epsilon outside the square root and starts ms at 0, so it is a different
optimizer for the same hyper-parameters; IMPALA's epsilon 0.01 inside the root
is 1e-4 outside it.

`RMSPropTorch` is `torch.optim.RMSprop`'s update, which Young & Tian's MinAtar
DQN used (centered, epsilon 0.01): ms and mg start at 0 and epsilon is added
outside the root,

    ms  <- decay ms + (1 - decay) g^2,   mg <- decay mg + (1 - decay) g
    mom <- momentum mom + g / (sqrt(ms - mg^2) + epsilon)
    w   <- w - lr mom
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


class _RMSProp(tf.Module):
    """The hyper-parameters and checkpointable state both forms keep: ms, mom and (centered) mg per variable."""

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        decay: float,
        epsilon: float,
        momentum: float,
        centered: bool,
        name: str,
        ms_start: float,
    ):
        super().__init__(name=name)
        self.decay, self.epsilon, self.momentum, self.centered = decay, epsilon, momentum, centered
        self._variables = list(variables)
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations")
        self.ms = [tf.Variable(ms_start * tf.ones_like(v), trainable=False, name="ms") for v in self._variables]
        self.mom = [tf.Variable(tf.zeros_like(v), trainable=False, name="mom") for v in self._variables]
        self.mg = (
            [tf.Variable(tf.zeros_like(v), trainable=False, name="mg") for v in self._variables] if centered else []
        )


class RMSPropTF1(_RMSProp):
    """`tf.compat.v1.train.RMSPropOptimizer`'s update as a checkpointable module (ms starts at 1)."""

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        decay: float = 0.99,
        epsilon: float = 0.01,
        momentum: float = 0.0,
        centered: bool = False,
        name: str = "rmsprop_tf1",
    ):
        super().__init__(variables, decay, epsilon, momentum, centered, name, ms_start=1.0)

    def apply(self, gradients: Sequence[tf.Tensor], learning_rate: tf.Tensor) -> None:
        """One update of every variable with its gradient.

        Through the fused kernels TF1's optimizer itself ran (one op per
        variable instead of about fifteen): on small networks the per-op cost
        is most of an update.
        """
        for i, (variable, gradient) in enumerate(zip(self._variables, gradients)):
            hyper = dict(
                lr=tf.cast(learning_rate, variable.dtype), rho=tf.constant(self.decay, variable.dtype),
                momentum=tf.constant(self.momentum, variable.dtype), epsilon=tf.constant(self.epsilon, variable.dtype),
                grad=gradient,
            )  # fmt: skip
            if self.centered:
                tf.raw_ops.ResourceApplyCenteredRMSProp(
                    var=variable.handle, mg=self.mg[i].handle, ms=self.ms[i].handle, mom=self.mom[i].handle, **hyper
                )
            else:
                tf.raw_ops.ResourceApplyRMSProp(
                    var=variable.handle, ms=self.ms[i].handle, mom=self.mom[i].handle, **hyper
                )
        self.iterations.assign_add(1)


def rmsprop(form: str, variables: Sequence[tf.Variable], **hyper) -> RMSPropTF1 | RMSPropTorch:
    """RMSProp of the given `form`: "tf1" (TF1's, as Dopamine; epsilon inside the root as DQN's Lua) or "torch"."""
    return {"tf1": RMSPropTF1, "torch": RMSPropTorch}[form](variables, **hyper)


class RMSPropTorch(_RMSProp):
    """`torch.optim.RMSprop`'s update (no weight decay) as a checkpointable module (ms and mg start at 0)."""

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        decay: float = 0.99,
        epsilon: float = 1e-8,
        momentum: float = 0.0,
        centered: bool = False,
        name: str = "rmsprop_torch",
    ):
        super().__init__(variables, decay, epsilon, momentum, centered, name, ms_start=0.0)

    def apply(self, gradients: Sequence[tf.Tensor], learning_rate: tf.Tensor) -> None:
        """One update of every variable with its gradient."""
        for i, (variable, g) in enumerate(zip(self._variables, gradients)):
            lr = tf.cast(learning_rate, variable.dtype)
            ms = self.ms[i].assign(self.decay * self.ms[i] + (1 - self.decay) * tf.square(g))
            variance = ms
            if self.centered:
                mg = self.mg[i].assign(self.decay * self.mg[i] + (1 - self.decay) * g)
                variance = ms - tf.square(mg)
            step = g / (tf.sqrt(variance) + self.epsilon)
            if self.momentum:
                step = self.mom[i].assign(self.momentum * self.mom[i] + step)
            variable.assign_sub(lr * step)
        self.iterations.assign_add(1)
