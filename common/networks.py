"""Torsos shared by the agents, in Sonnet 2, and the observation preprocessing.

* `shallow`: Mnih et al. 2016's network (IMPALA Fig. 3 left): conv 16 8x8/4,
  conv 32 4x4/2, FC 256.
* `deep`: IMPALA Fig. 3 right: 3 residual sections of [16, 32, 32] channels,
  each conv 3x3, max-pool 3x3/2 and 2 residual blocks; FC 256.
* `deep_x4`: the deep torso with 4x the channels (LASER §5.1).
* `nature_dqn`: Mnih et al. 2015's DQN network: conv 32 8x8/4, conv 64 4x4/2,
  conv 64 3x3/1, FC 512 (used by Double DQN and PER).
* `minatar`: Young & Tian 2019's torso: conv 16 3x3/1, FC 128.
* `toy`: a 2-layer MLP of 64 units, for the Catch test env.

A torso takes float [B, H, W, C] images (or any [B, ...] for `toy`).
`Preprocess` turns the env's observations into that: it learns the layout from
the env's observation space, not from the env's name.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from common import envs
from common.errors import UsageError


class ResidualBlock(snt.Module):
    def __init__(self, channels: int, name: Optional[str] = None):
        super().__init__(name=name)
        self._conv_a = snt.Conv2D(channels, 3, padding="SAME")
        self._conv_b = snt.Conv2D(channels, 3, padding="SAME")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return x + self._conv_b(tf.nn.relu(self._conv_a(tf.nn.relu(x))))


class DeepTorso(snt.Module):
    """IMPALA Fig. 3 right: residual sections, then FC 256."""

    def __init__(self, channels: tuple[int, ...] = (16, 32, 32), name: Optional[str] = None):
        super().__init__(name=name)
        self._sections = [(snt.Conv2D(c, 3, padding="SAME"), ResidualBlock(c), ResidualBlock(c)) for c in channels]
        self._linear = snt.Linear(256)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        for conv, block_a, block_b in self._sections:
            x = tf.nn.max_pool2d(conv(x), ksize=3, strides=2, padding="SAME")
            x = block_b(block_a(x))
        return tf.nn.relu(self._linear(snt.Flatten()(tf.nn.relu(x))))


def _convolutions_then_linear(convolutions: list[tuple[int, int, int]], hidden: int) -> snt.Module:
    """(channels, kernel, stride) VALID convolutions with ReLUs, then FC `hidden` with a ReLU."""
    layers: list = []
    for channels, kernel, stride in convolutions:
        layers += [snt.Conv2D(channels, kernel, stride=stride, padding="VALID"), tf.nn.relu]
    return snt.Sequential([*layers, snt.Flatten(), snt.Linear(hidden), tf.nn.relu])


TORSOS: dict[str, Callable[[], snt.Module]] = {
    "shallow": lambda: _convolutions_then_linear([(16, 8, 4), (32, 4, 2)], 256),
    "deep": DeepTorso,
    "deep_x4": lambda: DeepTorso(channels=(64, 128, 128)),
    "nature_dqn": lambda: _convolutions_then_linear([(32, 8, 4), (64, 4, 2), (64, 3, 1)], 512),
    "minatar": lambda: _convolutions_then_linear([(16, 3, 1)], 128),
    "toy": lambda: snt.Sequential([snt.Flatten(), snt.Linear(64), tf.nn.relu, snt.Linear(64), tf.nn.relu]),
}


def torch_default_init(module: snt.Module) -> None:
    """Redraws every Linear and Conv2D layer of a built `module` as PyTorch initialises its own.

    `torch.nn.Linear` and `Conv2d` (`reset_parameters`): weights by
    `kaiming_uniform_` with a = sqrt(5), i.e. U(-b, b) with
    b = sqrt(6 / ((1 + a^2) fan_in)) = 1 / sqrt(fan_in), and biases U(-b, b) with
    the same b; fan_in = the layer's inputs (a conv's: kernel height x width x
    input channels). Sonnet's default draws weights from a truncated normal of sd
    1 / sqrt(fan_in), about 1.5x PyTorch's sd 1 / sqrt(3 fan_in), and zero biases.
    Draws from TF's global seed (`tf.random.set_seed`).
    """
    for layer in module.submodules:
        if isinstance(layer, (snt.Linear, snt.Conv2D)):
            fan_in = int(np.prod(layer.w.shape[:-1]))
            bound = 1.0 / np.sqrt(fan_in)
            for variable in (layer.w, getattr(layer, "b", None)):
                if variable is not None:
                    variable.assign(tf.random.uniform(variable.shape, -bound, bound))


class Preprocess(snt.Module):
    """Env observations to float [B, H, W, C] in [0, 1].

    The layout comes from the env's observation space: pixels with values up
    to 255 are scaled by 1/255, and a frame stack given channels-first
    ([C, H, W] with C < H, W, as the Atari env stacks 4 frames of 84x84)
    moves its channels last.
    """

    def __init__(self, space: gym.spaces.Box, name: Optional[str] = None):
        super().__init__(name=name)
        high = float(np.max(space.high))
        self._scale = 1.0 / high if high > 1 else 1.0
        shape = space.shape
        self._channels_first = len(shape) == 3 and shape[0] < min(shape[1], shape[2])

    def __call__(self, observation: tf.Tensor) -> tf.Tensor:
        x = tf.cast(observation, tf.float32) * self._scale
        if self._channels_first:
            x = tf.transpose(x, [0, 2, 3, 1])
        return x


def check_fits(torso: str, space: gym.spaces.Box, env: str) -> None:
    """A `UsageError` if the torso cannot take the env's observations.

    Runs the torso on one zero observation: a network built for 84x84 Atari
    frames fails on MinAtar's 10x10 boards, and the user should hear which.
    """
    if torso not in TORSOS:
        raise UsageError(f"unknown network {torso!r}; accepted: {', '.join(TORSOS)}")
    try:
        TORSOS[torso]()(Preprocess(space)(tf.zeros((1, *space.shape), space.dtype)))
    # Too small a board leaves the torso a negative feature map (ValueError) or, on some CPUs'
    # kernels, an empty one, whose Linear layer's initialiser divides by its zero inputs.
    except (ValueError, ZeroDivisionError, tf.errors.InvalidArgumentError) as error:
        if isinstance(error, ZeroDivisionError):
            reason = "its convolutions leave no features"
        else:
            reason = re.sub(r"\{\{.*?\}\}", "", str(error).splitlines()[0]).strip(" :")[:160]
        raise UsageError(
            f"network {torso!r} does not fit {env}'s observations {tuple(space.shape)} ({reason}); "
            f"choose another --preset or --config_override network=NAME ({', '.join(TORSOS)})"
        ) from None


def check_fits_env(config) -> None:
    """`check_fits` for a config's network and env (with its training options).

    Building the env also surfaces a missing DMLab as a `UsageError`, before a
    run directory exists.
    """
    env = envs.make(config.env, seed=0, **dict(config.env_options))
    try:
        check_fits(config.network, env.observation_space, config.env)
    finally:
        env.close()
