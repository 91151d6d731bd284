"""Atari 2600 through ale-py, with the papers' evaluation protocol as presets.

Both forms run on ale-py's C++ `AtariVectorEnv`, which does the DQN
preprocessing (frame skip, max-pool over the last two frames, resize, grayscale,
frame stack) in threads:

* `AtariBatchEnv` drives N games at once for the actors;
* `AtariEnv` is a gymnasium `Env` over one game, for evaluation.

Sub-game i of a batched env seeded with s is the same game as a single env
seeded with s + i, so for the same actions they yield identical observations
and rewards (tested). Sharing one preprocessing engine is deliberate: a second
Python resize would differ in the last bit from ale-py's and break that.

Protocol (IMPALA App. G, PER App. B.2, Mnih et al. 2015), all knobs in
`AtariOptions`:

* **No-op starts.** ale-py draws a uniform number of no-op *emulator frames*
  from {0, ..., noop_max - 1} at each reset. We ask it for `noop_max + 1`, so
  the default gives 0-30 frames: the papers' "up to 30" upper bound, with 0 as
  one extra outcome (probability 1/31) that ale-py offers no way to exclude.
* **Life loss.** Given as `info["life_lost"]` always, and folded into
  `terminated` only when `terminal_on_life_loss` is set (training presets). The
  game itself continues, as in DQN; `info["game_over"]` marks the true end.
* **Episode cap.** `max_episode_frames` emulator frames (108K = 30 minutes),
  reported as `truncated`, never as `terminated`.
* **Rewards** are returned raw. Learners clip.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
from ale_py.vector_env import AtariVectorEnv

from common.errors import UsageError, choice_error

# The Atari-57 benchmark (Badia et al. 2020's list, as used by IMPALA and LASER),
# named as ale-py names its ROMs. `surround` has no gymnasium v4 id; ale-py's
# vector env loads it straight from the ROM like every other game here.
ATARI57 = (
    "alien", "amidar", "assault", "asterix", "asteroids", "atlantis",
    "bank_heist", "battle_zone", "beam_rider", "berzerk", "bowling", "boxing",
    "breakout", "centipede", "chopper_command", "crazy_climber", "defender",
    "demon_attack", "double_dunk", "enduro", "fishing_derby", "freeway",
    "frostbite", "gopher", "gravitar", "hero", "ice_hockey", "jamesbond",
    "kangaroo", "krull", "kung_fu_master", "montezuma_revenge", "ms_pacman",
    "name_this_game", "phoenix", "pitfall", "pong", "private_eye", "qbert",
    "riverraid", "road_runner", "robotank", "seaquest", "skiing", "solaris",
    "space_invaders", "star_gunner", "surround", "tennis", "time_pilot",
    "tutankham", "up_n_down", "venture", "video_pinball", "wizard_of_wor",
    "yars_revenge", "zaxxon",
)  # fmt: skip


_C_INT_MAX = 2**31 - 1  # ale-py's vector env takes its counts as C ints.
# Each integer option's accepted range. The shapes' bounds keep an observation within memory (a screen_size
# of 10^5 asked for 298 GiB); noop_max is passed on plus one.
_INTEGER_RANGES = {
    "frame_skip": (1, _C_INT_MAX), "screen_size": (1, 1024), "frame_stack": (1, 256),
    "max_episode_frames": (1, _C_INT_MAX), "noop_max": (0, _C_INT_MAX - 1), "num_threads": (0, 1024),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class AtariOptions:
    """Every protocol knob, defaulting to the papers' evaluation protocol."""

    frame_skip: int = 4  # Mnih et al. 2015; IMPALA App. G.
    max_pool: bool = True  # Max over the last two frames of each skip.
    screen_size: int = 84  # 84x84 (IMPALA App. G).
    grayscale: bool = True
    frame_stack: int = 4
    noop_max: int = 30  # Up to 30 no-op frames at reset (see module doc).
    max_episode_frames: int = 108_000  # 30 minutes of play at 60 Hz.
    full_action_space: bool = False  # Minimal action set by default.
    sticky_action_prob: float = 0.0  # Papers: none. Machado et al. 2018: 0.25.
    terminal_on_life_loss: bool = False  # Training presets only.
    fire_reset: bool = False  # Not in the papers; ale-py defaults it on.
    num_threads: int = 0  # Batched env worker threads; 0 = one per core.

    def __post_init__(self):
        for name, (low, high) in _INTEGER_RANGES.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise UsageError(f"atari option {name}={value!r}: must be an integer in [{low}, {high:,}]")
        if not 0.0 <= self.sticky_action_prob <= 1.0:
            raise UsageError(
                f"atari option sticky_action_prob={self.sticky_action_prob!r}: "
                "must be in [0, 1], e.g. 0.0 (papers) or 0.25 (Machado et al.)"
            )


def check_game(game: str) -> str:
    if game not in ATARI57:
        raise choice_error("atari game", game, ATARI57)
    return game


class AtariBatchEnv:
    """N Atari games stepped together, resetting each as it ends.

    `step` returns `(observation, reward, terminated, truncated, info)`, each
    with a leading [N] axis. When game i ends, `observation[i]` is already the
    first observation of its next episode (same-step autoreset), which is what
    an actor acts on next; the terminal observation itself is never needed
    because its value is discounted by zero.

    `info` holds `life_lost` and `game_over` ([N] bool) and `lives` ([N] int).
    """

    def __init__(self, game: str, num_envs: int, seed: int, options: AtariOptions):
        self.game = check_game(game)
        self.options = options
        self.num_envs = num_envs
        self._seed = seed
        self._env = AtariVectorEnv(
            game,
            num_envs,
            num_threads=options.num_threads,
            max_num_frames_per_episode=options.max_episode_frames,
            repeat_action_probability=options.sticky_action_prob,
            full_action_space=options.full_action_space,
            autoreset_mode="SameStep",
            img_height=options.screen_size,
            img_width=options.screen_size,
            grayscale=options.grayscale,
            stack_num=options.frame_stack,
            frameskip=options.frame_skip,
            maxpool=options.max_pool,
            noop_max=options.noop_max + 1,  # ale-py draws from [0, noop_max).
            episodic_life=False,
            life_loss_info=False,
            reward_clipping=False,
            use_fire_reset=options.fire_reset,
        )
        self.num_actions = int(self._env.single_action_space.n)
        self.observation_shape = tuple(self._env.single_observation_space.shape)
        self._lives = np.zeros(num_envs, np.int32)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Resets every game; game i is seeded with `seed + i` (default: the constructor's)."""
        observation, info = self._env.reset(seed=self._seed if seed is None else seed)
        self._lives = info["lives"].copy()
        return observation, self._info(info, np.zeros(self.num_envs, bool), np.zeros(self.num_envs, bool))

    def step(self, actions: np.ndarray):
        observation, reward, terminated, truncated, info = self._env.step(np.asarray(actions, dtype=np.int32))
        game_over = terminated | truncated
        # After a same-step reset `lives` is the new game's count, so a life is
        # lost only where the game goes on with fewer lives than before.
        life_lost = ~game_over & (info["lives"] < self._lives)
        self._lives = info["lives"].copy()
        if self.options.terminal_on_life_loss:
            terminated = terminated | life_lost
        return (
            observation,
            reward.astype(np.float32),
            terminated,
            truncated,
            self._info(info, life_lost, game_over),
        )

    @staticmethod
    def _info(info, life_lost: np.ndarray, game_over: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "lives": info["lives"],
            "life_lost": life_lost,
            "game_over": game_over,
            "episode_frame_number": info["episode_frame_number"],
        }

    def close(self) -> None:
        self._env.close()


class AtariEnv(gym.Env):
    """One Atari game as a gymnasium `Env`: the evaluation form.

    Observations are uint8 `[frame_stack, screen_size, screen_size]`. Call
    `reset` after `terminated or truncated`, as with any gymnasium env.
    """

    metadata = {"render_modes": []}

    def __init__(self, game: str, seed: int, options: AtariOptions):
        self._batch = AtariBatchEnv(game, 1, seed, options)
        self._last: tuple[np.ndarray, dict[str, Any]] | None = None
        self.game = game
        self.options = options
        self.action_space = gym.spaces.Discrete(self._batch.num_actions)
        self.observation_space = gym.spaces.Box(0, 255, self._batch.observation_shape, np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self._last is None or seed is not None:
            observation, info = self._batch.reset(seed)
            self._last = observation[0], _unbatch(info)
        # Otherwise the game goes on from where the last step left it: after a
        # game over that is already the next game's first observation
        # (same-step autoreset); after a life-loss terminal, the same game.
        return self._last

    def step(self, action: int):
        observation, reward, terminated, truncated, info = self._batch.step(np.array([action]))
        info = _unbatch(info)
        self._last = observation[0], info
        return observation[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), info

    def close(self) -> None:
        self._batch.close()


def _unbatch(info: dict[str, np.ndarray]) -> dict[str, Any]:
    return {key: value[0].item() for key, value in info.items()}
