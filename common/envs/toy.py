"""A tiny, fast env for tests: Catch (as in bsuite, Osband et al. 2020).

A ball starts in a random column of the top row and falls one row per step; the
agent moves a paddle along the bottom row (left, stay, right). When the ball
reaches the bottom the episode ends with +1 if caught and -1 if missed. An
optimal policy scores +1 every episode; a random one about -0.6. Episodes last
`rows - 1` steps, so a learner sees thousands of them in seconds.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from common.errors import UsageError, choice_error

GAMES = ("catch",)


@dataclasses.dataclass(frozen=True)
class ToyOptions:
    rows: int = 10
    columns: int = 5

    def __post_init__(self):
        # At most 1,000 each: an observation is rows x columns bytes, and 10^20 columns asked numpy for more.
        if not (2 <= self.rows <= 1000 and 1 <= self.columns <= 1000):
            raise UsageError(
                f"toy options rows={self.rows}, columns={self.columns}: need 2 <= rows <= 1000, 1 <= columns <= 1000"
            )


class CatchEnv(gym.Env):
    """Observations are `[rows, columns, 1]` uint8: the ball and paddle set to 1."""

    metadata = {"render_modes": []}

    def __init__(self, game: str, seed: int, options: ToyOptions):
        if game not in GAMES:
            raise choice_error("toy game", game, GAMES)
        self.options = options
        self._rng = np.random.default_rng(seed)
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.spaces.Box(0, 1, (options.rows, options.columns, 1), np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._ball_row = 0
        self._ball_column = int(self._rng.integers(self.options.columns))
        self._paddle = self.options.columns // 2
        return self._observation(), {}

    def step(self, action: int):
        self._paddle = int(np.clip(self._paddle + action - 1, 0, self.options.columns - 1))
        self._ball_row += 1
        terminated = self._ball_row == self.options.rows - 1
        reward = 0.0
        if terminated:
            reward = 1.0 if self._paddle == self._ball_column else -1.0
        return self._observation(), reward, terminated, False, {}

    def _observation(self) -> np.ndarray:
        board = np.zeros(self.observation_space.shape, np.uint8)
        board[self._ball_row, self._ball_column, 0] = 1
        board[-1, self._paddle, 0] = 1
        return board
