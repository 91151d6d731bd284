"""Prioritized Double DQN's parts, on a real in-process Reverb server.

Acting (epsilon schedule, epsilon-greedy, seeds), the target network's copy
period, priorities written back for exactly the sampled keys, the replay
ratio held by Reverb's rate limiter against a free-running actor, a
checkpoint round trip that keeps the replay's contents, and the Ape-X split:
an actor acts with the newest published parameters and stores at their
maximal priority; the learner counts the table's inserts and publishes.
"""

import dataclasses
import io
import os
import pathlib
import subprocess
import sys
import threading
import time
import types

import gymnasium as gym
import numpy as np
import pytest
import reverb
import tensorflow as tf
from scipy import stats
from scripted_envs import ScriptedBatchEnv

from common.envs.batch import SerialBatchEnv
from common.errors import UsageError
from common.reverb import server as reverb_server
from per import actor as actor_lib
from per import agent as agent_lib
from per import config as config_lib
from per import networks
from per.learner import FIELDS, Learner
from per.replay import UNKNOWN_INSERTION, LiveMinimum, RankTracker

TOY = dataclasses.replace(config_lib.PRESETS["toy"], min_replay_size=100, replay_capacity=2_000)


@pytest.fixture
def make_agent():
    """DqnAgent on its own in-process server; servers stop after their agents close."""
    made = []

    def make(config=TOY, checkpoint_dir=None, seed=None):
        server = reverb_server.make_server([agent_lib.replay_table(config)], checkpoint_dir=checkpoint_dir)
        client = reverb.Client(f"localhost:{server.port}")
        made.append((server, agent_lib.DqnAgent(config, client, seed=seed)))
        made[-1][1].start()  # No checkpoint to restore: mirror the counters.
        return made[-1][1]

    yield make
    for server, agent in made:
        agent.close()
        server.stop()


def record_adds(agent):
    """Spies on the replay's inserts: {insertion id: transition}."""
    added, add = {}, agent.replay.add_transition

    def spy(transition, stream):
        added[agent.replay.inserted] = transition
        add(transition, stream)

    agent.replay.add_transition = spy
    return added


def q_values(network, observations):
    return network(tf.convert_to_tensor(observations)).numpy().astype(np.float64)


def clone(network, config):
    """A network with `network`'s current weights, frozen."""
    space, num_actions = agent_lib.spaces(config)
    copy = networks.make(config, space, num_actions, name="clone")
    for target, source in zip(copy.variables, network.variables):
        target.assign(source)
    return copy


def double_q_td_errors(online, target, batch, reward, discount):
    """delta_j of Double DQN in float64: argmax by the online network, valued by the target (van Hasselt 2016)."""
    rows = np.arange(len(reward))
    best = np.argmax(q_values(online, batch["next_observation"]), axis=1)
    q_t = q_values(target, batch["next_observation"])[rows, best]
    return (
        reward
        + discount * (1 - batch["terminal"]) * q_t
        - q_values(online, batch["observation"])[rows, batch["action"]]
    )


# Acting. --------------------------------------------------------------------


def test_epsilon_goes_linearly_from_start_to_end_over_the_decay_steps(make_agent):
    config = dataclasses.replace(TOY, epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=40, update_period=2)
    agent = make_agent(config)
    acted_with, step = [], agent.actor.step

    def spy(epsilon, greedy=None):  # The epsilon each env step of act() is taken with.
        acted_with.append(epsilon)
        return step(epsilon, greedy)

    agent.actor.step = spy
    seen = []
    for _ in range(30):
        seen.append((agent.learner.agent_step_count, agent.learner.epsilon()))
        agent.act()
    steps, epsilons = np.array(seen).T
    expected = np.maximum(1.0 - 0.9 * steps / 40, 0.1)
    np.testing.assert_allclose(epsilons, expected, rtol=1e-12)
    assert steps[-1] == 58 and epsilons[-1] == pytest.approx(0.1)
    # The actor acts with the schedule's value, held for the update_period agent steps of one act().
    np.testing.assert_allclose(acted_with, np.repeat(expected, 2), rtol=1e-12)


@pytest.mark.parametrize("beta0, beta_final", [(0.4, 1.0), (1.0, 1.0), (0.0, 0.0)])
def test_beta_goes_linearly_from_beta0_to_beta_final_at_the_frame_budget(make_agent, beta0, beta_final):
    """§3.4's annealing to 1, and App. Fig. 12's fixed beta (full correction, none)."""
    config = dataclasses.replace(TOY, beta0=beta0, beta_final=beta_final, total_frames=1_000)
    learner = make_agent(config).learner
    seen = []
    for _ in range(12):
        seen.append((learner.frames, learner.beta()))
        learner.count_agent_steps(100)
    frames, betas = np.array(seen).T
    np.testing.assert_allclose(betas, beta0 + (beta_final - beta0) * np.minimum(frames / 1_000, 1.0), rtol=1e-12)
    assert betas[-1] == beta_final


def schedule_learner(config) -> Learner:
    """A learner of `config`'s counters and schedules on Catch's small networks (the schedules are under test)."""
    space, num_actions = agent_lib.spaces(TOY)
    return Learner(config, *(networks.make(TOY, space, num_actions, name=name) for name in ("online", "target")))


def test_beta_anneals_over_env_frames_not_agent_steps():
    """With Atari's action repeat of 4, beta reaches beta_final at total_frames: a quarter as many agent steps."""
    config = dataclasses.replace(TOY, env="atari:pong", beta0=0.4, beta_final=1.0, total_frames=1_000)
    assert config.frames_per_step == 4
    learner = schedule_learner(config)
    learner.restored()
    for agent_steps in range(0, 300, 25):
        assert learner.frames == 4 * agent_steps
        assert learner.beta() == pytest.approx(0.4 + 0.6 * min(4 * agent_steps / 1_000, 1.0), rel=1e-12)
        learner.count_agent_steps(25)


def test_epsilon_decays_over_agent_steps_not_env_frames():
    """epsilon_decay_steps counts agent steps (the config's unit; tuned DDQN's 1M), not frames (4 a step on Atari)."""
    config = dataclasses.replace(TOY, env="atari:pong", epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=100)
    learner = schedule_learner(config)
    learner.restored()
    learner.count_agent_steps(50)
    assert learner.frames == 200 and learner.epsilon() == pytest.approx(1.0 - 0.9 * 50 / 100, rel=1e-12)


def test_a_larger_budget_anneals_beta_on_from_where_it_was(tmp_path):
    """A run resumed to a larger budget takes beta on linearly from its value then to beta_final at the new end."""

    def learner(total_frames: int) -> Learner:
        return schedule_learner(dataclasses.replace(TOY, beta0=0.4, beta_final=1.0, total_frames=total_frames))

    first = learner(1_000)
    first.restored()
    first.count_agent_steps(500)
    first.sync_counters()
    assert first.beta() == pytest.approx(0.7, rel=1e-12)
    path = tf.train.Checkpoint(learner=first).save(str(tmp_path / "checkpoint"))
    resumed = learner(2_000)
    tf.train.Checkpoint(learner=resumed).restore(path)
    resumed.restored()
    assert resumed.beta() == pytest.approx(0.7, rel=1e-12)
    resumed.count_agent_steps(750)
    assert resumed.beta() == pytest.approx(0.7 + 0.3 * 750 / 1_500, rel=1e-12)


def test_actor_is_greedy_at_epsilon_0_and_uniform_at_1(make_agent):
    agent = make_agent()
    observations = np.stack([agent.actor._observation[0]] * 3000)
    greedy = np.argmax(q_values(agent.learner.network, observations[:1]), axis=1)[0]
    assert (agent.actor.actions(observations, 0.0) == greedy).all()
    counts = np.bincount(agent.actor.actions(observations, 1.0), minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-4, counts
    mixed = agent.actor.actions(observations, 0.3)  # Greedy with probability 0.7 + 0.3 / 3.
    assert abs(np.mean(mixed == greedy) - 0.8) < 0.04


def test_the_loop_acts_greedily_in_theta_as_of_each_agent_step(make_agent):
    """The greedy actions that the update's own call returns (`Learner.update`'s `act_on`) are those the
    actor would compute itself: of the observation it acts in, under theta after the last update. Two
    agent steps per update, so the second acts without them."""
    config = dataclasses.replace(TOY, epsilon_start=0.0, epsilon_end=0.0, update_period=2, learning_rate=0.01)
    agent = make_agent(config)
    step, given, checked = agent.actor.step, [], []

    def spy(epsilon, greedy=None):
        given.append(greedy is not None)
        q = q_values(agent.learner.network, agent.actor.observation)[0]
        result = step(epsilon, greedy)
        top2 = np.sort(q)[-2:]
        if top2[1] - top2[0] > 1e-5:  # Not a near tie, which rounding in another graph could break.
            checked.append(result[0][0].action == np.argmax(q))
        return result

    agent.actor.step = spy
    while agent.steps < 100:
        agent.step()
    # Every update but the last passes its actions to the next act()'s first step, and only to it.
    assert sum(given) == agent.steps - 1 and given[-2:] == [True, False]
    assert len(checked) > 150 and all(checked)


class CountingEnv(gym.Env):
    """Observation: the step count in the episode; truncated at step 3 (env 0) or terminated at step 2 (env 1)."""

    def __init__(self, space: gym.spaces.Box, num_actions: int, truncates: bool):
        self.observation_space, self.action_space = space, gym.spaces.Discrete(num_actions)
        self._truncates, self._steps = truncates, 0

    def reset(self, *, seed=None, options=None):
        self._steps = 0
        return np.zeros(self.observation_space.shape, self.observation_space.dtype), {}

    def step(self, action):
        self._steps += 1
        observation = np.full(self.observation_space.shape, self._steps, self.observation_space.dtype)
        ended = self._steps == (3 if self._truncates else 2)
        return observation, 0.0, ended and not self._truncates, ended and self._truncates, {}


def test_a_truncation_is_stored_as_terminal_like_a_termination():
    """Same-step autoreset leaves no S_j to bootstrap from after a truncation: gamma_j = 0 (README)."""
    space, num_actions = agent_lib.spaces(TOY)
    env = SerialBatchEnv(lambda i, seed: CountingEnv(space, num_actions, truncates=i == 0), num_envs=2, seed=0)
    actor = actor_lib.Actor(networks.make(TOY, space, num_actions, name="q"), env, seed=0)
    stored = [actor.step(epsilon=1.0)[0] for _ in range(6)]
    for env_index, episode_length in ((0, 3), (1, 2)):
        transitions = [step[env_index] for step in stored]
        ends = [t % episode_length == episode_length - 1 for t in range(6)]
        assert [float(t.terminal) for t in transitions] == [float(end) for end in ends]
        for transition, end in zip(transitions, ends):  # After an end, S_j is the next episode's first.
            assert (transition.next_observation == 0).all() == end


def test_life_losses_are_terminals_and_episodes_are_games():
    """Atari's training terminal on a lost life cuts the bootstrap (gamma_j = 0), but the episode logged is
    the game: its return and length run on to the game over, or to the time limit's truncation."""
    space, num_actions = agent_lib.spaces(TOY)
    env = ScriptedBatchEnv(space.shape, num_actions)
    actor = actor_lib.Actor(networks.make(TOY, space, num_actions, name="q"), env, seed=0)
    steps = [actor.step(epsilon=1.0) for _ in range(7)]
    assert [float(transitions[0].terminal) for transitions, _ in steps] == [0, 1, 0, 1, 0, 0, 1]
    assert [episodes for _, episodes in steps] == [[], [], [], [(4.0, 4)], [], [], [(3.0, 3)]]


def test_a_serial_batchs_game_over_is_a_termination_or_a_truncation():
    """What both actors log episodes by: a truncated game (MinAtar's step cap) ends its episode too."""
    space, num_actions = agent_lib.spaces(TOY)
    env = SerialBatchEnv(lambda i, seed: CountingEnv(space, num_actions, truncates=i == 0), num_envs=2, seed=0)
    env.reset()
    game_overs = [env.step(np.zeros(2, np.int32))[4]["game_over"].tolist() for _ in range(6)]
    assert [g[0] for g in game_overs] == [False, False, True] * 2  # Truncated at step 3.
    assert [g[1] for g in game_overs] == [False, True] * 3  # Terminated at step 2.


def test_same_seed_acts_alike_and_another_seed_does_not(make_agent):
    runs = []
    for seed in (7, 7, 8):
        agent = make_agent(seed=seed)
        added = record_adds(agent)
        for _ in range(40):  # Before learning starts: acting only.
            agent.act()
        runs.append([(t.observation.tobytes(), int(t.action), float(t.reward)) for t in added.values()])
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


# Learning. ------------------------------------------------------------------


def random_batch(config, rng, batch_size):
    space, num_actions = agent_lib.spaces(config)
    observations = rng.integers(0, 2, (2, batch_size, *space.shape)).astype(space.dtype)
    batch = {
        "observation": observations[0], "next_observation": observations[1],
        "action": rng.integers(num_actions, size=batch_size).astype(np.int32),
        "reward": rng.choice([-1.0, 0.0, 1.0], batch_size).astype(np.float32),
        "terminal": rng.integers(0, 2, batch_size).astype(np.float32),
    }  # fmt: skip
    return batch, np.ones(batch_size, np.float32)


def test_the_learners_update_returns_the_greedy_actions_of_theta_after_its_step():
    """`act_on`'s actions read the updated theta (the compiled call orders the reads after the step)."""
    config = dataclasses.replace(TOY, learning_rate=0.05)
    space, num_actions = agent_lib.spaces(config)
    online = networks.make(config, space, num_actions, name="online")
    learner = Learner(config, online, networks.make(config, space, num_actions, name="target"))
    learner.restored()
    rng = np.random.default_rng(1)
    probe = random_batch(config, rng, 256)[0]["observation"]
    assert learner.update(*random_batch(config, rng, 32)).greedy is None
    changed = 0
    for _ in range(5):
        before = np.argmax(q_values(online, probe), axis=1)
        result = learner.update(*random_batch(config, rng, 32), act_on=probe)
        np.testing.assert_array_equal(result.greedy, np.argmax(q_values(online, probe), axis=1))
        changed += int((result.greedy != before).sum())
    assert changed > 0  # Actions under theta before the step would fail the comparison above.


def test_target_network_is_copied_every_target_update_period_updates():
    config = dataclasses.replace(TOY, target_update_period=3, learning_rate=0.01)
    space, num_actions = agent_lib.spaces(config)
    online = networks.make(config, space, num_actions, name="online")
    target = networks.make(config, space, num_actions, name="target")
    learner = Learner(config, online, target)
    learner.restored()
    rng = np.random.default_rng(0)
    probe = random_batch(config, rng, 8)[0]["observation"]
    initial = last_copy = q_values(online, probe)
    np.testing.assert_array_equal(q_values(target, probe), last_copy)  # theta^- = theta at the start.
    for update in range(1, 10):
        result = learner.update(*random_batch(config, rng, 32))
        assert result.target_updated == (update % 3 == 0)
        if update % 3 == 0:
            last_copy = q_values(online, probe)
        np.testing.assert_array_equal(q_values(target, probe), last_copy)
        assert not np.allclose(q_values(online, probe), q_values(target, probe)) or update % 3 == 0
    assert int(learner.target_updates.numpy()) == 3
    assert not np.allclose(q_values(online, probe), initial)  # theta^- <- theta: the online network learned on.


@pytest.mark.parametrize("clip_rewards", [True, False])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_the_learners_loss_weights_clips_and_reduces_as_the_config_says(clip_rewards, reduction):
    """Update.loss and delta against a float64 Double DQN with w_j huber(delta_j) (Algorithm 1, lines 10-13; §4)."""
    config = dataclasses.replace(TOY, clip_rewards=clip_rewards, loss_reduction=reduction, learning_rate=0.01)
    space, num_actions = agent_lib.spaces(config)
    online, target = (networks.make(config, space, num_actions, name=name) for name in ("online", "target"))
    learner = Learner(config, online, target)
    learner.restored()
    rng = np.random.default_rng(7)
    batch, _ = random_batch(config, rng, 16)
    batch["reward"] = rng.choice([-3.0, -0.5, 0.0, 2.0, 5.0], 16).astype(np.float32)  # Some beyond [-1, 1].
    learner.update(batch, np.ones(16, np.float32))  # theta^- != theta from here: both networks matter.
    weights = rng.uniform(0.05, 1.0, 16).astype(np.float32)
    online, target = clone(learner.network, config), clone(learner.target_network, config)

    result = learner.update(batch, weights)

    reward = np.clip(batch["reward"], -1, 1) if clip_rewards else batch["reward"].astype(np.float64)
    delta = double_q_td_errors(online, target, batch, reward, config.discount)
    huber = np.where(np.abs(delta) <= 1, 0.5 * delta**2, np.abs(delta) - 0.5)
    weighted = weights.astype(np.float64) * huber
    np.testing.assert_allclose(result.td_error, delta, rtol=1e-5, atol=1e-5)
    assert result.loss == pytest.approx(weighted.sum() if reduction == "sum" else weighted.mean(), rel=1e-5)


def first_rmsprop_step(config, gradient: np.ndarray) -> np.ndarray:
    """The parameter change of a fresh `common.optimizers` RMSProp's first step (no momentum yet), in float64.

    TF1's form starts ms at 1 and puts epsilon inside the root; PyTorch's starts ms at 0 and puts it outside.
    """
    decay, epsilon, lr = config.rmsprop_decay, config.rmsprop_epsilon, config.learning_rate
    ms = decay * (1.0 if config.rmsprop_form == "tf1" else 0.0) + (1 - decay) * gradient**2
    variance = ms - ((1 - decay) * gradient) ** 2 if config.rmsprop_centered else ms
    if config.rmsprop_form == "tf1":
        return -lr * gradient / np.sqrt(variance + epsilon)
    return -lr * gradient / (np.sqrt(variance) + epsilon)


@pytest.mark.parametrize(
    "form, centered, reduction, shared_bias",
    [("tf1", True, "sum", False), ("tf1", False, "mean", True), ("torch", True, "mean", False)],
)
def test_the_learners_update_is_an_rmsprop_step_down_the_weighted_loss_gradient(form, centered, reduction, shared_bias):
    """theta moves by RMSProp along -dL/dtheta, with dL/dQ(S_{j-1}, A_{j-1}; theta) = -w_j clip(delta_j, -1, 1)
    (divided by the batch size for the mean; §4's clipped delta) from a float64 Double DQN delta_j."""
    config = dataclasses.replace(
        TOY, rmsprop_form=form, rmsprop_centered=centered, loss_reduction=reduction, shared_bias=shared_bias,
        learning_rate=0.01,
    )  # fmt: skip
    space, num_actions = agent_lib.spaces(config)
    learner = Learner(config, *(networks.make(config, space, num_actions, name=name) for name in ("online", "target")))
    learner.restored()
    rng = np.random.default_rng(11)
    batch, _ = random_batch(config, rng, 16)
    weights = rng.uniform(0.05, 1.0, 16)
    online, target = clone(learner.network, config), clone(learner.target_network, config)

    learner.update(batch, weights.astype(np.float32))

    rows = np.arange(16)
    delta = double_q_td_errors(online, target, batch, batch["reward"].astype(np.float64), config.discount)
    dloss_dq = np.zeros((16, num_actions))
    dloss_dq[rows, batch["action"]] = -weights * np.clip(delta, -1.0, 1.0) / (16 if reduction == "mean" else 1)
    with tf.GradientTape() as tape:
        q = online(tf.convert_to_tensor(batch["observation"]))
    gradients = tape.gradient(q, online.trainable_variables, output_gradients=tf.constant(dloss_dq, tf.float32))
    assert len(gradients) == len(learner.network.trainable_variables) and all(g is not None for g in gradients)
    assert any("shared_bias" in v.name for v in learner.network.trainable_variables) == shared_bias
    for before, after, gradient in zip(online.trainable_variables, learner.network.trainable_variables, gradients):
        expected = before.numpy().astype(np.float64) + first_rmsprop_step(config, gradient.numpy().astype(np.float64))
        np.testing.assert_allclose(after.numpy(), expected, rtol=1e-4, atol=1e-6, err_msg=after.name)
    assert not np.allclose(q_values(learner.network, batch["observation"]), q_values(online, batch["observation"]))


# The presets' learners draw their next batch and write priorities while they learn (`overlaps_acting`);
# TOY's small replay samples in turn. A replay of 400 before learning tolerates the overlap's drift.
IN_TURN_OR_OVERLAPPED = pytest.mark.parametrize("min_replay_size", [100, 400], ids=["in_turn", "overlapped"])


@IN_TURN_OR_OVERLAPPED
@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_priorities_written_back_are_abs_td_plus_epsilon_of_exactly_the_sampled_keys(
    make_agent, min_replay_size, variant
):
    """Proportional: p = |delta| + epsilon. Rank-based: the tracker learns |delta| of those keys only, and
    writes them priorities ordered as their |delta| (between re-ranks, which rewrite every key)."""
    config = dataclasses.replace(
        TOY, replay=variant, alpha=0.7, priority_epsilon=0.01, min_replay_size=min_replay_size,
        rerank_interval=100_000,
    )  # fmt: skip
    assert agent_lib.overlaps_acting(config) == (min_replay_size == 400)
    agent = make_agent(config)
    while not agent.learning_started():
        agent.step()
    for _ in range(5):  # Some updates, so the priorities are not all equal.
        agent.step()
    if variant == "rank":  # A snapshot of every known item: the next update cannot make it stale.
        size_at_rerank = agent.client.server_info()["replay"].current_size
        agent.replay.rerank()
    agent.replay.flush()  # Overlapped, the last update's write may still be on its way.
    known = dict(agent.replay._rank._delta) if variant == "rank" else {}
    sampled, written = [], []
    sample, mutate = agent.replay.sample, agent.client.mutate_priorities
    agent.replay.sample = lambda *args: sampled.append(sample(*args)) or sampled[-1]
    agent.client.mutate_priorities = lambda table, updates: written.append(updates) or mutate(table, updates)
    # delta_j by a literal NumPy Double DQN, with the networks as they are before the update.
    online, target = clone(agent.learner.network, config), clone(agent.learner.target_network, config)
    agent.step()
    agent.replay.flush()
    (batch,), (updates,) = sampled, written
    observation, action, reward, terminal, next_observation = batch.data
    q_tm1, q_t_selector, q_t_value = (
        q_values(online, observation),
        q_values(online, next_observation),
        q_values(target, next_observation),
    )
    best = np.argmax(q_t_selector, axis=1)
    y = reward + config.discount * (1 - terminal) * q_t_value[np.arange(len(best)), best]
    delta = y - q_tm1[np.arange(len(action)), action]
    assert set(updates) == set(batch.keys.tolist())
    last = dict(zip(batch.keys.tolist(), np.abs(delta)))  # A key sampled twice keeps its last |delta|.
    if variant == "rank":
        tracked = agent.replay._rank._delta
        for key, d in last.items():
            assert tracked[key] == pytest.approx(d, rel=1e-4, abs=1e-6)
        assert {k: v for k, v in tracked.items() if k not in last} == {k: v for k, v in known.items() if k not in last}
        # PER §3.3 with the last sort as the order (`RankTracker`): rank(i) = U + 1 + the known items of
        # larger |delta| at the re-rank (the key's own old |delta| among them); p_i^alpha = rank(i)^-alpha.
        unseen = size_at_rerank - len(known)  # U: items not sampled yet, at the re-rank.
        assert unseen == agent.replay._rank._unseen
        for key in last:
            rank = unseen + 1 + sum(v > tracked[key] for v in known.values())
            assert updates[key] == pytest.approx(rank**-config.alpha, rel=1e-12)
        return
    for key, d in last.items():
        assert updates[key] == pytest.approx(d + 0.01, rel=1e-4, abs=1e-6)
    assert agent.replay.max_priority >= max(updates.values())


def test_a_step_samples_at_the_current_beta_and_updates_with_that_batchs_weights(make_agent):
    """Algorithm 1, lines 10 and 13: the batch is drawn at beta's annealed value (not beta0), and the
    update weighs each sample by that batch's IS weight w_j (not 1)."""
    config = dataclasses.replace(TOY, replay="proportional", alpha=0.6, beta0=0.4, total_frames=1_000)
    agent = make_agent(config)
    while not agent.learning_started():
        agent.step()
    betas, drawn, weighed = [], [], []
    sample, update = agent.replay.sample, agent.learner.update

    def spy_sample(batch_size, beta):
        betas.append((beta, agent.learner.frames))
        batch = sample(batch_size, beta)
        # Distinct weights, so that only these reaching the update passes.
        drawn.append(batch._replace(weights=np.linspace(0.1, 1.0, batch_size, dtype=np.float32)))
        return drawn[-1]

    agent.replay.sample = spy_sample
    agent.learner.update = lambda batch, weights, act_on=None: weighed.append(np.asarray(weights)) or update(
        batch, weights, act_on
    )
    agent.step()
    ((beta, frames),) = betas
    annealed = config.beta0 + (1.0 - config.beta0) * frames / config.total_frames  # beta_final = 1.
    assert beta == pytest.approx(annealed, rel=1e-6) and beta > config.beta0 + 0.05  # About 0.46 here.
    (batch,), (weights,) = drawn, weighed
    np.testing.assert_array_equal(weights, batch.weights)


@pytest.mark.parametrize("variant", ["uniform", "proportional", "rank"])
def test_only_a_prioritized_replay_logs_beta_priorities_and_weights(make_agent, variant):
    """Uniform replay's weights are all 1 whatever beta is: its log does not show beta annealing."""
    config = dataclasses.replace(TOY, replay=variant, alpha=0.0 if variant == "uniform" else 0.6)
    agent = make_agent(config)
    while not agent.learning_started():
        agent.step()
    logged = set(agent.step().metrics) | set(agent.progress())
    prioritized = {"beta", "max_priority", "min_importance_weight"}
    assert logged >= {"loss", "epsilon", "mean_abs_td_error", "replay"}
    assert logged & prioritized == (set() if variant == "uniform" else prioritized)


@IN_TURN_OR_OVERLAPPED
@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_new_transitions_enter_at_the_running_maximum_priority(make_agent, variant, min_replay_size):
    """Algorithm 1 line 6: p_t = max_i p_i (rank-based: rank 1, stored as 1^-alpha = 1).

    Proportional: the largest priority ever written to the table (or p_1 = 1), recorded here from
    every `mutate_priorities` call, not read back from the replay's own tracker.
    """
    alpha = 0.7 if variant == "rank" else 0.6
    agent = make_agent(dataclasses.replace(TOY, replay=variant, alpha=alpha, min_replay_size=min_replay_size))
    written, mutate = [1.0], agent.client.mutate_priorities
    agent.client.mutate_priorities = lambda table, updates: written.extend(updates.values()) or mutate(table, updates)
    while not agent.learning_started():
        agent.step()
    for _ in range(20):
        agent.step()
    agent.replay.flush()
    assert variant == "rank" or max(written) > 1.0  # |delta| + epsilon has passed 1.
    (writer,) = agent.replay._transitions._writers.values()  # One env stream.
    created, create_item = [], writer.create_item
    writer.create_item = lambda table, priority, trajectory: (
        created.append(priority) or create_item(table, priority, trajectory)
    )
    agent.act()
    expected = 1.0 if variant == "rank" else max(written)
    assert created == [pytest.approx(expected, rel=1e-12)] * TOY.update_period


def test_rate_limiter_holds_samples_per_insert_against_a_free_running_actor():
    """Ape-X style: an actor inserting as fast as it can, a learner sampling as fast as it can."""
    config = dataclasses.replace(TOY, batch_size=32, update_period=4, min_replay_size=200)  # 8 per insert.
    server = reverb_server.make_server([agent_lib.replay_table(config)])
    client = reverb.Client(f"localhost:{server.port}")
    inserts = 1_200

    def actor():
        writer = client.trajectory_writer(num_keep_alive_refs=1)
        for i in range(inserts):
            writer.append([np.int64(i)])
            writer.create_item(agent_lib.REPLAY_TABLE, 1.0, [writer.history[0][-1:]])
            writer.flush()  # Blocks while the rate limiter holds the actor back.
        writer.close()

    def counts():
        stats_ = client.server_info()[agent_lib.REPLAY_TABLE].rate_limiter_info
        return stats_.insert_stats.completed, stats_.sample_stats.completed

    limiter = agent_lib.replay_table(config).info.rate_limiter_info
    assert limiter.samples_per_insert == 8
    tolerance = agent_lib.rate_limiter_tolerance(config)
    assert tolerance <= 0.03 * 8 * (inserts - 200)  # Small against the 8,000 samples of this run.
    thread = threading.Thread(target=actor, daemon=True)
    thread.start()
    samples, drifts = 0, []
    while samples + config.batch_size <= 8 * (inserts - 200):
        for _ in client.sample(agent_lib.REPLAY_TABLE, num_samples=config.batch_size, emit_timesteps=False):
            pass
        inserted, samples = counts()
        drifts.append(8 * (inserted - 200) - samples)  # Inserts ahead of the 8:1 ratio, in samples.
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert counts()[0] == inserts
    # Neither side ever ran further ahead than the limiter's tolerance (plus the batch in flight).
    assert -tolerance <= min(drifts) and max(drifts) <= tolerance + config.batch_size, (min(drifts), max(drifts))
    server.stop()


def test_the_synchronous_loop_updates_once_per_update_period_once_the_replay_holds_its_minimum(make_agent):
    """Here the loop, not the rate limiter, sets the 8:1 pace (a MinSize limiter passes this test too):
    the limiter's own evidence is the free-running actor's test above."""
    config = dataclasses.replace(TOY, batch_size=32, update_period=4, min_replay_size=200)
    agent = make_agent(config)
    for _ in range(150):
        agent.step()
    agent.replay.flush()  # The newest transitions wait for their chunk to fill.
    info = agent.client.server_info()[agent_lib.REPLAY_TABLE].rate_limiter_info
    updates = agent.steps
    assert updates == 150 - 200 // 4
    assert info.insert_stats.completed == 600
    # Every batch learned from was sampled, and the sampler draws at most two ahead (`overlaps_acting`).
    assert 32 * updates <= info.sample_stats.completed <= 32 * (updates + 2)


# Checkpoints. ---------------------------------------------------------------


def variables_of(agent):
    return [v.numpy() for v in agent.learner.variables]


def replay_client_state(agent):
    r = agent.replay
    rank = None
    if r._rank:
        t = r._rank
        rank = (dict(t._delta), dict(t._inserted_at), list(t._snapshot), t._unseen, t.max_rank)
    written = (dict(r.live_minimum.written), r.live_minimum.floor) if r.live_minimum is not None else None
    return r.inserted, r.max_priority, written, r._updates, rank


@IN_TURN_OR_OVERLAPPED
@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_checkpoint_round_trip_keeps_networks_schedules_and_the_replay(make_agent, tmp_path, variant, min_replay_size):
    alpha, beta0 = (0.7, 0.5) if variant == "rank" else (0.6, 0.4)
    config = dataclasses.replace(
        TOY, replay=variant, alpha=alpha, beta0=beta0, rerank_interval=50, total_frames=2_000,
        min_replay_size=min_replay_size, weight_normalization="global_min",  # Proportional: its live minimum too.
    )  # fmt: skip
    first = make_agent(config, checkpoint_dir=tmp_path / "replay")
    added = record_adds(first)
    steps = min_replay_size // TOY.update_period + 70  # 70 steps past the start of learning.
    for _ in range(steps):
        first.step()
    stored = steps * TOY.update_period
    first.before_save()  # As `common.loop` saves: before_save, the checkpoint, save_extra.
    saved = tf.train.Checkpoint(**first.state()).save(str(tmp_path / "ckpt"))
    first.save_extra()
    expected = {
        "variables": variables_of(first), "steps": first.steps, "frames": first.frames,
        "epsilon": first.learner.epsilon(), "beta": first.learner.beta(), "replay": replay_client_state(first),
        "table": first.client.server_info()[agent_lib.REPLAY_TABLE],
    }  # fmt: skip
    assert expected["steps"] > 50
    if variant == "rank":
        assert len(expected["replay"][4][0]) > 50  # The tracker knows the sampled items' |delta|.
    else:
        assert len(expected["replay"][2][0]) > 50  # So does the live minimum their priorities.

    second = make_agent(config, checkpoint_dir=tmp_path / "replay", seed=99)  # Loads the saved tables.
    tf.train.Checkpoint(**second.state()).restore(saved).assert_existing_objects_matched()
    second.start()
    assert len(variables_of(second)) == len(expected["variables"])
    for got, want in zip(variables_of(second), expected["variables"]):
        np.testing.assert_array_equal(got, want)
    assert (second.steps, second.frames) == (expected["steps"], expected["frames"])
    assert (second.learner.epsilon(), second.learner.beta()) == (expected["epsilon"], expected["beta"])
    assert replay_client_state(second) == expected["replay"]
    table = second.client.server_info()[agent_lib.REPLAY_TABLE]
    assert table.current_size == expected["table"].current_size == stored
    assert table.rate_limiter_info == expected["table"].rate_limiter_info

    # Sampling continues from the same contents: old items come back with their data.
    second.act()
    batch = second.replay.sample(config.batch_size, second.learner.beta())
    old = 0
    for j, item in enumerate(second.replay._inserted_at[int(k)] for k in batch.keys):
        if item < stored:
            old += 1
            for field, column in zip(FIELDS, batch.data):
                np.testing.assert_array_equal(column[j], getattr(added[item], field))
    assert old >= config.batch_size // 2
    # And priorities can be written back: every key's |delta| is now 0, none dropped as evicted.
    second.replay.update(batch.keys, np.zeros(config.batch_size))
    if variant == "rank":
        assert all(second.replay._rank._delta[int(k)] == 0.0 for k in batch.keys)
    else:
        assert second.replay.live_minimum.minimum(second.replay.inserted) == second.replay.config.epsilon


def test_a_rank_checkpoint_from_before_max_rank_restores_the_last_reranks_largest_rank():
    def client_state(tracker):
        return types.SimpleNamespace(inserted=9, _updates=3, max_priority=1.0, live_minimum=None, _rank=tracker)

    tracker = RankTracker(0.7, capacity=100)
    tracker.priorities([0, 1, 2], [0, 1, 2], np.array([3.0, 2.0, 1.0]))
    tracker.rerank(table_size=9)  # U = 6: ranks 7, 8, 9.
    tracker.priorities([2], [2], np.array([0.5]))  # Below the snapshot: rank 10.
    assert tracker.max_rank == 10
    with np.load(io.BytesIO(agent_lib.ReplayState(client_state(tracker)).serialize())) as arrays:
        old = {name: arrays[name] for name in arrays.files if name != "rank_max_rank"}
    buffer = io.BytesIO()
    np.savez(buffer, **old)
    restored = client_state(RankTracker(0.7, capacity=100))
    agent_lib.ReplayState(restored).deserialize(buffer.getvalue())
    assert restored._rank.max_rank == 9  # U + n at the last re-rank: a lower bound, as such a run had.


def test_a_global_min_checkpoint_from_before_the_live_minimum_bounds_its_items_until_they_are_evicted():
    """Such a checkpoint kept the smallest priority ever written: a floor until `capacity` inserts after it."""
    capacity = 10
    old = io.BytesIO()
    np.savez(old, counters=np.array([25, 3], np.int64), priorities=np.array([2.0, 0.01], np.float64))
    restored = types.SimpleNamespace(
        inserted=0, _updates=0, max_priority=1.0, live_minimum=LiveMinimum(capacity), _rank=None
    )
    agent_lib.ReplayState(restored).deserialize(old.getvalue())
    assert (restored.inserted, restored.max_priority) == (25, 2.0)
    assert restored.live_minimum.minimum(25) == 0.01
    restored.inserted = 34  # Item 24, the last of the old run, is still live.
    restored.live_minimum.write([7], [30], [0.5], 34)
    assert restored.live_minimum.minimum(34) == 0.01
    again = types.SimpleNamespace(inserted=0, _updates=0, max_priority=1.0, live_minimum=LiveMinimum(capacity),
                                  _rank=None)  # fmt: skip
    agent_lib.ReplayState(again).deserialize(agent_lib.ReplayState(restored).serialize())  # Today's format.
    assert (again.live_minimum.written, again.live_minimum.floor) == ({7: (0.5, 30)}, (0.01, 25))
    assert again.live_minimum.minimum(35) == 0.5  # Every item of the old run evicted: the floor is gone.


# Actor processes (Ape-X). -----------------------------------------------------


def randomize(network, seed):
    for i, variable in enumerate(network.trainable_variables):
        variable.assign(tf.random.stateless_normal(variable.shape, [seed, i]))


@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_an_actor_acts_with_the_newest_parameters_and_stores_at_their_max_priority(reverb_tables, variant):
    """Copies every PARAMS_PERIOD steps: theta (greedy actions at epsilon 0), the max priority, finished games."""
    config = dataclasses.replace(TOY, num_actors=1, replay=variant, min_replay_size=1_000)  # No sampler needed.
    client, parts = reverb_tables(agent_lib.agent_tables(config))
    actor = agent_lib.make_actor(config, client, seed=5)
    parts.append(actor)
    space, num_actions = agent_lib.spaces(config)
    theta = [networks.make(config, space, num_actions, name=f"theta_{i}") for i in range(2)]
    for i, network in enumerate(theta):
        randomize(network, i)
    period = agent_lib.PARAMS_PERIOD
    stored, add = [], actor._replay._transitions.add

    def spy(stream, transition, item_id, priority):
        stored.append((transition, item_id, priority))
        if len(stored) == period // 2:  # Published mid-period: the actor takes it at its next copy.
            actor_lib.publish(client, theta[1], actor_lib.Broadcast(max_priority=4.0, epsilon=0.0))
        add(stream, transition, item_id, priority)

    actor._replay._transitions.add = spy
    actor_lib.publish(client, theta[0], actor_lib.Broadcast(max_priority=2.5, epsilon=0.0))
    actor.run(num_steps=2 * period)
    assert len(stored) == 2 * period
    for network, half, max_priority in ((theta[0], stored[:period], 2.5), (theta[1], stored[period:], 4.0)):
        observations = np.stack([t.observation for t, _, _ in half])
        greedy = np.argmax(q_values(network, observations), axis=1)
        np.testing.assert_array_equal([t.action for t, _, _ in half], greedy)
        assert {p for _, _, p in half} == {1.0 if variant == "rank" else max_priority}  # Rank 1: 1^-alpha.
        assert {i for _, i, _ in half} == {UNKNOWN_INSERTION}
    second = np.stack([t.observation for t, _, _ in stored[period:]])
    assert (np.argmax(q_values(theta[0], second), 1) != np.argmax(q_values(theta[1], second), 1)).any()
    for got, want in zip(actor._actor.network.trainable_variables, theta[1].trainable_variables):
        np.testing.assert_array_equal(got.numpy(), want.numpy())

    # Every finished game reaches the episodes queue once, as (return, length). The writer sends its items
    # from a thread of its own, so the newest may still be on their way: wait for them, then read.
    ends = [j for j, (t, _, _) in enumerate(stored) if t.terminal]
    lengths = np.diff([-1, *ends]).tolist()
    deadline = time.monotonic() + 10
    while client.server_info()[agent_lib.EPISODES_TABLE].current_size < len(ends) and time.monotonic() < deadline:
        time.sleep(0.01)
    finished = client.server_info()[agent_lib.EPISODES_TABLE].current_size
    episodes = actor_lib.read_episodes(client, agent_lib.EPISODES_TABLE, finished)
    assert len(ends) >= 10 and [length for _, length in episodes] == lengths
    assert [r for r, _ in episodes] == [float(stored[j][0].reward) for j in ends]  # Catch pays at the end only.


def test_the_apex_learner_counts_the_tables_inserts_publishes_and_holds_the_ratio(reverb_tables, monkeypatch):
    """A free-running actor (a thread here) against the learner: the rate limiter alone paces them."""
    config = dataclasses.replace(TOY, num_actors=1, batch_size=32, update_period=4, min_replay_size=200)
    client, parts = reverb_tables(agent_lib.agent_tables(config))
    learner = agent_lib.ApexAgent(config, client)
    actor = agent_lib.make_actor(config, client, seed=1)
    parts += [actor, learner]
    published, inserts = [], 1_200

    def spy(client_, network, broadcast):
        published.append((learner.learner.agent_step_count, broadcast, max(written)))
        publish(client_, network, broadcast)

    # The running max priority, p_1 = 1 then |delta| + epsilon (§3.3), from every update's TD errors
    # (the table's 2,000 items hold all 1,200 inserts: none is evicted).
    written, update = [1.0], learner.learner.update

    def spy_update(batch, weights, act_on=None):
        result = update(batch, weights, act_on)
        written.append(float(np.abs(result.td_error).max()) + config.priority_epsilon)
        return result

    learner.learner.update = spy_update

    def act():
        actor.run(num_steps=inserts)
        actor._replay.flush()  # May wait on the limiter: the learner keeps sampling meanwhile.

    publish = agent_lib.publish
    monkeypatch.setattr(agent_lib, "publish", spy)
    learner.start()
    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    episodes = []
    while thread.is_alive():
        step = learner.step()
        episodes += step.episodes if step else []
    learner._collect()
    episodes += learner._take_episodes()

    info = client.server_info()[agent_lib.REPLAY_TABLE].rate_limiter_info
    assert info.insert_stats.completed == inserts
    assert learner.frames == learner.replay.inserted == inserts  # Frames are what the table received.
    tolerance = agent_lib.rate_limiter_tolerance(config)
    drift = 8 * (inserts - 200) - info.sample_stats.completed  # Inserts ahead of 8 per insert, in samples.
    assert -tolerance <= drift <= tolerance + config.batch_size
    # Learned from every sampled batch but the overlap's next one (drawn ahead) and Reverb's in flight.
    held = info.sample_stats.completed - config.batch_size * learner.steps
    assert 0 <= held <= 2 * config.batch_size
    # Every PARAMS_PERIOD agent steps: theta with the running max priority and epsilon at the learner's count.
    # (A look at the table may find many inserts while the replay fills: a gap can exceed the period.)
    steps_at = [count for count, *_ in published]
    assert steps_at[0] == 0 and len(published) >= inserts // (2 * agent_lib.PARAMS_PERIOD)
    assert all(b - a >= agent_lib.PARAMS_PERIOD for a, b in zip(steps_at, steps_at[1:]))
    for count, broadcast, max_priority in published:
        assert broadcast.max_priority == pytest.approx(max_priority, rel=1e-6)
        assert broadcast.epsilon == pytest.approx(max(1 - 0.95 * count / 5_000, 0.05))  # The toy's schedule.
    assert published[-1][1].max_priority > 1.0  # It grew with the priorities written back.
    # Every finished game reached the learner once.
    assert inserts - 20 <= sum(length for _, length in episodes) <= inserts


# Config. --------------------------------------------------------------------


def test_presets_hold_the_papers_values():
    p = config_lib.PRESETS
    assert p["atari_ddqn"].learning_rate == 0.00025 and p["atari_ddqn"].replay == "uniform"
    assert p["atari_ddqn_prop"].learning_rate == p["atari_ddqn_rank"].learning_rate == 0.00025 / 4
    assert (p["atari_ddqn_rank"].alpha, p["atari_ddqn_rank"].beta0) == (0.7, 0.5)
    assert (p["atari_ddqn_prop"].alpha, p["atari_ddqn_prop"].beta0) == (0.6, 0.4)
    assert p["atari_ddqn"].samples_per_insert == 8  # 32 per 4 agent steps.
    assert p["atari_ddqn"].target_update_period * p["atari_ddqn"].update_period == 30_000  # Agent steps.
    # Y&T: one update of 32 per agent step (TRAINING_FREQ = 1), replay 100K.
    assert p["minatar_ddqn"].samples_per_insert == 32 and p["minatar_ddqn"].replay_capacity == 100_000
    # PER §4 uses tuned DDQN's network, whose head shares one bias; Y&T's MinAtar head has one per action.
    assert all(p[n].shared_bias for n in ("atari_ddqn", "atari_ddqn_rank", "atari_ddqn_prop"))
    assert not any(p[n].shared_bias for n in ("minatar_ddqn", "minatar_ddqn_rank", "minatar_ddqn_prop"))
    # Y&T's target copy every 1,000 updates, one per frame.
    assert (p["minatar_ddqn"].target_update_period, p["minatar_ddqn"].update_period) == (1_000, 1)
    # Y&T's examples/dqn.py, as written there: each value, not only relative to another preset.
    young_tian = {
        "batch_size": 32, "min_replay_size": 5_000, "discount": 0.99, "learning_rate": 0.00025,
        "epsilon_start": 1.0, "epsilon_end": 0.1, "epsilon_decay_steps": 100_000, "clip_rewards": False,
        "loss_reduction": "mean", "total_frames": 5_000_000,
    }  # fmt: skip
    assert {name: getattr(p["minatar_ddqn"], name) for name in young_tian} == young_tian
    # PER Table 3's alpha and beta0 for each variant, and the evaluation epsilon of tuned DDQN (Table 5).
    assert (p["minatar_ddqn_rank"].alpha, p["minatar_ddqn_rank"].beta0) == (0.7, 0.5)
    assert (p["minatar_ddqn_prop"].alpha, p["minatar_ddqn_prop"].beta0) == (0.6, 0.4)
    assert all(p[name].eval_epsilon == 0.001 for name in ("minatar_ddqn", "minatar_ddqn_rank", "minatar_ddqn_prop"))
    for name in ("minatar_ddqn_rank", "minatar_ddqn_prop"):  # PER's step size / 4, the rest as uniform's.
        assert p[name].learning_rate == 0.00025 / 4
        as_uniform = dataclasses.replace(p[name], learning_rate=0.00025, replay="uniform", alpha=0.0, beta0=0.0)
        assert as_uniform == p["minatar_ddqn"], name
    # Y&T's optimizer: PyTorch's centered RMSProp, alpha 0.95, eps 0.01 (outside the root), no momentum.
    for name in ("minatar_ddqn", "minatar_ddqn_rank", "minatar_ddqn_prop"):
        optimizer = (p[name].rmsprop_form, p[name].rmsprop_decay, p[name].rmsprop_epsilon, p[name].rmsprop_momentum)
        assert optimizer == ("torch", 0.95, 0.01, 0.0) and p[name].rmsprop_centered, name
    # Tuned DDQN's (Dopamine's): TF1's form, epsilon inside the root, no momentum. The DQN Lua code's has the
    # epsilon inside the root too, but starts its averages at 0 where TF1 starts ms at 1.
    assert (p["atari_ddqn"].rmsprop_form, p["atari_ddqn"].rmsprop_momentum) == ("tf1", 0.0)
    # PER §4, tuned DDQN and Mnih et al. 2015, as written there: each value.
    tuned_ddqn = {
        "replay_capacity": 1_000_000, "min_replay_size": 50_000, "batch_size": 32, "update_period": 4,
        "discount": 0.99, "clip_rewards": True, "loss_reduction": "sum", "rmsprop_decay": 0.95,
        "rmsprop_epsilon": 0.01, "rmsprop_centered": True, "epsilon_start": 1.0, "epsilon_end": 0.01,
        "epsilon_decay_steps": 1_000_000, "eval_epsilon": 0.001, "total_frames": 200_000_000,
    }  # fmt: skip
    for name in ("atari_ddqn", "atari_ddqn_rank", "atari_ddqn_prop"):
        assert {field: getattr(p[name], field) for field in tuned_ddqn} == tuned_ddqn, name
    for name, preset in p.items():
        assert preset.replay_config.variant == preset.replay, name
        if not preset.env.startswith("atari"):  # Atari ROMs load slowly; the system tests start them.
            agent_lib.validate(preset)


@pytest.mark.parametrize("shared_bias", [False, True])
def test_the_q_head_has_one_bias_per_action_or_one_shared(shared_bias):
    space = gym.spaces.Box(0, 1, (10, 10, 4), np.uint8)
    config = dataclasses.replace(config_lib.PRESETS["minatar_ddqn"], shared_bias=shared_bias)
    network = networks.make(config, space, num_actions=6, name="q")
    biases = [v for v in network.trainable_variables if "b:" in v.name or "shared_bias" in v.name]
    head_biases = [v for v in biases if v.shape.rank == 0 or v.shape[-1] == 6]
    assert [tuple(v.shape) for v in head_biases] == ([()] if shared_bias else [(6,)])
    for v in network.trainable_variables:  # Zero the net but the bias: Q(s, a) is the bias, for each a.
        v.assign(tf.zeros_like(v))
    head_biases[0].assign(tf.range(1.0, 7.0) if not shared_bias else 2.5)
    q = network(tf.ones((2, *space.shape), tf.uint8)).numpy()
    expected = np.full((2, 6), 2.5) if shared_bias else np.tile(np.arange(1.0, 7.0), (2, 1))
    np.testing.assert_allclose(q, expected)


@pytest.mark.parametrize("initialization", ["sonnet", "torch"])
def test_the_minatar_network_is_initialised_as_sonnet_or_pytorch_does(initialization):
    """PyTorch's Linear/Conv2d default: weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (Y&T's code).

    Sonnet's: weights from a normal of sd 1/sqrt(fan_in) truncated at 2 sd, biases 0.
    """
    tf.random.set_seed(0)
    space = gym.spaces.Box(0, 1, (10, 10, 4), np.uint8)
    config = dataclasses.replace(config_lib.PRESETS["minatar_ddqn"], initialization=initialization)
    network = networks.make(config, space, num_actions=6, name="q")
    # Y&T's layers: conv 16 3x3 over 4 channels (fan-in 36), FC 128 over 8x8x16, the head over 128.
    fan_in = {(3, 3, 4, 16): 36, (16,): 36, (1024, 128): 1024, (128,): 1024, (128, 6): 128, (6,): 128}
    variables = {tuple(v.shape): v.numpy().ravel() for v in network.trainable_variables}
    assert set(variables) == set(fan_in)
    for shape, values in variables.items():
        bound = 1 / np.sqrt(fan_in[shape])
        uniform = stats.kstest(values, stats.uniform(-bound, 2 * bound).cdf).pvalue
        if initialization == "torch":
            assert uniform > 1e-3 and np.abs(values).max() <= bound, shape
            # A bias of 6 zeros passes that KS test too: a bias must be drawn, each value its own.
            assert len(shape) > 1 or np.unique(values).size == values.size, shape
        elif len(shape) == 1:
            assert not values.any(), shape
        else:  # The normal truncated at 2 sd, and not the uniform: the test tells the two apart.
            truncated = stats.kstest(values, stats.truncnorm(-2, 2, scale=bound).cdf).pvalue
            assert np.abs(values).max() <= 2 * bound and truncated > 1e-3 and uniform < 1e-3, shape
    with pytest.raises(UsageError, match="unknown initialization 'xavier'; accepted: sonnet, torch"):
        dataclasses.replace(config, initialization="xavier")


def test_a_loop_the_rate_limiter_would_block_is_refused():
    """One process inserts update_period items per batch: the limiter must tolerate a batch of drift.

    Measured: batch 32 at 8 samples per insert runs with an error buffer of 32
    and blocks itself forever with 24.
    """
    config = dataclasses.replace(TOY, min_replay_size=10, update_period=16)  # 2 per insert; tolerance 16.
    assert agent_lib.rate_limiter_tolerance(config) < config.batch_size
    with pytest.raises(UsageError, match="tolerates 16 samples of drift"):
        agent_lib.validate(config)
    agent_lib.validate(dataclasses.replace(config, min_replay_size=160))  # 0.1 * 160 * 2 = 32: enough.


def test_a_budget_that_ends_before_the_first_update_is_warned_of(capsys):
    minatar = config_lib.PRESETS["minatar_ddqn_prop"]  # Its first update: after 5,000 + 1 agent steps of a frame.
    agent_lib.warn_if_never_learns(dataclasses.replace(minatar, total_frames=5_000))
    assert capsys.readouterr().err == (
        "warning: total_frames=5,000 is 5,000 agent steps; the first update comes after 5,001 (min_replay_size + "
        "update_period): the learner will not update\n"
    )
    agent_lib.warn_if_never_learns(dataclasses.replace(minatar, total_frames=5_001))
    assert capsys.readouterr().err == ""
    atari = config_lib.PRESETS["atari_ddqn"]  # After 50,000 + 4 agent steps of 4 frames.
    agent_lib.warn_if_never_learns(dataclasses.replace(atari, total_frames=200_012))
    assert "total_frames=200,012 is 50,003 agent steps; the first update comes after 50,004" in capsys.readouterr().err
    agent_lib.warn_if_never_learns(dataclasses.replace(atari, total_frames=200_016))
    assert capsys.readouterr().err == ""


LIMITER_EDGE = """
import dataclasses, sys
import reverb
from common.reverb import server as reverb_server
from per import agent as agent_lib, config as config_lib

config = dataclasses.replace(config_lib.PRESETS["toy"], min_replay_size=100, replay_capacity=2_000)
server = reverb_server.make_server([agent_lib.replay_table(config)])
client = reverb.Client(f"localhost:{server.port}")
agent = agent_lib.DqnAgent(config, client)
agent.start()


def limiter():
    return client.server_info()[agent_lib.REPLAY_TABLE].rate_limiter_info


def diff():
    info = limiter()
    return info.insert_stats.completed * info.samples_per_insert - info.sample_stats.completed


act = config.update_period * config.samples_per_insert  # Samples one act() allows.
while diff() + act <= limiter().max_diff:  # Actors ahead, to the edge.
    agent.act()
    agent.replay.flush()
if sys.argv[1] == "learner_ahead":
    while diff() - config.batch_size >= limiter().min_diff:
        agent.replay.sample(config.batch_size, 1.0)
edge = diff()
agent.start()  # As a resume in one process does, after the checkpoint's restore.
for _ in range(20):
    agent.step()
agent.replay.flush()  # The limiter counts flushed inserts only.
centre = (limiter().max_diff + limiter().min_diff) / 2
print(edge - centre, diff() - centre, int(agent.learner.steps))
"""


@pytest.mark.parametrize("edge", ["actors_ahead", "learner_ahead"])
def test_one_process_resumed_at_a_rate_limiter_edge_that_actors_left_goes_on(edge):
    """A sitting with actor processes leaves the limiter at an edge; resumed in one process, the loop's own
    insert (or draw) waited for ever on the draw (or insert) that only it makes (seen: a hang after --actors)."""
    result = subprocess.run(
        [sys.executable, "-c", LIMITER_EDGE, edge], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parent.parent)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    edge_off, off, updates = map(float, result.stdout.split()[-3:])
    batch = TOY.batch_size
    assert abs(edge_off) > 2 * batch  # The scenario reached an edge beyond the loop's own drift.
    assert abs(off) <= 2 * batch  # Back near the centre after 20 steps.
    assert updates == (20 if edge == "actors_ahead" else 20 - round(-edge_off / batch))
