"""IMPALA's actor-critic networks in Sonnet 2 (IMPALA §5 and Fig. 3).

Torsos:

* `shallow`: Mnih et al. 2016's network: conv 16 8x8/4, conv 32 4x4/2, FC 256.
* `deep`: 3 residual sections of [16, 32, 32] channels, each conv 3x3, max-pool
  3x3/2 and 2 residual blocks (ReLU, conv 3x3, ReLU, conv 3x3, skip); FC 256.
* `deep_x4`: the deep torso with 4x the channels (LASER §5.1).
* `minatar`: Young & Tian 2019's torso: conv 16 3x3/1, FC 128.
* `toy`: a 2-layer MLP of 64 units, for the Catch test env.

Then an optional LSTM, and linear heads for the policy logits and the
baseline V(x). `unroll` folds time into batch for the torso; the LSTM state is
reset to zeros at every step whose `first` flag marks an episode start.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import sonnet as snt
import tensorflow as tf


class AgentOutput(NamedTuple):
    policy_logits: tf.Tensor  # [..., A]
    baseline: tf.Tensor  # [...]


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


def shallow_torso() -> snt.Module:
    """Mnih et al. 2016 / IMPALA Fig. 3 left."""
    return snt.Sequential([
        snt.Conv2D(16, 8, stride=4, padding="VALID"), tf.nn.relu,
        snt.Conv2D(32, 4, stride=2, padding="VALID"), tf.nn.relu,
        snt.Flatten(), snt.Linear(256), tf.nn.relu,
    ])  # fmt: skip


def minatar_torso() -> snt.Module:
    """Young & Tian 2019's torso for MinAtar."""
    return snt.Sequential([
        snt.Conv2D(16, 3, stride=1, padding="VALID"), tf.nn.relu,
        snt.Flatten(), snt.Linear(128), tf.nn.relu,
    ])  # fmt: skip


def toy_torso() -> snt.Module:
    return snt.Sequential([snt.Flatten(), snt.Linear(64), tf.nn.relu, snt.Linear(64), tf.nn.relu])


TORSOS = {
    "shallow": shallow_torso,
    "deep": DeepTorso,
    "deep_x4": lambda: DeepTorso(channels=(64, 128, 128)),
    "minatar": minatar_torso,
    "toy": toy_torso,
}


class ActorCritic(snt.Module):
    """Torso, optional LSTM, policy and baseline heads.

    Observations arrive as the env gives them (uint8); `channels_first` moves a
    [C, H, W] frame stack to [H, W, C] and `scale` maps pixels to [0, 1].
    """

    def __init__(
        self,
        num_actions: int,
        torso: str,
        use_lstm: bool = False,
        lstm_size: int = 256,
        channels_first: bool = False,
        scale: float = 1.0,
        name: Optional[str] = None,
    ):
        super().__init__(name=name)
        self._torso = TORSOS[torso]()
        self._core = snt.LSTM(lstm_size) if use_lstm else None
        self._policy = snt.Linear(num_actions, name="policy")
        self._baseline = snt.Linear(1, name="baseline")
        self._channels_first, self._scale = channels_first, scale
        self.num_actions = num_actions
        self.recurrent = use_lstm

    def initial_state(self, batch_size: int):
        """The recurrent state for `batch_size` envs; () without an LSTM."""
        return self._core.initial_state(batch_size) if self._core is not None else ()

    def _embed(self, observation: tf.Tensor) -> tf.Tensor:
        x = tf.cast(observation, tf.float32) * self._scale
        if self._channels_first:
            x = tf.transpose(x, [0, 2, 3, 1])
        return self._torso(x)

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


def xla_compiles_network(xla: str) -> bool:
    """Whether the network runs under XLA for the config's `xla` mode."""
    if xla == "auto":
        return bool(tf.config.list_physical_devices("GPU"))
    return xla == "all"


def make(config, num_actions: int) -> ActorCritic:
    """The network for an `ImpalaConfig`, with the observation handling of its env."""
    family = config.env.split(":")[0]
    return ActorCritic(
        num_actions,
        torso=config.network,
        use_lstm=config.use_lstm,
        lstm_size=config.lstm_size,
        channels_first=family == "atari",
        scale=1.0 / 255.0 if family in ("atari", "dmlab") else 1.0,
    )
