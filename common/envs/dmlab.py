"""DeepMind Lab's DMLab-30 levels (IMPALA §5.3, App. D).

`deepmind_lab` is not on PyPI; it is built with bazel from google-deepmind/lab.
It is imported only when a DMLab env is made, and its absence is a one-line
error saying how to build it. The rest of the project never needs it.

Two levels train on one variant and are scored on another (IMPALA App. B):
`rooms_collect_good_objects_train` and `rooms_exploit_deferred_effects_train`
train; their `_test` twins are the levels scored against human.

`dmlab:dmlab30` names the suite of all 30 training levels, for one agent
trained on all of them (IMPALA §5.3; `common.envs.tasks`).

The action set is the 9 composite actions of IMPALA's public release
(scalable_agent): forward, backward, strafe left/right, look left/right,
forward+look left/right and fire, each repeated `action_repeat` frames.
"""

from __future__ import annotations

import dataclasses
import importlib

import gymnasium as gym
import numpy as np

from common.errors import UsageError, choice_error

TRAIN_TO_TEST = {
    "rooms_collect_good_objects_train": "rooms_collect_good_objects_test",
    "rooms_exploit_deferred_effects_train": "rooms_exploit_deferred_effects_test",
}

_SAME_FOR_TRAIN_AND_TEST = (
    "rooms_select_nonmatching_object", "rooms_watermaze", "rooms_keys_doors_puzzle",
    "language_select_described_object", "language_select_located_object",
    "language_execute_random_task", "language_answer_quantitative_question",
    "lasertag_one_opponent_small", "lasertag_three_opponents_small",
    "lasertag_one_opponent_large", "lasertag_three_opponents_large",
    "natlab_fixed_large_map", "natlab_varying_map_regrowth",
    "natlab_varying_map_randomized", "skymaze_irreversible_path_hard",
    "skymaze_irreversible_path_varied", "psychlab_arbitrary_visuomotor_mapping",
    "psychlab_continuous_recognition", "psychlab_sequential_comparison",
    "psychlab_visual_search", "explore_object_locations_small",
    "explore_object_locations_large", "explore_obstructed_goals_small",
    "explore_obstructed_goals_large", "explore_goal_locations_small",
    "explore_goal_locations_large", "explore_object_rewards_few",
    "explore_object_rewards_many",
)  # fmt: skip

# The 30 training levels, and every name a user may ask for (train or test).
DMLAB30 = tuple(TRAIN_TO_TEST) + _SAME_FOR_TRAIN_AND_TEST
LEVELS = DMLAB30 + tuple(TRAIN_TO_TEST.values())
# Multi-task suites: one agent trains on all their levels at once (IMPALA §5.3).
SUITES = {"dmlab30": DMLAB30}

# (look left/right, look down/up, strafe left/right, back/forward, fire, jump, crouch)
ACTION_SET = (
    (0, 0, 0, 1, 0, 0, 0),  # Forward.
    (0, 0, 0, -1, 0, 0, 0),  # Backward.
    (0, 0, -1, 0, 0, 0, 0),  # Strafe left.
    (0, 0, 1, 0, 0, 0, 0),  # Strafe right.
    (-20, 0, 0, 0, 0, 0, 0),  # Look left.
    (20, 0, 0, 0, 0, 0, 0),  # Look right.
    (-20, 0, 0, 1, 0, 0, 0),  # Forward + look left.
    (20, 0, 0, 1, 0, 0, 0),  # Forward + look right.
    (0, 0, 0, 0, 1, 0, 0),  # Fire.
)

BUILD_HINT = (
    "DeepMind Lab is not installed (no module 'deepmind_lab'): it is not on PyPI; "
    "build it with bazel from github.com/google-deepmind/lab "
    "(bazel build -c opt //python/pip_package:build_pip_package) and pip install "
    "the wheel into .venv; see README, section DMLab"
)


def score_level(level: str) -> str:
    """The level whose human and random scores `level`'s returns are compared with."""
    return TRAIN_TO_TEST.get(level, level)


@dataclasses.dataclass(frozen=True)
class DmLabOptions:
    width: int = 96  # IMPALA App. D: 96x72 RGB.
    height: int = 72
    action_repeat: int = 4  # IMPALA App. D.
    dataset_path: str = ""  # Needed by the language and psychlab levels.

    def __post_init__(self):
        for name in ("width", "height", "action_repeat"):
            if getattr(self, name) < 1:
                raise UsageError(f"dmlab option {name}={getattr(self, name)!r}: must be >= 1")


def import_lab():
    """The `deepmind_lab` module, or a `UsageError` saying how to build it."""
    try:
        return importlib.import_module("deepmind_lab")
    except ImportError as error:
        raise UsageError(BUILD_HINT) from error


class DmLabEnv(gym.Env):
    """One DMLab-30 level. Observations are `[height, width, 3]` uint8."""

    metadata = {"render_modes": []}

    def __init__(self, level: str, seed: int, options: DmLabOptions):
        if level not in LEVELS:
            raise choice_error("dmlab level", level, LEVELS)
        lab = import_lab()
        config = {"width": str(options.width), "height": str(options.height), "logLevel": "WARN"}
        if options.dataset_path:
            config["datasetPath"] = options.dataset_path
        self._lab = lab.Lab(f"contributed/dmlab30/{level}", ["RGB_INTERLEAVED"], config=config)
        self._seed = seed
        self._options = options
        self._actions = [np.array(a, dtype=np.intc) for a in ACTION_SET]
        self.level = level
        self.action_space = gym.spaces.Discrete(len(ACTION_SET))
        self.observation_space = gym.spaces.Box(0, 255, (options.height, options.width, 3), np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._seed = seed
        self._lab.reset(seed=self._seed)
        self._seed += 1  # Each episode gets a fresh, reproducible layout.
        self._last_observation = self._observe()
        return self._last_observation, {}

    def step(self, action: int):
        reward = self._lab.step(self._actions[action], num_steps=self._options.action_repeat)
        # Levels end on their own fixed time limit. Like IMPALA's release we
        # report that as `terminated`: the agent sees the clock, so it is part
        # of the task rather than an outside truncation.
        terminated = not self._lab.is_running()
        if not terminated:  # A finished level has no observation to give.
            self._last_observation = self._observe()
        return self._last_observation, float(reward), terminated, False, {}

    def _observe(self) -> np.ndarray:
        return np.asarray(self._lab.observations()["RGB_INTERLEAVED"], np.uint8)

    def close(self) -> None:
        self._lab.close()
