"""Batched evaluation (`common.evaluation.play`): the same episodes as envs played one by one, no bias
toward short episodes, and the policies' batched actions (no training)."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

from common import envs, evaluation, scores
from impala import agent as impala_agent
from per import actor as per_actor

CATCH = types.SimpleNamespace(env="toy:catch", env_options=())


class Fixed:
    """A deterministic policy that depends on the observation (so the returns vary): an action from the
    positions of its lit cells."""

    def reset(self, num_envs: int) -> None:
        """Stateless."""

    def __call__(self, observations: np.ndarray, first: np.ndarray) -> np.ndarray:
        return np.array([int(np.flatnonzero(o.ravel()).sum()) % 3 for o in observations])


def one_by_one(seed: int, quota: np.ndarray) -> list[float]:
    """Env i built and reset as the batch env does (seed + i), playing its quota alone, one step at a time."""
    returns = []
    for i, count in enumerate(quota):
        env, policy = envs.make(CATCH.env, seed=seed + i), Fixed()
        observation, _ = env.reset(seed=seed + i)
        for _ in range(count):
            policy.reset(1)
            total, first, done = 0.0, np.ones(1, bool), False
            while not done:
                observation, reward, terminated, truncated, _ = env.step(int(policy(observation[None], first)[0]))
                total, first, done = total + reward, np.zeros(1, bool), terminated or truncated
            returns.append(total)
            observation, _ = env.reset()
    return returns


@pytest.mark.parametrize("episodes, num_envs, expected", [(5, 3, [2, 2, 1]), (2, 16, [1, 1]), (32, 16, [2] * 16)])
def test_shares_split_the_episodes_before_play(episodes, num_envs, expected):
    assert evaluation.shares(episodes, num_envs).tolist() == expected


@pytest.mark.parametrize("episodes, num_envs", [(7, 3), (4, 1), (3, 8)])
def test_batched_play_returns_each_envs_own_episodes(episodes, num_envs):
    returns = evaluation.play(CATCH, Fixed(), episodes, seed=5, log_every_s=60.0, num_envs=num_envs)
    assert returns == one_by_one(5, evaluation.shares(episodes, num_envs))
    assert len(set(returns)) > 1  # Catch's ball falls in different columns: a comparison that can differ.


class UnevenEpisodes:
    """A batch env whose env i plays episodes of i + 1 steps; an episode's return names its env and number."""

    def __init__(self, num_envs: int, truncate: bool = False):
        self.steps, self.played = np.zeros(num_envs, int), np.zeros(num_envs, int)
        self.truncate = truncate  # Episodes end by a time limit (truncated), not terminated.
        self.calls = 0

    def reset(self):
        return np.zeros((len(self.steps), 1)), {}

    def step(self, actions):
        self.calls += 1
        assert self.calls < 1_000, "play() is still stepping: it never counted an episode's end"
        self.steps += 1
        ended = self.steps == np.arange(1, len(self.steps) + 1)
        rewards = np.where(ended, 100.0 * np.arange(len(self.steps)) + self.played, 0.0)
        self.played += ended
        self.steps[ended] = 0
        terminated, truncated = (np.zeros_like(ended), ended) if self.truncate else (ended, np.zeros_like(ended))
        return np.zeros((len(self.steps), 1)), rewards, terminated, truncated, {}

    def close(self):
        pass


@pytest.mark.parametrize("truncate", [False, True], ids=["terminated", "truncated"])
def test_batched_play_takes_each_envs_share_not_the_episodes_that_end_first(monkeypatch, truncate):
    """Env 0's episodes are the shortest: taking episodes as they end would fill the quota with its games.
    An episode cut by a time limit (Atari's 108K frames) ends as one that terminated."""
    monkeypatch.setattr(
        evaluation, "evaluation_env", lambda config, seed, task, num_envs: UnevenEpisodes(num_envs, truncate)
    )
    returns = evaluation.play(CATCH, Fixed(), episodes=7, seed=0, log_every_s=60.0, num_envs=3)
    assert returns == [0.0, 1.0, 2.0, 100.0, 101.0, 200.0, 201.0]  # Shares 3, 2, 2: each env's first games.


def test_the_report_gives_the_mean_return_and_its_human_normalised_score(tmp_path, capsys):
    """mean_return is the mean (not the median) of the returns; on Atari (score - random) / |human - random|."""
    config = types.SimpleNamespace(env="atari:pong")
    result = evaluation.report(tmp_path, config, 7, [0.0, 0.0, 10.0], 0, 1.0, "atari_human_starts")
    assert result["mean_return"] == pytest.approx(10 / 3) and result["std_return"] == pytest.approx(np.std([0, 0, 10]))
    random, human = scores.reference("atari_human_starts")["pong"]
    assert result["human_normalized"] == pytest.approx((10 / 3 - random) / abs(human - random))
    assert json.loads((tmp_path / "eval_step7.json").read_text())["mean_return"] == pytest.approx(10 / 3)


def test_impala_categorical_draws_follow_pi():
    """50,000 draws per row against pi: each frequency within 5 standard errors."""
    pi = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]])
    draws = np.stack([impala_agent.categorical(pi, np.random.default_rng(seed)) for seed in range(50_000)])
    for row in range(len(pi)):
        frequencies = np.bincount(draws[:, row], minlength=pi.shape[1]) / len(draws)
        stderr = np.sqrt(pi[row] * (1 - pi[row]) / len(draws))
        assert np.all(np.abs(frequencies - pi[row]) <= 5 * stderr + 1e-12)


def test_per_epsilon_greedy_explores_epsilon_of_the_time_per_env():
    class Network:
        num_actions = 4

        def __call__(self, observations):
            return np.tile([0.0, 0.0, 1.0, 0.0], (len(observations), 1)).astype(np.float32)

    policy = per_actor.EpsilonGreedy(Network(), epsilon=0.2, seed=0)
    policy.reset(1000)
    actions = np.concatenate([policy(np.zeros((1000, 1), np.float32), np.zeros(1000, bool)) for _ in range(20)])
    # Greedy action 2 unless exploring; exploring picks 2 a quarter of the time: P(not 2) = 0.2 * 3/4.
    assert np.mean(actions != 2) == pytest.approx(0.15, abs=0.01)


def test_the_summary_line_names_the_score_table_and_where_the_agent_says_how_episodes_started(tmp_path, capsys):
    """PER's Atari scores, played from no-op starts and normalised with the human-starts table, said neither."""
    pong = types.SimpleNamespace(env="atari:pong", env_options=())
    extra = {"start_protocol": "no-op starts (PER used human starts)"}
    evaluation.report(tmp_path, pong, 7, [-21.0, -20.0], 1, 1.0, "atari_human_starts", extra)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "% of human (the atari_human_starts table, played from no-op starts (PER used human starts))" in line
    evaluation.report(tmp_path, CATCH, 8, [1.0], 1, 1.0, "atari_human_starts")
    assert "of human" not in capsys.readouterr().out  # No table for the toy env.
