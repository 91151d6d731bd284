"""A batch of single gymnasium envs with the batched interface of `AtariBatchEnv`.

Families without a native vector env (MinAtar, DMLab, the toy env) are stepped
one after another in the actor's process. The interface is the one actors use:
same-step autoreset, and `info` with `life_lost` and `game_over` ([N] bool).
"""

from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np


class SerialBatchEnv:
    """N envs, env i from `make_env(i, seed + i)`."""

    def __init__(self, make_env: Callable[[int, int], gym.Env], num_envs: int, seed: int):
        self._seed = seed
        self._envs = [make_env(i, seed + i) for i in range(num_envs)]
        self.num_envs = num_envs
        self.num_actions = int(self._envs[0].action_space.n)
        self.observation_shape = tuple(self._envs[0].observation_space.shape)

    def reset(self, seed: int | None = None):
        seed = self._seed if seed is None else seed
        observations = [env.reset(seed=seed + i)[0] for i, env in enumerate(self._envs)]
        false = np.zeros(self.num_envs, bool)
        return np.stack(observations), {"life_lost": false, "game_over": false.copy()}

    def step(self, actions: np.ndarray):
        observations, rewards, terminated, truncated, life_lost = [], [], [], [], []
        for env, action in zip(self._envs, actions):
            observation, reward, term, trunc, info = env.step(int(action))
            if term or trunc:
                observation, _ = env.reset()
            observations.append(observation)
            rewards.append(reward)
            terminated.append(term)
            truncated.append(trunc)
            life_lost.append(info.get("life_lost", False))
        terminated, truncated = np.array(terminated), np.array(truncated)
        info = {"life_lost": np.array(life_lost), "game_over": terminated | truncated}
        return np.stack(observations), np.array(rewards, np.float32), terminated, truncated, info

    def close(self) -> None:
        for env in self._envs:
            env.close()
