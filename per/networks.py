"""The Q-network: a shared torso and a linear head of one value per action.

* Atari: Mnih et al. 2015's network (`nature_dqn`: conv 32 8x8/4, conv 64
  4x4/2, conv 64 3x3/1, FC 512), as PER §4 and tuned Double DQN use it;
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

from common.networks import TORSOS, Preprocess


class QNetwork(snt.Module):
    """Q(s, .; theta): observations [B, ...] -> action values [B, A]."""

    def __init__(self, observation_space: gym.spaces.Box, num_actions: int, torso: str, name: Optional[str] = None):
        super().__init__(name=name)
        self._preprocess = Preprocess(observation_space)
        self._torso = TORSOS[torso]()
        self._head = snt.Linear(num_actions, name="q")
        self.num_actions = num_actions

    def __call__(self, observation: tf.Tensor) -> tf.Tensor:
        return self._head(self._torso(self._preprocess(observation)))


def make(config, observation_space: gym.spaces.Box, num_actions: int, name: str) -> QNetwork:
    """The network of a `PerConfig`, with its variables created."""
    network = QNetwork(observation_space, num_actions, config.network, name=name)
    network(tf.zeros((1, *observation_space.shape), observation_space.dtype))
    return network
