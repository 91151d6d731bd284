"""MinAtar (Young & Tian 2019): the small-compute testbed for our reduced runs.

Defaults are the MinAtar paper's: `minatar.Environment` defaults of sticky
actions 0.1 and difficulty ramping on, and all 6 actions. Observations are
`[10, 10, channels]` uint8 in {0, 1}.
"""

from __future__ import annotations

import dataclasses
import importlib

import gymnasium as gym
import numpy as np

from common.errors import UsageError, choice_error

GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


@dataclasses.dataclass(frozen=True)
class MinAtarOptions:
    sticky_action_prob: float = 0.1  # Young & Tian 2019, `minatar` default.
    difficulty_ramping: bool = True  # Young & Tian 2019, `minatar` default.
    minimal_action_set: bool = False  # The paper uses all 6 actions.
    max_episode_steps: int = 0  # 0 = no cap, as in the paper.

    def __post_init__(self):
        if not 0.0 <= self.sticky_action_prob <= 1.0:
            raise UsageError(f"minatar option sticky_action_prob={self.sticky_action_prob!r}: must be in [0, 1]")
        if not isinstance(self.max_episode_steps, int) or self.max_episode_steps < 0:
            raise UsageError(
                f"minatar option max_episode_steps={self.max_episode_steps!r}: " "must be an integer >= 0 (0 = no cap)"
            )


def _import_minatar_display() -> None:
    """Imports what `minatar` imports for its display, before `minatar` does.

    `minatar.environment` imports matplotlib and seaborn under a bare
    `except:`, so a Ctrl-C in those seconds of importing was swallowed and the
    run trained on (to its end, on a small budget). Imported here first, a
    Ctrl-C raises as anywhere else, and minatar then finds them loaded.
    """
    for name in ("matplotlib.pyplot", "matplotlib.colors", "seaborn"):
        try:
            importlib.import_module(name)
        except Exception:  # minatar runs without its display, as it does itself (a Ctrl-C is no Exception).
            pass


class MinAtarEnv(gym.Env):
    """One MinAtar game as a gymnasium `Env`."""

    metadata = {"render_modes": []}

    def __init__(self, game: str, seed: int, options: MinAtarOptions):
        if game not in GAMES:
            raise choice_error("minatar game", game, GAMES)
        self.options = options
        _import_minatar_display()
        # Imported here, not with the module: minatar imports seaborn for its
        # display (seconds), which a bad flag or another env family never needs.
        import minatar

        self._env = minatar.Environment(
            game,
            sticky_action_prob=options.sticky_action_prob,
            difficulty_ramping=options.difficulty_ramping,
        )
        self._env.seed(seed)
        self._actions = (
            list(self._env.minimal_action_set()) if options.minimal_action_set else list(range(self._env.num_actions()))
        )
        self._steps = 0
        self.action_space = gym.spaces.Discrete(len(self._actions))
        self.observation_space = gym.spaces.Box(0, 1, self._env.state_shape(), np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._env.seed(seed)
        self._env.reset()
        self._steps = 0
        return self._observation(), {}

    def step(self, action: int):
        reward, terminated = self._env.act(self._actions[action])
        self._steps += 1
        cap = self.options.max_episode_steps
        truncated = bool(cap) and self._steps >= cap and not terminated
        return self._observation(), float(reward), bool(terminated), truncated, {}

    def _observation(self) -> np.ndarray:
        return self._env.state().astype(np.uint8)
