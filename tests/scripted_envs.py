"""A batched env that plays a fixed script of ends, for the actors' tests."""

import numpy as np

# Step k (from 1): (terminated, truncated, game_over), as Atari with `terminal_on_life_loss` gives them:
# a life lost at step 2 (a training terminal, the game goes on), the game over at step 4, and the next
# game cut by the time limit at step 7.
LIVES_THEN_TIME_LIMIT = {2: (True, False, False), 4: (True, False, True), 7: (False, True, True)}


class ScriptedBatchEnv:
    """One env with the batched interface (`common.envs.batch`): reward 1 a step, observations of
    `shape` filled with k % 2 after step k, ends as `script` says."""

    num_envs = 1

    def __init__(self, shape: tuple[int, ...], num_actions: int, script=LIVES_THEN_TIME_LIMIT):
        self.observation_shape, self.num_actions, self._script = shape, num_actions, script
        self._steps = 0

    def reset(self, seed=None):
        false = np.zeros(1, bool)
        return np.zeros((1, *self.observation_shape), np.uint8), {"life_lost": false, "game_over": false.copy()}

    def step(self, actions: np.ndarray):
        self._steps += 1
        terminated, truncated, game_over = self._script.get(self._steps, (False, False, False))
        observation = np.full((1, *self.observation_shape), self._steps % 2, np.uint8)
        info = {"life_lost": np.array([terminated and not game_over]), "game_over": np.array([game_over])}
        return observation, np.ones(1, np.float32), np.array([terminated]), np.array([truncated]), info

    def close(self) -> None:
        pass
