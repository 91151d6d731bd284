"""The Q-network: a shared torso and a linear head of one value per action.

* Atari: Mnih et al. 2015's network (`nature_dqn`: conv 32 8x8/4, conv 64
  4x4/2, conv 64 3x3/1, FC 512) with tuned Double DQN's shared bias, as PER
  §4 uses it;
* MinAtar: Young & Tian 2019's (`minatar`: conv 16 3x3/1, FC 128);
* `toy`: a 2-layer MLP, for Catch.

Observations arrive as the env gives them (uint8 frames or boards);
`common.networks.Preprocess` learns their layout from the observation space.
"""

from __future__ import annotations

from typing import Optional

import gymnasium as gym
import sonnet as snt
import tensorflow as tf

from common.networks import TORSOS, Preprocess, torch_default_init


class QNetwork(snt.Module):
    """Q(s, .; theta): observations [B, ...] -> action values [B, A].

    With `shared_bias` the head is tuned Double DQN's (van Hasselt et al.
    2016): weights per action and a single bias added to every action's value.
    """

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        num_actions: int,
        torso: str,
        shared_bias: bool = False,
        name: Optional[str] = None,
    ):
        super().__init__(name=name)
        self._preprocess = Preprocess(observation_space)
        self._torso = TORSOS[torso]()
        self._head = snt.Linear(num_actions, with_bias=not shared_bias, name="q")
        self._shared_bias = tf.Variable(0.0, name="shared_bias") if shared_bias else None
        self.num_actions = num_actions

    def __call__(self, observation: tf.Tensor) -> tf.Tensor:
        q = self._head(self._torso(self._preprocess(observation)))
        return q if self._shared_bias is None else q + self._shared_bias


def greedy_actions(network: QNetwork, observation: tf.Tensor) -> tf.Tensor:
    """[B] int32 argmax_a Q(s, a; theta) of observations [B, ...]."""
    return tf.argmax(network(observation), axis=1, output_type=tf.int32)


def make(config, observation_space: gym.spaces.Box, num_actions: int, name: str) -> QNetwork:
    """The network of a `PerConfig`, with its variables created as `config.initialization` draws them."""
    network = QNetwork(observation_space, num_actions, config.network, config.shared_bias, name=name)
    network(tf.zeros((1, *observation_space.shape), observation_space.dtype))
    if config.initialization == "torch":
        torch_default_init(network)
    return network
