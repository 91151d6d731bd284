"""Epsilon-greedy acting (Mnih et al. 2015): N envs, one transition per env per step.

With probability epsilon an env's action is uniform over the actions,
otherwise argmax_a Q(s, a; theta). The actor's random numbers come from its own
seeded generator, drawn the same way whatever epsilon is, so a run with the
same seed acts the same.

Transitions are (S_{j-1}, A_{j-1}, R_j, terminal_j, S_j). The env resets
itself when an episode ends (same-step autoreset), so after a time-limit
truncation the next observation already belongs to the next episode: the
transition is stored as terminal (the common shortcut; a truncation happens
once per 108K Atari frames). A life loss with `terminal_on_life_loss` is a
terminal of training, and the game goes on.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from per.networks import QNetwork


class Transition(NamedTuple):
    observation: np.ndarray  # S_{j-1}
    action: np.int32  # A_{j-1}
    reward: np.float32  # R_j, unclipped (the learner clips).
    terminal: np.float32  # 1 when S_j ends the episode (for training): gamma_j = 0.
    next_observation: np.ndarray  # S_j


class Actor:
    """Steps a batched env (`common.envs.make_batched`) with an epsilon-greedy policy."""

    def __init__(self, network: QNetwork, env, seed: int):
        self._network, self._env = network, env
        self._rng = np.random.default_rng(seed)
        self._observation, _ = env.reset(seed=seed)
        # A concrete function: calling it skips tf.function's argument matching, a
        # large part of a small network's step.
        self._greedy = tf.function(
            lambda observation: tf.argmax(network(observation), axis=1, output_type=tf.int32)
        ).get_concrete_function(tf.TensorSpec([None, *self._observation.shape[1:]], self._observation.dtype))
        self._return = np.zeros(env.num_envs, np.float64)
        self._length = np.zeros(env.num_envs, np.int64)

    def actions(self, observation: np.ndarray, epsilon: float) -> np.ndarray:
        n = len(observation)
        explore = self._rng.random(n) < epsilon
        uniform = self._rng.integers(self._network.num_actions, size=n, dtype=np.int32)
        if explore.all():  # The network is not needed (most steps early in training).
            return uniform
        return np.where(explore, uniform, self._greedy(tf.convert_to_tensor(observation)).numpy())

    def step(self, epsilon: float) -> tuple[list[Transition], list[tuple[float, int]]]:
        """One step of every env: its N transitions, and (return, length) of games that ended."""
        observation = self._observation
        action = self.actions(observation, epsilon)
        next_observation, reward, terminated, truncated, info = self._env.step(action)
        terminal = (terminated | truncated).astype(np.float32)
        transitions = [
            Transition(observation[i], action[i], np.float32(reward[i]), terminal[i], next_observation[i])
            for i in range(len(action))
        ]
        self._return += reward
        self._length += 1
        game_over = info["game_over"]
        episodes = [(float(self._return[i]), int(self._length[i])) for i in np.flatnonzero(game_over)]
        self._return[game_over], self._length[game_over] = 0.0, 0
        self._observation = next_observation
        return transitions, episodes
