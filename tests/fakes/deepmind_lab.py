"""A fake `deepmind_lab`: just enough of `deepmind_lab.Lab` to drive `common.envs.dmlab`.

DeepMind Lab is not on PyPI, so the DMLab adapter and multi-task runs are
tested against this module. It is a file, not an in-memory stub, so actor
processes started by `impala.train` import it too (the `fake_lab` fixture puts
its folder on PYTHONPATH). Every level pays `reward(level)` per action and
ends after `EPISODE_FRAMES` frames, so an episode's return names its level.
"""

from __future__ import annotations

import numpy as np

EPISODE_FRAMES = 12  # Three agent steps at action repeat 4.


def reward(level: str) -> float:
    """The reward per action on `level` (e.g. "contributed/dmlab30/rooms_watermaze"): 1 to 7, by level."""
    return float(sum(map(ord, level)) % 7 + 1)


class Lab:
    created: list[Lab] = []

    def __init__(self, level: str, observations: list[str], config: dict[str, str]):
        self.level, self.config, self.steps = level, config, 0
        self._shape = (int(config["height"]), int(config["width"]), 3)
        Lab.created.append(self)

    def reset(self, seed: int) -> None:
        self.seed, self.steps = seed, 0

    def step(self, action: np.ndarray, num_steps: int) -> float:
        self.last_action, self.steps = action, self.steps + num_steps
        return reward(self.level)

    def is_running(self) -> bool:
        return self.steps < EPISODE_FRAMES

    def observations(self) -> dict[str, np.ndarray]:
        return {"RGB_INTERLEAVED": np.full(self._shape, self.steps, np.uint8)}

    def close(self) -> None:
        pass
