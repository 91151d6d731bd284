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

`ApexActor` is the loop of an actor process (Ape-X style, Horgan et al.
2018): the `Actor` with the learner's newest parameters, writing into the
replay and reporting finished games to the learner through Reverb.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import reverb
import tensorflow as tf

from common.reverb import variables as reverb_variables
from per.networks import QNetwork, greedy_actions
from per.replay import PrioritizedReplay


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
        spec = tf.TensorSpec([None, *self._observation.shape[1:]], self._observation.dtype)
        self._greedy = tf.function(lambda observation: greedy_actions(network, observation)).get_concrete_function(spec)
        self._return = np.zeros(env.num_envs, np.float64)
        self._length = np.zeros(env.num_envs, np.int64)

    network = property(lambda self: self._network)  # Q(., .; theta), whose variables the policy reads.
    observation = property(lambda self: self._observation)  # [N, ...] S_t, which the next `step` acts in.

    def actions(self, observation: np.ndarray, epsilon: float, greedy: np.ndarray | None = None) -> np.ndarray:
        """Epsilon-greedy actions; `greedy`, if given, is argmax_a Q(observation, a; theta), already computed."""
        n = len(observation)
        explore = self._rng.random(n) < epsilon
        uniform = self._rng.integers(self._network.num_actions, size=n, dtype=np.int32)
        if explore.all():  # The network is not needed (most steps early in training).
            return uniform
        if greedy is None:
            greedy = self._greedy(tf.convert_to_tensor(observation)).numpy()
        return np.where(explore, uniform, greedy)

    def step(
        self, epsilon: float, greedy: np.ndarray | None = None
    ) -> tuple[list[Transition], list[tuple[float, int]]]:
        """One step of every env: its N transitions, and (return, length) of games that ended.

        `greedy`: argmax_a Q(S_t, a; theta) of `observation`, if the caller already has it
        (`per.learner.Learner.update`'s `act_on`), under the theta this step would read.
        """
        observation = self._observation
        action = self.actions(observation, epsilon, greedy)
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


def store(replay: PrioritizedReplay, transitions: list[Transition]) -> None:
    """One `Actor.step`'s transitions into `replay`, env i's into stream i (its frames are written once)."""
    for stream, transition in enumerate(transitions):
        replay.add_transition(transition, stream)


class Broadcast(NamedTuple):
    """What the learner publishes for its actors beside the online network's weights."""

    max_priority: float  # Algorithm 1, line 6: new transitions enter at max_i p_i.
    epsilon: float  # Training epsilon at the learner's count of agent steps.


def publish(client: reverb.Client, network: QNetwork, broadcast: Broadcast) -> None:
    """The learner's side: theta and the broadcast, as the newest parameters."""
    reverb_variables.publish(client, network.trainable_variables, extras=[np.array(broadcast, np.float64)])


def fetch(client: reverb.Client, network: QNetwork) -> Broadcast:
    """An actor's side: copies the newest theta into `network`; what came with it."""
    *values, extras = reverb_variables.fetch(client)
    reverb_variables.assign(network.trainable_variables, values)
    return Broadcast(*extras.tolist())


def read_episodes(client: reverb.Client, table: str, count: int) -> list[tuple[float, int]]:
    """Takes the `count` oldest (return, length) from the `table` queue that `ApexActor`s write."""
    episodes = []
    for sample in client.sample(table, num_samples=count, emit_timesteps=False):
        episode_return, length = sample.data[0][0]  # The item's one column, of one step.
        episodes.append((float(episode_return), int(length)))
    return episodes


class ApexActor:
    """An actor process: acts with the learner's newest parameters, stores transitions, reports games.

    Every `params_period` of its agent steps it copies the learner's newest
    publication (`fetch`): theta, the running maximum priority its new
    transitions then enter at (Algorithm 1, line 6; rank-based replay stores
    rank 1's priority and needs none), and epsilon, held until the next copy.
    Transitions go to the replay through `replay` (a writer that is not the
    table's only one); each finished game's (return, length) becomes an item
    of the `episodes_table` queue, which the learner drains (`read_episodes`).
    """

    def __init__(
        self, actor: Actor, replay: PrioritizedReplay, client: reverb.Client, episodes_table: str, params_period: int
    ):
        self._actor, self._replay, self._client = actor, replay, client
        self._episodes_table, self._params_period = episodes_table, params_period
        # A queue item per game, sent as it is created: nothing waits for a flush.
        self._episodes = client.trajectory_writer(num_keep_alive_refs=1)
        self.steps = 0  # Agent steps of this actor.
        self.broadcast: Broadcast | None = None

    def run(self, num_steps: int | None = None) -> None:
        """Acts until the process ends, or for at least `num_steps` agent steps."""
        since_copy = self._params_period  # Copy before the first step.
        while num_steps is None or self.steps < num_steps:
            if since_copy >= self._params_period:
                self.broadcast = fetch(self._client, self._actor.network)
                self._replay.max_priority = self.broadcast.max_priority
                since_copy = 0
            transitions, ended = self._actor.step(self.broadcast.epsilon)
            store(self._replay, transitions)
            for episode in ended:
                self._episodes.append([np.array(episode, np.float64)])
                self._episodes.create_item(self._episodes_table, 1.0, [self._episodes.history[0][-1:]])
            self.steps += len(transitions)
            since_copy += len(transitions)

    def close(self) -> None:
        self._replay.close()
        self._episodes.close()


class EpsilonGreedy:
    """Evaluation acting (PER App. B.2.3): greedy in the online network's Q-values, uniform with probability epsilon."""

    def __init__(self, network: QNetwork, epsilon: float, seed: int):
        self._greedy = tf.function(lambda x: greedy_actions(network, x))
        self.epsilon, self._num_actions = epsilon, network.num_actions  # Reported with the evaluation.
        self._rng = np.random.default_rng(seed)

    def reset(self, num_envs: int) -> None:
        """Epsilon-greedy has no state to reset."""

    def __call__(self, observations: np.ndarray, first: np.ndarray) -> np.ndarray:
        explore = self._rng.random(len(observations)) < self.epsilon
        uniform = self._rng.integers(self._num_actions, size=len(observations))
        return np.where(explore, uniform, self._greedy(observations).numpy())
