"""MinAtar, the toy env, the DMLab adapter (against a fake module) and the factory."""

import inspect
import pathlib
import subprocess
import sys

import minatar
import numpy as np
import pytest

from common import envs
from common.envs import dmlab
from common.errors import UsageError

_ENVIRONMENT_SIGNATURE = inspect.signature(minatar.Environment.__init__)  # Before any monkeypatch.


@pytest.fixture
def minatar_calls(monkeypatch) -> list[tuple[tuple, dict]]:
    """Records the arguments of every `minatar.Environment(...)` our wrapper makes."""
    calls, real = [], minatar.Environment

    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(minatar, "Environment", recording)
    return calls


def _bound(call: tuple[tuple, dict]) -> dict:
    """The call's arguments by name, with `minatar.Environment`'s own defaults filled in."""
    bound = _ENVIRONMENT_SIGNATURE.bind(None, *call[0], **call[1])
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k != "self"}


def test_minatar_environment_gets_the_papers_settings_by_default(minatar_calls):
    env = envs.make("minatar:breakout", seed=0)
    # Young & Tian 2019 (MinAtar README): sticky actions 0.1, difficulty ramping on.
    assert _bound(minatar_calls[-1]) == {"env_name": "breakout", "sticky_action_prob": 0.1, "difficulty_ramping": True}
    assert env.action_space.n == 6  # All 6 actions, not the minimal set.
    observation, _ = env.reset()
    assert observation.shape == (10, 10, 4) and observation.dtype == np.uint8


def test_minatar_options_reach_the_environment(minatar_calls):
    envs.make("minatar:asterix", seed=0, sticky_action_prob=0.3, difficulty_ramping=False)
    assert _bound(minatar_calls[-1]) == {"env_name": "asterix", "sticky_action_prob": 0.3, "difficulty_ramping": False}


@pytest.mark.parametrize("game", ["asterix", "breakout", "freeway", "seaquest", "space_invaders"])
def test_minatar_games_are_reproducible_by_seed(game):
    def rollout(seed):
        env = envs.make(f"minatar:{game}", seed=seed)
        env.reset()
        rng = np.random.default_rng(0)
        return [env.step(int(rng.integers(6)))[:3] for _ in range(200)]

    first, again = rollout(1), rollout(1)
    assert all(np.array_equal(a[0], b[0]) and a[1:] == b[1:] for a, b in zip(first, again))


def test_minatar_episode_cap_truncates_each_episode():
    env = envs.make("minatar:freeway", seed=0, max_episode_steps=7)
    for _ in range(2):  # The cap counts each episode's steps from its reset.
        env.reset()
        results = [env.step(0) for _ in range(7)]
        assert [r[3] for r in results] == [False] * 6 + [True]


def test_ctrl_c_while_minatar_imports_its_display_stops_the_process():
    # minatar imports matplotlib and seaborn under a bare `except:`; a Ctrl-C in
    # those seconds was swallowed and the run trained on. Here the Ctrl-C comes
    # exactly there: as seaborn is imported, in a fresh interpreter.
    script = """
import sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "seaborn":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
from common import envs
try:
    envs.make("minatar:breakout", seed=0)
except KeyboardInterrupt:
    sys.exit(130)
"""
    repo = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, timeout=120)
    assert result.returncode == 130, result.stderr[-2000:]


def test_catch_pays_plus_one_to_a_tracking_policy_and_minus_one_to_a_stubborn_one():
    env = envs.make("toy:catch", seed=0)
    for _ in range(20):
        observation, _ = env.reset()
        ball = int(np.argmax(observation[0, :, 0]))
        terminated = False
        while not terminated:
            paddle = int(np.argmax(observation[-1, :, 0]))
            observation, reward, terminated, _, _ = env.step(int(np.sign(ball - paddle)) + 1)
        assert reward == 1.0
    rewards = []
    for _ in range(50):
        env.reset()
        terminated = False
        while not terminated:
            _, reward, terminated, _, _ = env.step(0)  # Always left.
        rewards.append(reward)
    assert -1.0 in rewards and set(rewards) <= {-1.0, 1.0}


def test_serial_batch_autoresets_and_seeds_each_env():
    batch = envs.make_batched("toy:catch", 3, seed=4)
    observation, _ = batch.reset()
    singles = [envs.make("toy:catch", seed=4 + i).reset()[0] for i in range(3)]
    assert all(np.array_equal(observation[i], singles[i]) for i in range(3))
    for _ in range(9):  # Catch episodes last rows - 1 = 9 steps.
        observation, reward, terminated, _, info = batch.step(np.ones(3, int))
    assert terminated.all() and info["game_over"].all() and set(reward) <= {-1.0, 1.0}
    assert (observation[:, 0].sum(axis=(1, 2)) == 1).all()  # Next episode: ball back on top.


def test_dmlab_adapter_drives_lab_with_the_paper_settings(fake_lab):
    env = envs.make("dmlab:rooms_collect_good_objects_train", seed=5)
    lab = fake_lab.Lab.created[-1]
    assert lab.level == "contributed/dmlab30/rooms_collect_good_objects_train"
    assert lab.config["width"] == "96" and lab.config["height"] == "72"
    observation, _ = env.reset()
    assert observation.shape == (72, 96, 3) and lab.seed == 5
    _, reward, terminated, _, _ = env.step(6)
    assert reward == fake_lab.reward(lab.level) and not terminated and lab.steps == 4  # Action repeat 4.
    assert list(lab.last_action) == [-20, 0, 0, 1, 0, 0, 0]  # Forward + look left.
    for _ in range(2):
        _, _, terminated, _, _ = env.step(0)
    assert terminated
    env.reset()
    assert lab.seed == 6  # A fresh, reproducible layout each episode.


def test_dmlab_maps_the_two_train_levels_to_their_test_scores():
    assert dmlab.score_level("rooms_collect_good_objects_train") == "rooms_collect_good_objects_test"
    assert dmlab.score_level("rooms_watermaze") == "rooms_watermaze"
    assert len(dmlab.DMLAB30) == 30


def test_dmlab_without_the_module_says_how_to_build_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)  # Makes the import fail.
    with pytest.raises(UsageError, match="bazel"):
        envs.make("dmlab:rooms_watermaze")


@pytest.mark.parametrize(
    "spec, options, message",
    [
        ("atari:pongg", {}, "unknown atari name 'pongg'; accepted: alien"),
        ("mujoco:ant", {}, "unknown env family 'mujoco'; accepted: atari, minatar, dmlab, toy"),
        ("pong", {}, "expected FAMILY:NAME"),
        ("minatar:pong", {}, "accepted: asterix, breakout"),
        ("dmlab:rooms", {}, "unknown dmlab name"),
        ("atari:pong", {"frame_stack": 0}, "frame_stack=0: must be an integer in \\[1, 256\\]"),
        # Past ale-py's C ints, or past memory: tracebacks from ale-py and numpy before.
        (
            "atari:pong",
            {"noop_max": 10**20},
            "noop_max=100000000000000000000: must be an integer in \\[0, 2,147,483,646\\]",
        ),
        ("atari:pong", {"frame_skip": 2**31}, "frame_skip=2147483648: must be an integer in \\[1, 2,147,483,647\\]"),
        ("atari:pong", {"screen_size": 100_000}, "screen_size=100000: must be an integer in \\[1, 1,024\\]"),
        ("toy:catch", {"columns": 10**20}, "need 2 <= rows <= 1000, 1 <= columns <= 1000"),
        ("atari:pong", {"sticky_action_prob": 1.5}, "must be in \\[0, 1\\]"),
        ("atari:pong", {"colour": True}, "unknown atari option 'colour'; accepted: frame_skip"),
        ("minatar:breakout", {"max_episode_steps": -1}, "must be an integer >= 0"),
    ],
)
def test_bad_env_input_names_what_is_accepted(spec, options, message):
    with pytest.raises(UsageError, match=message):
        envs.make(spec, **options)
