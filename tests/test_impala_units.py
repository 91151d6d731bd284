"""IMPALA's parts: unroll writing on a real Reverb server, learner maths, networks, config."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import reverb
import tensorflow as tf
from scripted_envs import ScriptedBatchEnv
from test_vtrace import n_step_returns, reference_vtrace

from common import envs
from common.errors import UsageError
from common.reverb import datasets, tables
from common.reverb import server as reverb_server
from common.reverb import variables as reverb_variables
from impala import agent, losses, networks, trajectories
from impala.actor import Actor
from impala.config import PRESETS
from impala.learner import Learner
from impala.losses import clip_rewards, entropy

TOY = PRESETS["toy"]
TOY_SPACE = gym.spaces.Box(0, 1, (10, 5, 1), np.uint8)  # Catch's board.


@pytest.fixture
def server():
    server = reverb_server.make_server([tables.queue(trajectories.QUEUE_TABLE, 32)])
    yield server
    server.stop()


def test_unrolls_overlap_by_one_step_and_keep_every_reward(server):
    client = reverb.Client(f"localhost:{server.port}")
    T, N = 3, 2
    spec = trajectories.step_spec((2,), tf.float32, 4)
    writer = trajectories.unroll_adder(client, spec, N, T)
    for t in range(7):  # Two unrolls: steps 0..3 and 3..6.
        writer.append({
            "observation": np.full((N, 2), t, np.float32) + np.arange(N)[:, None] * 100,
            "first": np.array([t == 0] * N), "action": np.full(N, t, np.int32),
            "behaviour_logits": np.zeros((N, 4), np.float32), "reward": np.full(N, 10.0 + t, np.float32),
            "terminal": np.array([t == 2] * N), "episode_return": np.full(N, np.nan if t != 2 else 33.0, np.float32),
            "episode_length": np.full(N, 3 if t == 2 else 0, np.int32),
        })  # fmt: skip
    writer.close()
    assert client.server_info()[trajectories.QUEUE_TABLE].current_size == 2 * N
    batch = next(iter(datasets.dataset(f"localhost:{server.port}", trajectories.QUEUE_TABLE, spec, T + 1, 2 * N)))
    actions = sorted(map(tuple, batch["action"].numpy().tolist()))
    assert actions == [(0, 1, 2, 3)] * N + [(3, 4, 5, 6)] * N
    # Each env's unroll holds only that env's observations.
    for obs in batch["observation"].numpy():
        assert len(set((obs[:, 0] // 100).tolist())) == 1
    # Steps 0..T-1 of all unrolls together cover every reward exactly once.
    rewards = sorted(batch["reward"].numpy()[:, :-1].ravel().tolist())
    assert rewards == sorted([10.0 + t for t in range(6)] * N)
    episodes = trajectories.finished_episodes({k: batch[k].numpy() for k in ("episode_return", "episode_length")})
    assert episodes == [(33.0, 3)] * N  # Counted once, not again as the overlap step.


def test_reward_clipping():
    r = tf.constant([-5.0, -0.5, 0.0, 0.5, 5.0])
    np.testing.assert_allclose(clip_rewards(r, "abs_one"), [-1, -0.5, 0, 0.5, 1])
    expected = [0.3 * np.tanh(-5), 0.3 * np.tanh(-0.5), 0, 5 * np.tanh(0.5), 5 * np.tanh(5)]
    np.testing.assert_allclose(clip_rewards(r, "dmlab_asymmetric"), expected, rtol=1e-6)
    np.testing.assert_allclose(clip_rewards(r, "none"), r)


def test_entropy_of_uniform_and_deterministic_policies():
    np.testing.assert_allclose(entropy(tf.zeros((1, 1, 4))), [[np.log(4)]], rtol=1e-6)
    assert float(entropy(tf.constant([[[0.0, -100.0]]]))[0, 0]) < 1e-6


def _batch(config, rng, num_actions=3):
    B, T1 = config.batch_size, config.unroll_length + 1
    return {
        "observation": tf.constant(rng.integers(0, 2, (B, T1, 10, 5, 1)), tf.uint8),
        "first": tf.constant(rng.random((B, T1)) < 0.1),
        "action": tf.constant(rng.integers(num_actions, size=(B, T1)), tf.int32),
        "behaviour_logits": tf.constant(rng.standard_normal((B, T1, num_actions)), tf.float32),
        "reward": tf.constant(rng.standard_normal((B, T1)), tf.float32),
        "terminal": tf.constant(rng.random((B, T1)) < 0.1),
    }


def _learner(config=TOY):
    # Seeded: from one unseeded initialisation in hundreds, 30 steps raised the baseline loss (CI at b5d0180).
    tf.random.set_seed(0)
    learner = Learner(config, networks.make(config, TOY_SPACE, 3))
    learner.build(_batch(config, np.random.default_rng(0)))
    return learner


def test_learning_rate_anneals_linearly_to_zero():
    learner = _learner()
    assert learner.learning_rate() == pytest.approx(TOY.learning_rate)
    learner.frames.assign(TOY.total_frames // 2)
    assert learner.learning_rate() == pytest.approx(TOY.learning_rate / 2)
    learner.frames.assign(2 * TOY.total_frames)
    assert learner.learning_rate() == 0.0


def test_learner_step_fits_a_fixed_batch_and_counts_frames():
    learner = _learner()
    batch = _batch(TOY, np.random.default_rng(1))
    first = learner.step(batch)
    for _ in range(30):
        last = learner.step(batch)
    assert last["baseline_loss"] < first["baseline_loss"]
    assert int(learner.steps) == 31
    assert int(learner.frames) == 31 * TOY.batch_size * TOY.unroll_length


@pytest.mark.parametrize("rho_bar, pg_rho_bar", [(1.0, 1.0), (2.0, 0.5)], ids=["levels_1", "levels_2_and_half"])
@pytest.mark.parametrize("correction", ["vtrace", "none", "epsilon", "one_step_is"])
def test_losses_match_the_papers_formulas(correction, rho_bar, pg_rho_bar):
    """pg, baseline and entropy terms of §4.2 from float64 references: V-trace (eq. 1), or Table 2's others.

    §5.2.2: no correction learns V from n-step returns and pi from r_s + gamma_s G_{s+1} - V(x_s);
    epsilon adds 1e-6 to pi(a) inside the log (too small to tell apart here: its targets are checked);
    1-step IS learns V as no correction and multiplies the advantage by min(rho-bar-pg, rho_s). The config's
    truncation levels reach each in its place (rho-bar: V-trace's v_s; rho-bar-pg: the policy gradient's).
    """
    config = dataclasses.replace(
        TOY, batch_size=4, unroll_length=5, reward_clipping="abs_one", correction=correction,
        clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar,
    )  # fmt: skip
    learner = _learner(config)
    batch = _batch(config, np.random.default_rng(2))
    b = {k: np.swapaxes(v.numpy(), 0, 1) for k, v in batch.items()}  # [T + 1, B, ...]
    outputs, _ = learner.network.unroll(tf.constant(b["observation"]), tf.constant(b["first"]), ())
    logits, values = outputs.policy_logits.numpy().astype(np.float64), outputs.baseline.numpy().astype(np.float64)
    metrics = learner.step(batch)  # The metrics are those of the parameters before the update.

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    actions = b["action"][:-1]
    log_pi = np.take_along_axis(log_softmax(logits[:-1]), actions[..., None], -1)[..., 0]
    log_mu = np.take_along_axis(log_softmax(b["behaviour_logits"][:-1]), actions[..., None], -1)[..., 0]
    discounts = config.discount * (1.0 - b["terminal"][:-1])
    rewards = np.clip(b["reward"][:-1], -1.0, 1.0)
    rhos = np.exp(log_pi - log_mu)
    assert (rhos > 1).any() and (rhos < 1).any()  # Not vacuous: the levels clip some weights and not others.
    vtrace_vs, vtrace_advantages = reference_vtrace(
        log_pi - log_mu, discounts, rewards, values[:-1], values[-1], rho_bar=rho_bar, pg_rho_bar=pg_rho_bar
    )
    if correction == "vtrace":
        vs, advantages = vtrace_vs, vtrace_advantages
    else:
        vs = n_step_returns(discounts, rewards, values[-1])
        assert np.abs(vs - vtrace_vs).max() > 1e-3  # Not vacuous: on this batch the targets differ from V-trace's.
        advantages = rewards + discounts * np.concatenate([vs[1:], values[-1:]]) - values[:-1]
        if correction == "one_step_is":
            advantages *= np.minimum(pg_rho_bar, rhos)
    pg_log_pi = np.log(np.exp(log_pi) + 1e-6) if correction == "epsilon" else log_pi
    probs = np.exp(log_softmax(logits[:-1]))
    entropies = -(probs * log_softmax(logits[:-1])).sum(-1)
    expected = {
        "pg_loss": np.sum(-pg_log_pi * advantages),
        "baseline_loss": np.sum(0.5 * (vs - values[:-1]) ** 2),
        "entropy": np.mean(entropies),
        "mean_rho": np.mean(rhos),
    }
    expected["loss"] = (
        expected["pg_loss"] + config.baseline_cost * expected["baseline_loss"]
        - config.entropy_cost * np.sum(entropies)
    )  # fmt: skip
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-5), name


@pytest.mark.parametrize("anneal, share", [(True, 0.5), (False, 1.0)])
def test_a_step_applies_the_scheduled_learning_rate(anneal, share):
    """Halfway through the budget: App. G's annealed rate is half the initial one, LASER §5.1's constant one whole."""
    config = dataclasses.replace(TOY, anneal_learning_rate=anneal)
    learner = _learner(config)
    learner.frames.assign(config.total_frames // 2)
    metrics = learner.step(_batch(config, np.random.default_rng(1)))
    assert metrics["learning_rate"] == pytest.approx(share * config.learning_rate, rel=1e-6)


def test_a_step_counts_its_batchs_env_frames():
    """B unrolls of T steps at Atari's action repeat of 4 are 4 B T frames: the unit of the budget and the schedule."""
    config = dataclasses.replace(TOY, env="atari:pong")
    learner = _learner(config)
    learner.step(_batch(config, np.random.default_rng(1)))
    assert learner.frame_count == 4 * config.batch_size * config.unroll_length


def test_the_learner_passes_the_configs_settings_to_the_loss_and_the_optimizer(monkeypatch):
    """Every field the loss, the reward clipping and RMSProp take reaches them (each here off its default)."""
    config = dataclasses.replace(
        TOY, entropy_cost=0.02, baseline_cost=0.25, reward_clipping="dmlab_asymmetric", loss_reduction="mean",
        clip_rho_threshold=2.0, clip_pg_rho_threshold=3.0, rmsprop_decay=0.8, rmsprop_epsilon=0.1, rmsprop_momentum=0.5,
    )  # fmt: skip
    seen, modes = [], []
    loss, clip = losses.vtrace_actor_critic_loss, losses.clip_rewards
    monkeypatch.setattr(losses, "vtrace_actor_critic_loss", lambda *args, **kw: seen.append(kw) or loss(*args, **kw))
    monkeypatch.setattr(losses, "clip_rewards", lambda rewards, mode: modes.append(mode) or clip(rewards, mode))
    learner = _learner(config)
    learner.step(_batch(config, np.random.default_rng(1)))
    expected = {
        "baseline_cost": 0.25, "entropy_cost": 0.02, "reduction": "mean", "correction": "vtrace",
        "clip_rho_threshold": 2.0, "clip_pg_rho_threshold": 3.0,
    }  # fmt: skip
    assert {name: seen[-1][name] for name in expected} == expected and set(modes) == {"dmlab_asymmetric"}
    optimizer = learner.optimizer
    assert (optimizer.decay, optimizer.epsilon, optimizer.momentum) == (0.8, 0.1, 0.5)


def test_gradients_are_clipped_to_max_grad_norm():
    """App. G's global-norm clip: the first RMSProp step is the clipped gradient's.

    TF1's first step, per element, is lr g / sqrt(decay + (1 - decay) g^2 + epsilon), the mean square
    starting at 1; at momentum 0 the optimizer keeps it in `mom`. A gradient clipped to norm 1e-6 makes
    the step's norm lr 1e-6 / sqrt(decay + epsilon) (g^2 ~ 1e-12 drops out). It is read off `mom`:
    steps of about 1e-10 per element round away in float32 parameters of about 0.1.
    """
    batch = _batch(TOY, np.random.default_rng(4))
    learners = [_learner(dataclasses.replace(TOY, max_grad_norm=norm)) for norm in (1e-6, 0.0)]
    for a, b in zip(*(learner.network.variables for learner in learners)):
        b.assign(a)
    steps = []
    for learner in learners:
        metrics = learner.step(batch)
        assert metrics["gradient_norm"] > 1.0  # The norm before the clip.
        assert learner.optimizer.momentum == 0.0
        steps.append(float(tf.linalg.global_norm(learner.optimizer.mom)))
    clipped, unclipped = steps
    optimizer = learners[0].optimizer
    expected = float(metrics["learning_rate"]) * 1e-6 / np.sqrt(optimizer.decay + optimizer.epsilon)
    assert clipped == pytest.approx(expected, rel=1e-4)
    assert unclipped > 1e3 * clipped


def test_xla_modes_make_the_same_update():
    """Network under XLA or TF's graph executor: the same step to float32 precision."""
    batch = _batch(TOY, np.random.default_rng(3))
    learners = [_learner(dataclasses.replace(TOY, xla=mode)) for mode in ("all", "losses")]
    for a, b in zip(*(learner.network.variables for learner in learners)):
        b.assign(a)
    metrics = [learner.step(batch) for learner in learners]
    assert metrics[0]["loss"] == pytest.approx(metrics[1]["loss"], rel=1e-5)
    for a, b in zip(*(learner.network.variables for learner in learners)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_checkpoint_round_trips_network_optimizer_and_counters(tmp_path):
    learner = _learner()
    for seed in range(3):
        learner.step(_batch(TOY, np.random.default_rng(seed)))
    path = tf.train.Checkpoint(learner=learner).save(str(tmp_path / "ckpt"))
    restored = _learner()
    tf.train.Checkpoint(learner=restored).restore(path).assert_existing_objects_matched()
    for a, b in zip(learner.variables, restored.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(restored.steps) == 3 and int(restored.optimizer.iterations) == 3
    assert any("ms" in v.name for v in restored.variables)


def test_lstm_state_resets_at_episode_starts():
    config = dataclasses.replace(TOY, use_lstm=True, lstm_size=16)
    network = networks.make(config, TOY_SPACE, 3)
    rng = np.random.default_rng(0)
    observations = tf.constant(rng.integers(0, 2, (8, 2, 10, 5, 1)), tf.uint8)
    first = np.zeros((8, 2), bool)
    first[5] = True  # A new episode starts at step 5.
    warm_state = tf.nest.map_structure(lambda s: s + 0.5, network.initial_state(2))
    whole, _ = network.unroll(observations, tf.constant(first), warm_state)
    tail, _ = network.unroll(observations[5:], tf.constant(first[5:]), network.initial_state(2))
    np.testing.assert_allclose(whole.policy_logits[5:], tail.policy_logits, rtol=1e-5, atol=1e-6)
    # Without the reset flag the carried state changes the outputs.
    no_reset, _ = network.unroll(observations, tf.zeros((8, 2), tf.bool), warm_state)
    assert not np.allclose(no_reset.policy_logits[5:], tail.policy_logits, atol=1e-4)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"batch_size": 64, "queue_size": 64}, "queue_size=64 must exceed batch_size=64"),
        # Past a Reverb table's C int: a TypeError from Reverb's bindings before (a new user's trial).
        ({"queue_size": 2**31}, "queue_size=2147483648: must be at most 2,147,483,647 unrolls"),
        ({"unroll_length": 0}, "unroll_length=0: must be >= 1"),
        ({"num_actors": 0}, "num_actors=0: must be >= 1"),
        ({"publish_every": 0}, "publish_every=0: must be >= 1"),
        # A new user's trial: lstm_size=0 ended in Sonnet's ZeroDivisionError, -5 in TF's InvalidArgumentError.
        ({"use_lstm": True, "lstm_size": 0}, "lstm_size=0: must be >= 1"),
        ({"learning_rate": 0.0}, r"learning_rate=0.0: must be > 0$"),
        ({"max_grad_norm": -1.0}, r"max_grad_norm=-1.0: must be >= 0 \(0: no clipping\)"),
        ({"entropy_cost": -1.0}, r"entropy_cost=-1.0: must be >= 0$"),
        ({"baseline_cost": -0.5}, r"baseline_cost=-0.5: must be >= 0$"),
        ({"clip_rho_threshold": 0.0}, "clip_rho_threshold=0.0: must be > 0, or None for no clipping"),
        ({"clip_rho_threshold": 0.5}, r"clip_rho_threshold=0.5: must be >= 1 or None \(IMPALA §4.1: rho_bar >= c_bar"),
        ({"clip_pg_rho_threshold": -1.0}, "clip_pg_rho_threshold=-1.0: must be > 0, or None"),
        ({"network": "resnet50"}, "unknown network 'resnet50'; accepted: shallow, deep"),
        ({"correction": "retrace"}, "accepted: vtrace, none, epsilon, one_step_is"),
        ({"xla": "gpu"}, "unknown xla 'gpu'; accepted: auto, all, losses"),
        ({"env": "atari:pongg"}, "unknown atari name"),
        ({"env_options": (("colour", True),)}, "unknown toy option 'colour'"),
    ],
)
def test_impossible_configs_explain_themselves(overrides, message):
    with pytest.raises(UsageError, match=message):
        dataclasses.replace(TOY, **overrides)


def test_policy_lag_is_learner_steps_since_the_unrolls_parameters():
    lag = trajectories.PolicyLag()
    assert lag.recent() == {} and lag.summary() == {}
    lag.add(10, np.array([[7, 7, 9], [10, 10, 10]]))  # Step 0's version acted the learned steps.
    lag.add(12, np.array([[12, 12, 12], [6, 6, 6]]))
    assert lag.recent() == {"policy_lag": 2.25, "policy_lag_max": 6}  # (3 + 0 + 0 + 6) / 4.
    assert lag.recent() == {}  # Only the unrolls since the last call.
    lag.add(13, np.array([[13, 13, 13]]))
    assert lag.recent() == {"policy_lag": 0.0, "policy_lag_max": 0}
    assert lag.summary() == {"policy_lag_mean": 1.8, "policy_lag_max": 6}  # All five unrolls.


@pytest.fixture
def impala_server():
    server = reverb_server.make_server([tables.queue(trajectories.QUEUE_TABLE, 64), tables.variables()])
    yield server
    server.stop()


def test_actor_records_the_version_published_with_its_parameters(impala_server):
    client = reverb.Client(f"localhost:{impala_server.port}")
    network, spec = agent.build_agent(TOY)
    reverb_variables.publish(client, network.trainable_variables, extras=[np.asarray(7, np.int64)])
    env = envs.make_batched(TOY.env, TOY.envs_per_actor, seed=1)
    actor = Actor(network, spec, env, client, TOY.unroll_length, seed=1, jit=False)
    actor.run(num_unrolls=1)
    actor.close()
    data = datasets.dataset(f"localhost:{impala_server.port}", trajectories.QUEUE_TABLE, spec, TOY.unroll_length + 1,
                            TOY.envs_per_actor)  # fmt: skip
    batch = next(iter(data))
    np.testing.assert_array_equal(batch["policy_version"].numpy(), 7)


def unroll(server, network, spec, env, length: int) -> dict[str, np.ndarray]:
    """One unroll of `length` steps (and the bootstrap step) that an actor acting with `network`'s parameters,
    published first, wrote from its first env."""
    client = reverb.Client(f"localhost:{server.port}")
    reverb_variables.publish(client, network.trainable_variables)
    actor = Actor(network, spec, env, client, length, seed=1, jit=False)
    actor.run(num_unrolls=1)
    actor.close()
    data = datasets.dataset(f"localhost:{server.port}", trajectories.QUEUE_TABLE, spec, length + 1, 1)
    return {name: value.numpy()[0] for name, value in next(iter(data)).items()}


def test_life_losses_are_terminals_and_episodes_are_games(impala_server):
    """A lost life (Atari's training terminal) starts a new unroll segment, but the episode logged is the game:
    its return and length run on to the game over, or to the time limit's truncation (also a terminal)."""
    network, spec = agent.build_agent(TOY)
    env = ScriptedBatchEnv(spec["observation"].shape, network.num_actions)
    steps = unroll(impala_server, network, spec, env, length=7)
    F, T = False, True
    assert steps["terminal"].tolist() == [F, T, F, T, F, F, T, F]
    assert steps["first"].tolist() == [T, F, T, F, T, F, F, T]  # The step after each terminal.
    np.testing.assert_array_equal(steps["episode_return"], [np.nan] * 3 + [4.0] + [np.nan] * 2 + [3.0, np.nan])
    assert steps["episode_length"].tolist() == [0, 0, 0, 4, 0, 0, 3, 0]


def test_the_actor_draws_each_steps_action_afresh(impala_server):
    """Uniform logits (every weight 0): 31 steps draw all 3 of Catch's actions, not one action over and over."""
    network, spec = agent.build_agent(TOY)
    for variable in network.trainable_variables:
        variable.assign(tf.zeros_like(variable))
    steps = unroll(impala_server, network, spec, envs.make_batched(TOY.env, 1, seed=1), length=30)
    assert set(steps["action"].tolist()) == {0, 1, 2}  # Seeded; a miss would be about 3 (2/3)^31, 1e-5.


def test_an_lstm_learner_with_the_actors_parameters_sees_its_unrolls_on_policy(impala_server):
    """The stored LSTM state and mu's logits, fed to the learner with the same theta: every rho is 1.

    The learner starts each unroll from its stored `core_state` and resets it at episode starts
    (T = 4 does not divide Catch's 9-step games), so its pi is the actor's mu at every step.
    """
    config = dataclasses.replace(TOY, use_lstm=True, lstm_size=8, unroll_length=4, envs_per_actor=2, batch_size=4)
    client = reverb.Client(f"localhost:{impala_server.port}")
    network, spec = agent.build_agent(config)
    for i, variable in enumerate(network.trainable_variables):  # Far from the initial weights: states matter.
        variable.assign(tf.random.stateless_normal(variable.shape, [5, i]))
    reverb_variables.publish(client, network.trainable_variables)
    actor = Actor(network, spec, envs.make_batched(config.env, 2, seed=2), client, 4, seed=2, jit=False)
    actor.run(num_unrolls=3)  # 2 envs x 3 unrolls: more than a batch.
    actor.close()
    address = f"localhost:{impala_server.port}"
    batch = next(iter(datasets.dataset(address, trajectories.QUEUE_TABLE, spec, 5, config.batch_size)))
    assert np.abs(batch["core_state"][0].numpy()[:, 0]).max() > 0.01  # Not vacuous: unrolls start mid-game.
    learner = Learner(config, network)
    learner.build(batch)
    assert learner.step(batch)["mean_rho"] == pytest.approx(1.0, abs=1e-5)


def test_learner_publishes_every_k_steps_with_its_step_count_and_reports_the_lag(impala_server):
    config = dataclasses.replace(TOY, publish_every=2)
    address = f"localhost:{impala_server.port}"
    client = reverb.Client(address)
    learner = agent.QueueLearner(config, client, address)
    learner.start()
    rng = np.random.default_rng(0)
    B, T1 = config.batch_size, config.unroll_length + 1
    batches = []
    for version in (0, 0, 2):  # What actors would have fetched before each step.
        batch = _batch(config, rng)
        batch["episode_return"] = tf.fill((B, T1), np.nan)
        batch["episode_length"] = tf.zeros((B, T1), tf.int32)
        batch["policy_version"] = tf.fill((B, T1), tf.constant(version, tf.int64))
        batches.append(batch)
    learner._batches = iter(batches)
    published = []
    for _ in batches:
        learner.step()
        published.append(int(reverb_variables.fetch(client)[-1]))
    assert published == [0, 2, 2]  # After steps 1, 2, 3: a publish at step 2 only.
    assert learner.progress()["policy_lag"] == 0.33  # Lags 0, 1, 0, to 2 decimals.
    assert learner.summary() == {"policy_lag_mean": 0.333, "policy_lag_max": 1}
