"""The Atari protocol knobs, every Atari-57 game, and agreement with gymnasium's own preprocessing."""

import sys
import types

import ale_py
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from common import envs
from common.envs import atari


def _random_actions(num_actions: int, steps: int, num_envs: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(num_actions, size=(steps, num_envs))


def test_noop_starts_draw_0_to_30_frames():
    # Each game is cut after 60 frames, so the same-step resets (the path
    # training takes) draw hundreds of no-op starts cheaply; seeded resets
    # reload the ROM and cost far more.
    batch = envs.make_batched("atari:pong", 8, seed=0, max_episode_frames=60)
    draws = [batch.reset()[1]["episode_frame_number"]]
    for _ in range(800):
        _, _, terminated, truncated, info = batch.step(np.zeros(8, np.int32))
        draws.append(info["episode_frame_number"][terminated | truncated])
    frames = np.concatenate(draws)
    assert len(frames) > 400
    assert frames.min() == 0 and frames.max() == 30
    assert len(np.unique(frames)) == 31  # Every count 0..30 occurs.


def test_noop_max_zero_starts_every_game_identically():
    batch = envs.make_batched("atari:pong", 8, seed=0, noop_max=0)
    observation, info = batch.reset()
    assert (info["episode_frame_number"] == 0).all()
    assert (observation == observation[:1]).all()


def test_max_pool_takes_the_brighter_of_the_last_two_frames():
    # Space Invaders draws sprites on alternate frames, so pooling shows more.
    actions = _random_actions(6, 60, 2)
    pooled = envs.make_batched("atari:space_invaders", 2, seed=3, noop_max=0)
    plain = envs.make_batched("atari:space_invaders", 2, seed=3, noop_max=0, max_pool=False)
    pooled.reset(), plain.reset()
    brighter = 0
    for a in actions:
        with_pool, without = pooled.step(a)[0], plain.step(a)[0]
        # Resize and grayscale are monotone, so max(a, b) >= b pixel-wise.
        assert (with_pool >= without).all()
        brighter += int((with_pool > without).sum())
    assert brighter > 0


def test_episode_cap_is_in_frames_and_is_a_truncation():
    batch = envs.make_batched("atari:pong", 1, seed=0, max_episode_frames=400, noop_max=0)
    batch.reset()
    steps, truncated = 0, np.array([False])
    while not truncated[0] and steps < 200:
        _, _, terminated, truncated, info = batch.step(np.array([0]))
        steps += 1
    assert steps == 100  # 400 frames at frame skip 4.
    assert not terminated[0] and info["game_over"][0]


@pytest.mark.parametrize("terminal_on_life_loss", [True, False])
def test_life_loss_is_a_terminal_only_when_asked(terminal_on_life_loss):
    batch = envs.make_batched("atari:breakout", 1, seed=0, terminal_on_life_loss=terminal_on_life_loss)
    _, info = batch.reset()
    lives = [int(info["lives"][0])]
    events = []
    for _ in range(400):  # FIRE and stand still: the ball is missed every life.
        _, _, terminated, _, info = batch.step(np.array([1]))
        if info["life_lost"][0] or info["game_over"][0]:
            events.append((bool(terminated[0]), bool(info["life_lost"][0]), int(info["lives"][0])))
        lives.append(int(info["lives"][0]))
    life_losses = [e for e in events if e[1]]
    assert len(life_losses) >= 2
    # The game goes on after a life loss: the count falls by one each time.
    remaining = [e[2] for e in life_losses][: lives[0] - 1]  # Within the first game.
    assert remaining == list(range(lives[0] - 1, lives[0] - 1 - len(remaining), -1))
    assert all(e[0] == terminal_on_life_loss for e in life_losses)


def test_evaluation_env_does_not_end_on_life_loss():
    env = envs.make("atari:breakout", seed=0)
    env.reset()
    lost, ended_early = 0, False
    for _ in range(400):
        _, _, terminated, _, info = env.step(1)
        lost += info["life_lost"]
        ended_early |= terminated and not info["game_over"]
    assert lost >= 2 and not ended_early


def test_sticky_actions_change_the_dynamics():
    actions = _random_actions(6, 300, 1)
    runs = []
    for prob in (0.0, 0.25):
        batch = envs.make_batched("atari:pong", 1, seed=0, sticky_action_prob=prob, noop_max=0)
        batch.reset()
        runs.append(np.stack([batch.step(a)[0] for a in actions]))
    assert not np.array_equal(*runs)


def test_minimal_action_set_by_default_full_18_on_request():
    assert envs.make("atari:pong").action_space.n == 6
    assert envs.make("atari:pong", full_action_space=True).action_space.n == 18


def test_rewards_are_not_clipped():
    batch = envs.make_batched("atari:space_invaders", 4, seed=0)
    batch.reset()
    rewards = np.concatenate([batch.step(a)[1] for a in _random_actions(6, 400, 4)])
    assert rewards.max() > 1.0  # Space Invaders pays 5-30 per alien.


def test_observations_are_stacked_84x84_grayscale():
    env = envs.make("atari:pong")
    observation, _ = env.reset()
    assert observation.shape == (4, 84, 84) and observation.dtype == np.uint8


@pytest.mark.parametrize(
    "options, shape",
    [({"frame_stack": 2}, (2, 84, 84)), ({"grayscale": False}, (4, 84, 84, 3)), ({"screen_size": 42}, (4, 42, 42))],
)
def test_the_observation_options_reach_the_emulator(options, shape):
    observation, _ = envs.make_batched("atari:pong", 1, seed=0, **options).reset()
    assert observation.shape == (1, *shape)


@pytest.mark.parametrize("game", atari.ATARI57)
def test_every_atari57_game_resets_and_steps(game):
    batch = envs.make_batched(f"atari:{game}", 2, seed=0)
    observation, _ = batch.reset()
    assert observation.shape == (2, 4, 84, 84)
    for a in _random_actions(batch.num_actions, 20, 2):
        observation, reward, terminated, truncated, _ = batch.step(a)
    assert observation.shape == (2, 4, 84, 84)
    assert reward.dtype == np.float32 and terminated.shape == truncated.shape == (2,)
    batch.close()


def test_sub_game_i_of_a_batch_seeded_s_replays_a_single_env_seeded_s_plus_i():
    num_envs, seed, steps = 3, 11, 250
    options = {"max_episode_frames": 600, "terminal_on_life_loss": True}  # Forces resets.
    batch = envs.make_batched("atari:breakout", num_envs, seed=seed, **options)
    singles = [envs.make("atari:breakout", seed=seed + i, **options) for i in range(num_envs)]
    batch_obs, _ = batch.reset()
    single_obs = [env.reset()[0] for env in singles]
    ends = 0
    for a in _random_actions(batch.num_actions, steps, num_envs, seed=5):
        assert all(np.array_equal(batch_obs[i], single_obs[i]) for i in range(num_envs))
        batch_obs, batch_reward, batch_term, batch_trunc, _ = batch.step(a)
        for i, env in enumerate(singles):
            obs, reward, term, trunc, _ = env.step(int(a[i]))
            assert reward == batch_reward[i] and term == batch_term[i] and trunc == batch_trunc[i]
            single_obs[i] = env.reset()[0] if term or trunc else obs
            ends += term or trunc
    assert ends >= num_envs  # The comparison crossed episode boundaries.


def _area_weights(source: int, target: int) -> np.ndarray:
    """[target, source] weights of an area-averaging resize (OpenCV's INTER_AREA)."""
    scale = source / target
    edges = np.arange(target + 1) * scale
    pixels = np.arange(source)
    overlap = np.minimum(edges[1:, None], pixels + 1) - np.maximum(edges[:-1, None], pixels)
    return np.clip(overlap, 0, None) / scale


def _area_resize(image: np.ndarray, size: tuple[int, int], interpolation: int = 3) -> np.ndarray:
    width, height = size
    resized = _area_weights(image.shape[0], height) @ image.astype(np.float64) @ _area_weights(image.shape[1], width).T
    return np.rint(resized).astype(np.uint8)


@pytest.fixture
def cv2_or_numpy(monkeypatch):
    """gymnasium's AtariPreprocessing resizes with OpenCV's INTER_AREA; the project
    does not depend on OpenCV, so without it a NumPy area average stands in."""
    try:
        import cv2  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "cv2", types.SimpleNamespace(resize=_area_resize, INTER_AREA=3))


@pytest.mark.parametrize(
    "game, gym_id, ends", [("breakout", "ALE/Breakout-v5", True), ("space_invaders", "ALE/SpaceInvaders-v5", False)]
)
def test_single_env_matches_gymnasiums_atari_preprocessing(cv2_or_numpy, game, gym_id, ends):
    # The reference: ale-py's own single-game env, with gymnasium's DQN wrappers
    # (frame skip 4 summing rewards, max-pool of the last two frames, 84x84
    # grayscale by area averaging, a stack of 4 that starts zero-padded).
    gym.register_envs(ale_py)
    reference = gym.make(gym_id, frameskip=1, repeat_action_probability=0.0)
    reference = AtariPreprocessing(reference, noop_max=0, frame_skip=4, screen_size=84)
    reference = FrameStackObservation(reference, 4, padding_type="zero")
    ours = envs.make(f"atari:{game}", seed=0, noop_max=0)
    observation, _ = ours.reset()
    expected, _ = reference.reset(seed=0)
    assert ours.action_space.n == reference.action_space.n
    rewards, gaps, differing = [], [], []
    for a in _random_actions(ours.action_space.n, 400, 1)[:, 0]:
        gap = np.abs(observation.astype(int) - expected)
        gaps.append(gap.max())
        differing.append((gap > 0).mean())
        observation, reward, terminated, truncated, _ = ours.step(int(a))
        expected, expected_reward, expected_terminated, expected_truncated, _ = reference.step(int(a))
        assert (reward, terminated, truncated) == (expected_reward, expected_terminated, expected_truncated)
        rewards.append(reward)
        if terminated:
            break
    # Identical emulation; the two area resizes round differently at most by 1 in
    # a few pixels (measured: max 1, under 0.2% of pixels in any frame).
    assert max(gaps) <= 1 and max(differing) < 0.01
    assert sum(rewards) > 0 and terminated == ends  # Scoring steps, and Breakout's game over, were covered.
