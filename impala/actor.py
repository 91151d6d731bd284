"""IMPALA's actor (§3, Fig. 1): act with the latest parameters, send unrolls.

At the start of each unroll the actor takes the learner's newest parameters
from Reverb, then steps its N envs T times with one batched forward pass per
step, sampling actions from mu = softmax(logits). It never waits for the
learner except through the queue's back-pressure when the queue is full.
With a spec that has `policy_version`, each step records the version the
learner published with the parameters (0 for parameters published without one).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import reverb
import tensorflow as tf

from common.reverb import variables as reverb_variables
from common.reverb.tables import PARAMS
from impala.networks import ActorCritic
from impala.trajectories import QUEUE_ONLY, unroll_adder


class Actor:
    def __init__(
        self,
        network: ActorCritic,
        spec,
        env,
        client: reverb.Client,
        unroll_length: int,
        seed: int,
        jit: bool,
        tables: Mapping[str, float] = QUEUE_ONLY,
        params_table: str = PARAMS,
        episode_tables: Mapping[str, float] | None = None,
        max_episode_length: int = 0,
        tasks: Sequence[int] | None = None,
    ):
        """`tasks`: each env's task index in a multi-task suite, written as the steps' `task`."""
        self._network, self._env, self._client = network, env, client
        self._tasks = {} if tasks is None else {"task": np.asarray(tasks, np.int32)}
        self._params_table = params_table
        self._length = unroll_length
        self._writer = unroll_adder(
            client, spec, env.num_envs, unroll_length, tables, episode_tables, max_episode_length
        )  # fmt: skip
        self._seed = seed
        self._versioned = "policy_version" in spec
        self._policy = tf.function(self._policy_step, jit_compile=jit)

    def _policy_step(self, observation, first, state, seed):
        output, next_state = self._network.step(observation, first, state)
        action = tf.random.stateless_categorical(output.policy_logits, 1, seed)[:, 0]
        return tf.cast(action, tf.int32), output.policy_logits, next_state

    def run(self, num_unrolls: int | None = None) -> None:
        """Acts forever, or for `num_unrolls` unrolls."""
        n = self._env.num_envs
        observation, _ = self._env.reset()
        first = np.ones(n, bool)
        state = self._network.initial_state(n)
        episode_return, episode_length = np.zeros(n, np.float32), np.zeros(n, np.int32)
        variables = self._network.trainable_variables
        versions = {}
        t = 0
        while num_unrolls is None or t < num_unrolls * self._length + 1:
            if t % self._length == 0:
                versions = self._fetch(variables)
            action, logits, next_state = self._policy(observation, first, state, tf.constant([self._seed, t]))
            action = action.numpy()
            next_observation, reward, terminated, truncated, info = self._env.step(action)
            episode_return += reward
            episode_length += 1
            game_over = info["game_over"]
            self._writer.append({
                "observation": observation,
                "first": first,
                "action": action,
                "behaviour_logits": logits.numpy(),
                "reward": reward,
                # A time-limit truncation is treated as terminal: the next
                # observation already belongs to the next episode (autoreset),
                # so there is no state to bootstrap from.
                "terminal": terminated | truncated,
                "episode_return": np.where(game_over, episode_return, np.nan).astype(np.float32),
                "episode_length": np.where(game_over, episode_length, 0).astype(np.int32),
                **({"core_state": tf.nest.map_structure(np.asarray, state)} if self._network.recurrent else {}),
                **self._tasks,
                **versions,
            }, starts=first)  # fmt: skip
            episode_return[game_over], episode_length[game_over] = 0.0, 0
            observation, first, state = next_observation, terminated | truncated, next_state
            t += 1

    def _fetch(self, variables) -> dict[str, np.ndarray]:
        """Assigns the newest parameters; returns the steps' `policy_version` field ({} if the spec has none)."""
        values = reverb_variables.fetch(self._client, self._params_table)
        reverb_variables.assign(variables, values[: len(variables)])
        if not self._versioned:
            return {}
        version = values[len(variables)] if len(values) > len(variables) else 0
        return {"policy_version": np.full(self._env.num_envs, version, np.int64)}

    def close(self) -> None:
        self._writer.close()
