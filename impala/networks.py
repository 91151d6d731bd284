"""IMPALA's actor-critic network in Sonnet 2 (IMPALA §5 and Fig. 3).

A torso from `common.networks` (shallow, deep, deep_x4, minatar, toy), an
optional LSTM, and linear heads for the policy logits and the baseline V(x).
`unroll` folds time into batch for the torso; the LSTM state is reset to zeros
at every step whose `first` flag marks an episode start.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import gymnasium as gym
import sonnet as snt
import tensorflow as tf

from common.networks import TORSOS, Preprocess


class AgentOutput(NamedTuple):
    policy_logits: tf.Tensor  # [..., A]
    baseline: tf.Tensor  # [...]


class ActorCritic(snt.Module):
    """Preprocessing, torso, optional LSTM, policy and baseline heads.

    Observations arrive as the env gives them (e.g. uint8 frames); the
    preprocessing learns their layout from the env's observation space.
    """

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        num_actions: int,
        torso: str,
        use_lstm: bool = False,
        lstm_size: int = 256,
        name: Optional[str] = None,
    ):
        super().__init__(name=name)
        self._preprocess = Preprocess(observation_space)
        self._torso = TORSOS[torso]()
        self._core = snt.LSTM(lstm_size) if use_lstm else None
        self._policy = snt.Linear(num_actions, name="policy")
        self._baseline = snt.Linear(1, name="baseline")
        self.num_actions = num_actions
        self.recurrent = use_lstm

    def initial_state(self, batch_size: int):
        """The recurrent state for `batch_size` envs; () without an LSTM."""
        return self._core.initial_state(batch_size) if self._core is not None else ()

    def _embed(self, observation: tf.Tensor) -> tf.Tensor:
        return self._torso(self._preprocess(observation))

    def _heads(self, features: tf.Tensor) -> AgentOutput:
        return AgentOutput(self._policy(features), tf.squeeze(self._baseline(features), -1))

    def _reset(self, state, first: tf.Tensor):
        keep = 1.0 - tf.cast(first, tf.float32)[:, None]
        return tf.nest.map_structure(lambda s: s * keep, state)

    def step(self, observation: tf.Tensor, first: tf.Tensor, state) -> tuple[AgentOutput, object]:
        """One step for a batch: observation [B, ...], first [B]."""
        features = self._embed(observation)
        if self._core is not None:
            features, state = self._core(features, self._reset(state, first))
        return self._heads(features), state

    def unroll(self, observations: tf.Tensor, first: tf.Tensor, state) -> tuple[AgentOutput, object]:
        """T steps for a batch: observations [T, B, ...], first [T, B]."""
        T, B = tf.shape(observations)[0], tf.shape(observations)[1]
        flat = tf.reshape(observations, tf.concat([[T * B], tf.shape(observations)[2:]], 0))
        features = self._embed(flat)
        features = tf.reshape(features, [T, B, features.shape[-1]])
        if self._core is not None:
            outputs = []
            for t in range(observations.shape[0]):  # Static T: unrolled at trace time.
                output, state = self._core(features[t], self._reset(state, first[t]))
                outputs.append(output)
            features = tf.stack(outputs)
        return self._heads(features), state

    def core_states(self, observations: tf.Tensor, first: tf.Tensor, state) -> tuple[object, object]:
        """The LSTM state before each of T steps, as the actor stores it, and the state after the last.

        observations [T, B, ...], first [T, B]; the states are [T, B, ...] nests.
        LASER's replayer recomputes the stored states with this (App. A.2).
        """
        if self._core is None:
            raise ValueError("core_states needs an LSTM (use_lstm=True)")
        T, B = tf.shape(observations)[0], tf.shape(observations)[1]
        flat = tf.reshape(observations, tf.concat([[T * B], tf.shape(observations)[2:]], 0))
        features = self._embed(flat)
        features = tf.reshape(features, [T, B, features.shape[-1]])
        states = []
        for t in range(observations.shape[0]):  # Static T, as in `unroll`.
            states.append(state)  # Before the reset at an episode start, as the actor stores it.
            _, state = self._core(features[t], self._reset(state, first[t]))
        return tf.nest.map_structure(lambda *s: tf.stack(s), *states), state


def xla_compiles_network(xla: str) -> bool:
    """Whether the network runs under XLA for the config's `xla` mode."""
    if xla == "auto":
        return bool(tf.config.list_physical_devices("GPU"))
    return xla == "all"


def make(config, observation_space: gym.spaces.Box, num_actions: int) -> ActorCritic:
    """The network of an `ImpalaConfig` for an env's observation space and actions."""
    return ActorCritic(
        observation_space, num_actions, torso=config.network, use_lstm=config.use_lstm, lstm_size=config.lstm_size
    )
