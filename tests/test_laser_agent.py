"""LASER's parts: the loss of Algorithm 1, the config, and the mixed batch on a real Reverb server.

The loss is compared with a float64 reading of the formulas (eq. 8 as an O(T^2)
sum, §4.3's beta_KL, the terms of IMPALA §4.2 with LASER's masks);
`test_planted_bugs_fail_the_check` runs the same check on plausible wrong
implementations, so the comparison cannot pass vacuously. The batches are read
from a live server that actors' writers filled with unrolls numbered by their
observations, so queue order and the fresh/replayed split are visible.

The prioritized alternative (App. A.2): the IS-weighted loss and the per-unroll
critic loss against the same float64 reference, the IS weights and normalised
priorities against PER's formulas written out, and, on a live server, the
priorities the learner writes for exactly the keys it sampled.
"""

import dataclasses
import math
import types

import gymnasium as gym
import numpy as np
import pytest
import reverb
import tensorflow as tf

from common.errors import UsageError
from common.reverb import server as reverb_server
from common.reverb import variables as reverb_variables
from impala import losses as impala_losses
from impala import networks, trajectories
from impala import vtrace as impala_vtrace
from laser import agent, losses, priorities, trust_region
from laser.config import PAPER_REPLAY_FRACTIONS, PRESETS
from laser.learner import Learner

TOY = PRESETS["toy_laser"]
T, B, A = 6, 5, 3
NUM_ONLINE = 2
THRESHOLD = 0.3
# (t, b) of steps whose behaviour is far from pi: in online and replayed unrolls,
# mid-unroll (so the cut of the trace matters) and at t = 0.
FAR = [(2, 0), (4, 1), (3, 2), (0, 3), (1, 4), (4, 4)]
# A step where mu is far from pi but pi~_mu = pi: KL(pi || pi~) = 0 < b <= KL(pi || mu),
# accepted by §4.3's criterion and rejected by a KL to mu itself.
IMPLIED_EQUALS_PI = (3, 3)
# IS weights w_i of the unrolls: 1 for the two online ones, below 1 for replayed ones.
WEIGHTS = np.array([1.0, 1.0, 0.25, 1.0, 0.6])


# Float64 reference. -----------------------------------------------------------


def log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def reference_kl(target_logits, behaviour_logits, rho_bar=1.0):
    """§4.3: KL(pi || pi~_mu), pi~_mu(a) = min(rho_bar mu(a), pi(a)) / sum_b min(rho_bar mu(b), pi(b)) (eq. 9)."""
    pi, mu = np.exp(log_softmax(target_logits)), np.exp(log_softmax(behaviour_logits))
    implied = np.minimum(rho_bar * mu, pi)
    implied /= implied.sum(-1, keepdims=True)
    return np.sum(pi * (np.log(pi) - np.log(implied)), -1)


def reference_targets(log_rhos, discounts, rewards, values, bootstrap_value, lambdas, rho_bar=1.0, c_bar=1.0):
    """Eq. (8) as the O(T^2) sum, not a recursion:

    v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i lambda_i c_i) lambda_t rho_t delta_t,
    delta_t = r_t + gamma_t V(x_{t+1}) - V(x_t).
    """
    steps, batch = log_rhos.shape
    rhos, cs = np.minimum(rho_bar, np.exp(log_rhos)), np.minimum(c_bar, np.exp(log_rhos))
    next_values = np.concatenate([values[1:], bootstrap_value[None]])
    vs = np.zeros((steps, batch))
    for b in range(batch):
        for s in range(steps):
            total = values[s, b]
            for t in range(s, steps):
                trace = np.prod([discounts[i, b] * lambdas[i, b] * cs[i, b] for i in range(s, t)])
                delta = rewards[t, b] + discounts[t, b] * next_values[t, b] - values[t, b]
                total += trace * lambdas[t, b] * rhos[t, b] * delta
            vs[s, b] = total
    return vs


def reference_loss(
    x, num_online, threshold, baseline_cost, entropy_cost, cut_traces=True, online_entropy=True, weights=None,
    rho_bar=1.0, pg_rho_bar=1.0,
):  # fmt: skip
    """Algorithm 1's loss, summed: pg and baseline on accepted steps, entropy on the online unrolls.

    With `weights` [B] (App. A.2), unroll i's pg and baseline terms are scaled by w_i; the
    critic loss of unroll i is 1/T sum_s mask 1/2 (v_s - V(x_s))^2, unweighted. rho_bar
    truncates rho in eq. 8 and defines pi~_mu (eq. 9); pg_rho_bar truncates the policy
    gradient's rho (IMPALA eq. 4).
    """
    log_pi_all, log_mu_all = log_softmax(x["target_logits"]), log_softmax(x["behaviour_logits"])
    actions = x["actions"][..., None]
    log_pi = np.take_along_axis(log_pi_all, actions, -1)[..., 0]
    log_rhos = log_pi - np.take_along_axis(log_mu_all, actions, -1)[..., 0]
    kl = reference_kl(x["target_logits"], x["behaviour_logits"], rho_bar)
    mask = (kl < threshold).astype(np.float64) if threshold is not None else np.ones_like(kl)
    lambdas = mask if cut_traces else np.ones_like(mask)
    values, bootstrap = x["values"], x["bootstrap_value"]
    vs = reference_targets(log_rhos, x["discounts"], x["rewards"], values, bootstrap, lambdas, rho_bar)
    next_vs = np.concatenate([vs[1:], bootstrap[None]])
    pg_rho = np.minimum(pg_rho_bar, np.exp(log_rhos))
    weighted = mask * (1.0 if weights is None else np.asarray(weights, np.float64)[None])
    pg = -np.sum(weighted * pg_rho * log_pi * (x["rewards"] + x["discounts"] * next_vs - values))
    squared_errors = mask * 0.5 * (vs - values) ** 2
    baseline = np.sum(weighted * 0.5 * (vs - values) ** 2)
    online = np.zeros_like(mask)
    online[:, :num_online] = 1.0
    entropy_mask = online if online_entropy else np.ones_like(online)
    entropies = -np.sum(np.exp(log_pi_all) * log_pi_all, -1)
    replayed = 1.0 - online
    return {
        "loss": pg + baseline_cost * baseline - entropy_cost * np.sum(entropies * entropy_mask),
        "pg_loss": pg,
        "baseline_loss": baseline,
        "entropy": np.sum(entropies * entropy_mask) / entropy_mask.sum(),
        "mean_rho": np.mean(np.exp(log_rhos)),
        "accepted": mask.mean(),
        "replay_accepted": np.sum(mask * replayed) / max(replayed.sum(), 1.0),
        "mean_kl": kl.mean(),
        "unroll_critic_loss": squared_errors.mean(axis=0),
    }


def loss_inputs(seed=0):
    """[T, B] inputs; behaviour near pi except at FAR (large KL) and IMPLIED_EQUALS_PI."""
    rng = np.random.default_rng(seed)
    target = rng.standard_normal((T, B, A))
    behaviour = target + 0.3 * rng.standard_normal((T, B, A))
    for t, b in FAR:
        target[t, b], behaviour[t, b] = [4.0, 0.0, 0.0], [-4.0, 0.0, 0.0]
    t, b = IMPLIED_EQUALS_PI
    target[t, b], behaviour[t, b] = [0.0, 0.0, -30.0], [0.0, 0.0, 0.0]
    discounts = np.full((T, B), 0.9)
    discounts[1, 1] = discounts[4, 2] = 0.0  # Episode ends inside the unrolls.
    return {
        "behaviour_logits": behaviour,
        "target_logits": target,
        "actions": rng.integers(A, size=(T, B)),
        "discounts": discounts,
        "rewards": rng.standard_normal((T, B)),
        "values": rng.standard_normal((T, B)),
        "bootstrap_value": rng.standard_normal(B),
    }


def call(fn, x, jit=False, **kwargs):
    tensors = {k: tf.constant(v, tf.int32 if k == "actions" else tf.float32) for k, v in x.items()}
    if jit:  # As the learner runs it.
        return tf.function(lambda t: fn(**t, **kwargs), jit_compile=True)(tensors)
    return fn(**tensors, **kwargs)


LOSS_KWARGS = {"num_online": NUM_ONLINE, "baseline_cost": 0.5, "entropy_cost": 0.01}


def check_loss(x, jit=False, weights=None, threshold=THRESHOLD, **expected_kwargs):
    """laser_loss(b = threshold, IS weights) against the reference, every output."""
    given = None if weights is None else tf.constant(weights, tf.float32)
    out = call(losses.laser_loss, x, jit, trust_region_threshold=threshold, importance_weights=given, **LOSS_KWARGS)
    expected = reference_loss(x, NUM_ONLINE, threshold, 0.5, 0.01, weights=weights, **expected_kwargs)
    for name, value in expected.items():
        np.testing.assert_allclose(getattr(out, name).numpy(), value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_the_inputs_reject_some_steps_of_both_kinds_of_unroll():
    x = loss_inputs()
    kl = reference_kl(x["target_logits"], x["behaviour_logits"])
    rejected = kl >= THRESHOLD
    assert sorted(zip(*np.nonzero(rejected))) == sorted(FAR)
    assert rejected[:, :NUM_ONLINE].any() and rejected[:, NUM_ONLINE:].any() and not rejected.all()
    assert np.min(np.abs(kl - THRESHOLD)) > 0.05  # No step on the edge of float32 rounding.
    # The implied-policy step: KL(pi || mu) would reject it, KL(pi || pi~_mu) does not.
    t, b = IMPLIED_EQUALS_PI
    log_pi, log_mu = log_softmax(x["target_logits"][t, b]), log_softmax(x["behaviour_logits"][t, b])
    assert kl[t, b] < 1e-6 and np.sum(np.exp(log_pi) * (log_pi - log_mu)) > THRESHOLD


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("weights", [None, WEIGHTS], ids=["uniform", "weighted"])
def test_loss_matches_algorithm_1_with_the_trust_region(jit, weights):
    check_loss(loss_inputs(), jit, weights)


@pytest.mark.parametrize("threshold", [THRESHOLD, None], ids=["trust_region", "vtrace"])
def test_loss_matches_algorithm_1_with_other_truncation_levels(threshold):
    """rho_bar 2 (App. Fig. 4 left's grid) in eq. 8 and eq. 9's pi~_mu, another level for the policy gradient;
    without the trust region (None), the two levels reach plain V-trace's targets."""
    x, rho_bar, pg_rho_bar = loss_inputs(), 2.0, 1.5
    # mu 2.5 times as far from pi: accepted steps with rho above 1.5 and above 2, so each level matters.
    x["behaviour_logits"] = x["target_logits"] + 2.5 * (x["behaviour_logits"] - x["target_logits"])
    kl = reference_kl(x["target_logits"], x["behaviour_logits"], rho_bar)
    assert 0 < np.mean(kl >= THRESHOLD) < 1 and np.min(np.abs(kl - THRESHOLD)) > 1e-3
    log_mu = np.take_along_axis(log_softmax(x["behaviour_logits"]), x["actions"][..., None], -1)[..., 0]
    rho = np.exp(np.take_along_axis(log_softmax(x["target_logits"]), x["actions"][..., None], -1)[..., 0] - log_mu)
    assert ((rho > pg_rho_bar) & (rho < rho_bar) & (kl < THRESHOLD)).any()
    assert ((rho > rho_bar) & (kl < THRESHOLD)).any()
    out = call(
        losses.laser_loss, x, trust_region_threshold=threshold, clip_rho_threshold=rho_bar,
        clip_pg_rho_threshold=pg_rho_bar, **LOSS_KWARGS,
    )  # fmt: skip
    expected = reference_loss(x, NUM_ONLINE, threshold, 0.5, 0.01, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar)
    for name, value in expected.items():
        np.testing.assert_allclose(getattr(out, name).numpy(), value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_step_whose_kl_equals_the_threshold_is_rejected(monkeypatch):
    """§4.2's lambda = 1[beta < b]: strictly below b is kept (KLs set exactly, here 0.25 = b and just below)."""
    kl = np.zeros((T, B), np.float32)
    kl[1, 0], kl[2, 3] = 0.25, np.nextafter(np.float32(0.25), np.float32(0))
    monkeypatch.setattr(losses.trust_region, "kl_to_implied", lambda *args: tf.constant(kl))
    out = call(losses.laser_loss, loss_inputs(), trust_region_threshold=0.25, **LOSS_KWARGS)
    assert float(out.accepted) == pytest.approx(1 - 1 / (T * B))


@pytest.mark.parametrize("threshold", [THRESHOLD, None], ids=["trust_region", "vtrace"])
def test_unit_importance_weights_leave_the_loss_unchanged(threshold):
    x = loss_inputs()
    unweighted = call(losses.laser_loss, x, trust_region_threshold=threshold, **LOSS_KWARGS)
    ones = call(losses.laser_loss, x, trust_region_threshold=threshold, importance_weights=tf.ones(B), **LOSS_KWARGS)
    for name, value in unweighted._asdict().items():
        np.testing.assert_array_equal(getattr(ones, name).numpy(), value.numpy(), err_msg=name)  # Bit for bit.


def test_weighted_loss_without_the_trust_region_matches_the_reference():
    check_loss(loss_inputs(), weights=WEIGHTS, threshold=None)


def test_importance_weights_must_be_one_per_unroll():
    with pytest.raises(ValueError, match=r"must be \[B\] = \[5\]"):
        call(losses.laser_loss, loss_inputs(), trust_region_threshold=None, importance_weights=tf.ones([T, B]),
             **LOSS_KWARGS)  # fmt: skip


def reference_semi_gradient(x, num_online, threshold, baseline_cost, entropy_cost, weights=None):
    """d loss / d (pi's logits, V) with the targets v_s and the advantages held fixed (IMPALA §4.2's semi-gradient).

    With m = lambda(s), w the unroll's IS weight, o 1 on online unrolls, rho^ = min(1, pi/mu),
    A_s = r_s + gamma_s v_{s+1} - V(x_s) and H the entropy of pi:
      d/dV(x_s) = -baseline_cost w m (v_s - V(x_s)),
      d/dz_s = -w m rho^ A_s (onehot(a_s) - pi) + entropy_cost o pi (log pi + H).
    """
    log_pi_all, log_mu_all = log_softmax(x["target_logits"]), log_softmax(x["behaviour_logits"])
    pi = np.exp(log_pi_all)
    onehot = np.eye(A)[x["actions"]]
    log_rhos = np.sum(onehot * (log_pi_all - log_mu_all), -1)
    mask = (reference_kl(x["target_logits"], x["behaviour_logits"]) < threshold).astype(np.float64)
    values, bootstrap = x["values"], x["bootstrap_value"]
    vs = reference_targets(log_rhos, x["discounts"], x["rewards"], values, bootstrap, mask)
    advantages = x["rewards"] + x["discounts"] * np.concatenate([vs[1:], bootstrap[None]]) - values
    weighted = mask * (1.0 if weights is None else np.asarray(weights, np.float64)[None])
    online = np.zeros_like(mask)
    online[:, :num_online] = 1.0
    entropy = -np.sum(pi * log_pi_all, -1, keepdims=True)
    d_logits = -(weighted * np.minimum(1.0, np.exp(log_rhos)) * advantages)[..., None] * (onehot - pi)
    d_logits += entropy_cost * online[..., None] * pi * (log_pi_all + entropy)
    return d_logits, -baseline_cost * weighted * (vs - values)


@pytest.mark.parametrize("weights", [None, WEIGHTS], ids=["uniform", "weighted"])
def test_the_gradient_is_the_semi_gradient_and_rejected_steps_add_none(weights):
    """The targets are constants (no gradient through v_s or the advantage, nor through beta_KL or the mask),
    so a rejected step adds nothing to the gradient but, on an online unroll, its entropy bonus's."""
    x = loss_inputs()
    tensors = {k: tf.constant(v, tf.int32 if k == "actions" else tf.float32) for k, v in x.items()}
    given = None if weights is None else tf.constant(weights, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([tensors["target_logits"], tensors["values"], tensors["behaviour_logits"]])
        out = losses.laser_loss(**tensors, trust_region_threshold=THRESHOLD, importance_weights=given, **LOSS_KWARGS)
    d_logits, d_values, d_behaviour = tape.gradient(
        out.loss, [tensors["target_logits"], tensors["values"], tensors["behaviour_logits"]]
    )
    expected_logits, expected_values = reference_semi_gradient(x, NUM_ONLINE, THRESHOLD, 0.5, 0.01, weights)
    np.testing.assert_allclose(d_logits.numpy(), expected_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_values.numpy(), expected_values, rtol=1e-4, atol=1e-6)
    assert d_behaviour is None  # mu is data.
    for t, b in FAR:
        assert d_values.numpy()[t, b] == 0.0
        if b >= NUM_ONLINE:  # A replayed unroll has no entropy bonus either.
            assert np.all(d_logits.numpy()[t, b] == 0.0)
    accepted = np.ones((T, B), bool)
    accepted[tuple(zip(*FAR))] = False
    assert np.mean(np.abs(d_values.numpy()[accepted]) > 1e-3) > 0.9  # Not a gradient that is zero everywhere.


def test_without_the_trust_region_it_is_impalas_loss_with_online_entropy():
    x = loss_inputs()
    out = call(losses.laser_loss, x, trust_region_threshold=None, **LOSS_KWARGS)
    online = losses.online_mask(T, NUM_ONLINE, B)
    expected = call(
        impala_losses.vtrace_actor_critic_loss, x, baseline_cost=0.5, entropy_cost=0.01, entropy_mask=online
    )
    for name, value in expected._asdict().items():
        assert float(getattr(out, name)) == pytest.approx(float(value), rel=1e-6, abs=1e-7), name
    assert float(out.accepted) == 1.0 and float(out.replay_accepted) == 1.0
    for correction in impala_vtrace.CORRECTIONS:  # Every IMPALA Table 2 correction, as IMPALA's loss computes it.
        corrected = call(losses.laser_loss, x, trust_region_threshold=None, **LOSS_KWARGS, correction=correction)
        impalas = call(
            impala_losses.vtrace_actor_critic_loss, x, baseline_cost=0.5, entropy_cost=0.01, entropy_mask=online,
            correction=correction,
        )  # fmt: skip
        for name, value in impalas._asdict().items():
            assert float(getattr(corrected, name)) == pytest.approx(float(value), rel=1e-6, abs=1e-7), correction
    # The reference agrees, and an infinite threshold (nothing rejected) takes the trust-region path to the same loss.
    reference = reference_loss(x, NUM_ONLINE, None, 0.5, 0.01)
    everything = call(losses.laser_loss, x, trust_region_threshold=math.inf, **LOSS_KWARGS)
    for name in ("loss", "pg_loss", "baseline_loss", "entropy"):
        assert float(getattr(out, name)) == pytest.approx(reference[name], rel=1e-4, abs=1e-5), name
        assert float(getattr(everything, name)) == pytest.approx(float(getattr(out, name)), rel=1e-5), name


def test_online_mask_marks_the_first_unrolls():
    np.testing.assert_array_equal(losses.online_mask(2, 3, 5).numpy(), [[1, 1, 1, 0, 0]] * 2)
    np.testing.assert_array_equal(losses.online_mask(2, 0, 3).numpy(), np.zeros((2, 3)))


def test_planted_bugs_fail_the_check(monkeypatch):
    x = loss_inputs()
    # The reference's own variants are told apart: the trace cut and the entropy's mask matter here.
    with pytest.raises(AssertionError):
        check_loss(x, cut_traces=False)
    with pytest.raises(AssertionError):
        check_loss(x, online_entropy=False)

    def planted(module, name, replacement):
        with monkeypatch.context() as patch:
            patch.setattr(module, name, replacement)
            with pytest.raises(AssertionError):
                check_loss(x)

    # Entropy over every unroll, replayed ones included.
    planted(losses, "online_mask", lambda steps, num_online, batch: tf.ones((steps, batch)))
    # The targets ignore the trust region: plain V-trace on the mixed batch.
    vtrace = trust_region.vtrace
    planted(trust_region, "vtrace", lambda *args: vtrace(*args[:5], tf.ones_like(args[5]), *args[6:]))

    # Algorithm 1's literal KL(pi || mu) instead of §4.3's KL(pi || pi~_mu).
    def kl_to_mu(target_logits, behaviour_logits, rho_bar):
        log_pi, log_mu = tf.nn.log_softmax(target_logits), tf.nn.log_softmax(behaviour_logits)
        return tf.reduce_sum(tf.exp(log_pi) * (log_pi - log_mu), -1)

    planted(trust_region, "kl_to_implied", kl_to_mu)
    check_loss(x)  # Unpatched again.

    # The IS weights ignored (App. A.2's prioritized loss without its correction).
    with monkeypatch.context() as patch:
        patch.setattr(losses, "weighted", lambda mask, weights: mask)
        with pytest.raises(AssertionError):
            check_loss(x, weights=WEIGHTS)
    check_loss(x, weights=WEIGHTS)  # Unpatched again.


# Config. ----------------------------------------------------------------------

# (replay_fraction, batch_size) -> (B_online, B_replay), by hand from round(B (1 - f)).
BATCHES = {
    (0.0, 8): (8, 0),
    (0.5, 8): (4, 4),
    (0.75, 8): (2, 6),
    (0.875, 8): (1, 7),
    (1.0, 8): (0, 8),
    (0.875, 16): (2, 14),
    (0.96, 128): (5, 123),  # §5.1's 96%: 0.96 of 8 would round to 0 online.
    (0.96, 64): (3, 61),  # 2.56 online: rounded, not truncated.
}


def laser_config(fraction, batch_size, **fields):
    fields = {"unroll_length": 2, "queue_size": 256, "replay_capacity": 2000, **fields}
    return dataclasses.replace(TOY, replay_fraction=fraction, batch_size=batch_size, **fields)


def test_every_paper_fraction_has_a_batch_size_here():
    assert {fraction for fraction, _ in BATCHES} == set(PAPER_REPLAY_FRACTIONS)


@pytest.mark.parametrize("fraction, batch_size", list(BATCHES))
def test_batch_composition(fraction, batch_size):
    config = laser_config(fraction, batch_size)
    online, replayed = BATCHES[fraction, batch_size]
    assert (config.online_batch_size, config.replay_batch_size) == (online, replayed)
    assert online == round(batch_size * (1 - fraction))
    assert config.dequeued_per_step == max(online, 1)


def test_the_atari_preset_holds_section_5_1s_values():
    """LASER §5.1: IMPALA's deep network at 4x the channels, discount 0.995, no clipping by norm, 19 steps,
    constant learning rates and entropy costs centred on IMPALA's, 96% replay."""
    preset = PRESETS["atari_laser"]
    section_5_1 = {
        "network": "deep_x4", "discount": 0.995, "max_grad_norm": 0.0, "unroll_length": 19, "batch_size": 128,
        "replay_fraction": 0.96, "learning_rate": 0.0006, "entropy_cost": 0.01, "anneal_learning_rate": False,
        "trust_region": True,
    }  # fmt: skip
    assert {name: getattr(preset, name) for name in section_5_1} == section_5_1
    assert dict(preset.env_options)["noop_max"] == 37  # App. D: up to 37 no-ops at reset.
    # The rest is IMPALA App. G's Atari setting (§5.1 builds on IMPALA), and 200M frames a game (Table 1).
    app_g = {
        "reward_clipping": "abs_one", "baseline_cost": 0.5, "rmsprop_decay": 0.99, "rmsprop_epsilon": 0.01,
        "rmsprop_momentum": 0.0, "total_frames": 200_000_000, "clip_rho_threshold": 1.0, "clip_pg_rho_threshold": 1.0,
    }  # fmt: skip
    assert {name: getattr(preset, name) for name in app_g} == app_g
    assert dict(preset.env_options)["terminal_on_life_loss"] is True
    # No Atari capacity in the paper: its DMLab 10M (§5.3), in observations; b = 0.3 is ours (the paper gives none).
    assert (preset.replay_capacity, preset.trust_region_threshold) == (10_000_000, 0.3)
    assert preset.replay_priority == "uniform"  # App. A.2: uniform replay for all the paper's investigations.


def test_presets_batches():
    assert (PRESETS["atari_laser"].online_batch_size, PRESETS["atari_laser"].replay_batch_size) == (5, 123)
    assert (PRESETS["minatar_laser"].online_batch_size, PRESETS["minatar_laser"].replay_batch_size) == (2, 14)
    assert (TOY.online_batch_size, TOY.replay_batch_size) == (2, 14)
    assert all(p.trust_region and p.correction == "vtrace" for p in PRESETS.values())


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"replay_fraction": -0.1}, "replay_fraction=-0.1: must be in [0, 1]"),
        ({"replay_fraction": 1.5}, "replay_fraction=1.5: must be in [0, 1]"),
        ({"trust_region_threshold": -1.0}, "trust_region_threshold=-1.0: must be > 0"),
        ({"trust_region_threshold": 0.0}, "trust_region_threshold=0.0: must be > 0"),
        ({"clip_rho_threshold": 0.5}, "clip_rho_threshold=0.5: must be >= 1 or None"),
        ({"replay_capacity": 13 * 9}, "hold 13 unroll(s) of unroll_length=9, fewer than a replay batch of 14"),
        ({"replay_capacity": 13 * 9}, "; give at least replay_capacity=126"),  # 14 unrolls of 9.
        ({"batch_size": 8, "replay_fraction": 0.96}, "rounds to 0 online and 8 replayed"),
        ({"replay_fraction": 0.02}, "rounds to 16 online and 0 replayed"),
        ({"correction": "none"}, "correction='none' with trust_region=True"),
        ({"correction": "epsilon"}, "use correction=vtrace or trust_region=False"),
        ({"min_replay_size": 30_000}, "min_replay_size=30000 exceeds replay_capacity=20000"),
        ({"min_replay_size": 65 * 9}, "exceed queue_size=64 unrolls"),
        ({"min_replay_size": -1}, "min_replay_size=-1: must be >= 0"),  # Was trained as 0, without a word.
        ({"replay_capacity": 10**11}, "replay_capacity=100000000000: must be at most 2,147,483,647 observations"),
        ({"replay_priority": "td_error"}, "unknown replay_priority 'td_error'; accepted: uniform, critic_loss"),
        ({"priority_exponent": -0.5}, "priority_exponent=-0.5: must be >= 0"),
        ({"importance_sampling_exponent": 1.5}, "importance_sampling_exponent=1.5: must be in [0, 1]"),
        ({"importance_sampling_exponent": -0.1}, "importance_sampling_exponent=-0.1: must be in [0, 1]"),
        ({"replay_priority": "critic_loss", "sweep_member": 0}, "replay_priority=critic_loss in a sweep"),
    ],
)
def test_impossible_configs_are_one_line_usage_errors(fields, message):
    with pytest.raises(UsageError) as error:
        dataclasses.replace(TOY, **fields)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_edge_configs_are_accepted():
    dataclasses.replace(TOY, replay_capacity=14 * 9)  # Exactly one replay batch.
    dataclasses.replace(TOY, min_replay_size=64 * 9)  # Exactly the queue.
    dataclasses.replace(TOY, trust_region=False, correction="none")
    dataclasses.replace(TOY, trust_region_threshold=1e-9)
    dataclasses.replace(TOY, clip_rho_threshold=1.0)  # rho_bar = c_bar.
    dataclasses.replace(TOY, clip_rho_threshold=None)  # No truncation, nothing rejected.
    dataclasses.replace(TOY, trust_region=False, correction="none", clip_rho_threshold=0.5)  # Unused.
    no_replay = dataclasses.replace(TOY, replay_fraction=0.0, replay_capacity=1)  # No replay: capacity unused.
    assert no_replay.replay_batch_size == 0
    for beta in (0.0, 0.5, 1.0):
        dataclasses.replace(TOY, replay_priority="critic_loss", importance_sampling_exponent=beta)
    assert dataclasses.replace(TOY, replay_priority="critic_loss", priority_exponent=0.0).prioritized_replay
    assert not dataclasses.replace(no_replay, replay_priority="critic_loss").prioritized_replay  # No replay to weight.


def test_the_replay_is_uniform_fifo_and_sized_in_unrolls():
    """§5.1: a uniformly sampled FIFO replay of `replay_capacity` observations, held as whole unrolls of T
    steps; with state recomputation (App. A.2) whole episodes, also uniform and FIFO."""
    info = agent.replay_table(TOY).info
    assert info.sampler_options.WhichOneof("distribution") == "uniform"
    assert info.remover_options.WhichOneof("distribution") == "fifo"
    assert info.max_size == TOY.replay_capacity // TOY.unroll_length
    episodes, _ = agent.recompute_tables(TOY)
    assert episodes.info.sampler_options.WhichOneof("distribution") == "uniform"
    assert episodes.info.remover_options.WhichOneof("distribution") == "fifo"
    assert episodes.info.max_size == TOY.replay_capacity // TOY.max_replay_episode_steps


def test_the_recomputed_unrolls_are_a_queue_drawn_in_random_order():
    """App. A.2: the replayer writes consecutive unrolls of one episode; the learner draws them at random (a
    batch mixes episodes), each exactly once, and the replayer waits, not evicts, while the queue is full."""
    _, replayed = agent.recompute_tables(TOY)
    info = replayed.info
    assert info.sampler_options.WhichOneof("distribution") == "uniform"
    assert (info.max_times_sampled, info.max_size) == (1, TOY.queue_size)
    limiter = info.rate_limiter_info
    assert (limiter.samples_per_insert, limiter.min_size_to_sample) == (1.0, 1)
    assert (limiter.min_diff, limiter.max_diff) == (0.0, TOY.queue_size)


def test_app_a2_preset_and_its_arms():
    """Fig. 4 right: 50% replay, a smaller replay; uniform, and prioritized with beta 0.5 and 1."""
    preset = PRESETS["minatar_laser_a2"]
    assert (preset.online_batch_size, preset.replay_batch_size) == (8, 8)
    assert preset.replay_capacity == 0.3 * PRESETS["minatar_laser"].replay_capacity  # 3M of the paper's 10M.
    assert preset.replay_priority == "uniform" and not preset.prioritized_replay
    assert (PRESETS["atari_laser"].priority_exponent, preset.importance_sampling_exponent) == (0.6, 1.0)
    for beta in (0.5, 1.0):
        arm = dataclasses.replace(preset, replay_priority="critic_loss", importance_sampling_exponent=beta)
        sampler = agent.replay_table(arm).info.sampler_options
        assert arm.prioritized_replay and sampler.prioritized.priority_exponent == 0.6


# Batches on a live Reverb server. -----------------------------------------------


@pytest.fixture
def serve():
    """serve(config) -> (client, address) of a server with the agent's tables; stopped afterwards."""
    servers = []

    def make(config):
        servers.append(reverb_server.make_server(agent.agent_tables(config)))
        address = f"localhost:{servers[-1].port}"
        return reverb.Client(address), address

    yield make
    for server in servers:
        server.stop()


NUMBERED_SPEC = trajectories.step_spec((1,), tf.float32, A)


def write_numbered_unrolls(client, config, count):
    """`count` unrolls of one env as an actor writes them; step t's observation is t, so unroll k starts at k T."""
    T = config.unroll_length
    adder = trajectories.unroll_adder(client, NUMBERED_SPEC, 1, T, agent.actor_tables(config))
    for t in range(count * T + 1):
        adder.append({
            "observation": np.full((1, 1), t), "first": np.array([t == 0]), "action": np.zeros(1),
            "behaviour_logits": np.zeros((1, A)), "reward": np.zeros(1), "terminal": np.zeros(1, bool),
            "episode_return": np.full(1, np.nan), "episode_length": np.zeros(1),
        })  # fmt: skip
    adder.close()


def unroll_numbers(unrolls, T):
    """Each unroll's number k, after checking it holds steps kT..kT+T of one stream."""
    observations = unrolls["observation"].numpy()[..., 0]
    assert observations.shape[1] == T + 1
    np.testing.assert_array_equal(np.diff(observations, axis=1), 1.0)
    assert np.all(observations[:, 0] % T == 0)
    return (observations[:, 0] // T).astype(int).tolist()


def batch_generator(config, address):
    """`MixedLearner.batches` without a network: it reads only these attributes."""
    holder = types.SimpleNamespace(
        config=config, spec=NUMBERED_SPEC, _address=address, queue_table=agent.queue_table(config)
    )
    return agent.MixedLearner.batches(holder)


@pytest.mark.parametrize("fraction, batch_size", list(BATCHES))
def test_batches_are_fresh_unrolls_in_queue_order_then_replayed_ones(serve, fraction, batch_size):
    config = laser_config(fraction, batch_size)
    online, replayed, dequeued = config.online_batch_size, config.replay_batch_size, config.dequeued_per_step
    client, address = serve(config)
    steps = 3
    count = batch_size + steps * dequeued
    write_numbered_unrolls(client, config, count)
    info = client.server_info()
    assert info[agent.queue_table(config)].current_size == count
    if replayed:  # The actors' one write reaches both tables.
        assert info[agent.REPLAY_TABLE].current_size == count
    else:
        assert agent.REPLAY_TABLE not in info
    batches = batch_generator(config, address)
    for step in range(steps):
        fresh, sampled = next(batches)
        assert unroll_numbers(fresh, config.unroll_length) == list(range(step * dequeued, (step + 1) * dequeued))
        if not replayed:
            assert sampled is None
        else:
            assert set(unroll_numbers(sampled, config.unroll_length)) <= set(range(count))
            assert sampled["observation"].shape[0] == replayed
        mixed = agent.mix(fresh, sampled, online)
        numbers = unroll_numbers(mixed, config.unroll_length)
        assert len(numbers) == batch_size
        assert numbers[:online] == unroll_numbers(fresh, config.unroll_length)[:online]
        if replayed:
            assert numbers[online:] == unroll_numbers(sampled, config.unroll_length)
        for name in mixed:  # Every field is cut the same way.
            assert mixed[name].shape[:2] == (batch_size, config.unroll_length + 1), name
    if fraction == 1.0:  # Pure replay: one fresh unroll a step still leaves the queue.
        assert dequeued == 1 and online == 0
    assert client.server_info()[agent.queue_table(config)].current_size <= count - steps * dequeued


def test_a_fresh_batch_waits_for_the_replay_and_is_not_dropped(serve):
    config = laser_config(0.875, 8)  # 1 online + 7 replayed; sampling starts at 7 replayed unrolls.
    client, address = serve(config)
    write_numbered_unrolls(client, config, 3)
    batches = batch_generator(config, address)
    assert next(batches) is None  # The replay cannot serve a batch yet.
    write_numbered_unrolls(client, config, 10)  # Another stream, numbered from 0 again: the first 3 come first.
    # More Nones may come (the queue's reader timed out while the generator waited); no unroll is lost.
    pairs = [pair for pair in (next(batches) for _ in range(8)) if pair is not None]
    numbers = [unroll_numbers(fresh, config.unroll_length) for fresh, _ in pairs]
    assert numbers[:5] == [[0], [1], [2], [0], [1]]


# The learner. -------------------------------------------------------------------

CATCH = gym.spaces.Box(0, 1, (10, 5, 1), np.uint8)


def write_catch_unrolls(client, config, spec, count):
    """Catch-shaped unrolls; unroll k holds one finished episode of return k at its step 4."""
    T = config.unroll_length
    adder = trajectories.unroll_adder(client, spec, 1, T, agent.actor_tables(config))
    for t in range(count * T + 1):
        ended = t % T == 4
        adder.append({
            "observation": np.zeros((1, *CATCH.shape)), "first": np.array([t % T == 5]), "action": np.full(1, t % A),
            "behaviour_logits": np.zeros((1, A)), "reward": np.full(1, float(ended)), "terminal": np.array([ended]),
            "episode_return": np.full(1, t // T if ended else np.nan), "episode_length": np.full(1, t if ended else 0),
        })  # fmt: skip
    adder.close()


def started_learner(serve, config, unrolls: int):
    """A started `MixedLearner` on a server of its own, the queue and replay holding `unrolls` Catch unrolls."""
    client, address = serve(config)
    learner = agent.MixedLearner(config, client, address)
    learner.start()
    write_catch_unrolls(client, config, learner.spec, unrolls)
    return learner, client


@pytest.mark.parametrize("fraction", [0.875, 1.0, 0.0])
def test_mixed_learner_counts_fresh_frames_and_episodes_only(serve, fraction):
    config = dataclasses.replace(TOY, replay_fraction=fraction)
    learner, _ = started_learner(serve, config, 2 * config.batch_size)
    dequeued = config.dequeued_per_step
    for step in range(1, 3):
        result = learner.step()
        assert learner.frames == step * dequeued * config.unroll_length * config.frames_per_step
        assert learner.steps == step
        # Episodes come from the fresh unrolls alone: a replayed one was counted when it was fresh.
        first = (step - 1) * dequeued
        assert result.episodes == [(float(k), k * config.unroll_length + 4) for k in range(first, first + dequeued)]
        assert np.isfinite(result.metrics["loss"]) and 0.0 <= result.metrics["replay_accepted"] <= 1.0
    progress = learner.progress()
    if config.replay_batch_size:
        assert progress["replay"] == 2 * config.batch_size and "accepted" in progress
    else:
        assert "replay" not in progress


@pytest.mark.parametrize("trust_region", [True, False])
def test_the_summary_for_final_json_is_the_mean_share_of_replayed_steps_the_trust_region_accepted(serve, trust_region):
    """The progress line shows the last batch's share; final.json the mean over the updates (TensorBoard the curve)."""
    config = dataclasses.replace(TOY, trust_region=trust_region)
    learner, _ = started_learner(serve, config, 3 * config.batch_size)
    shares = iter([1.0, 0.5, 0.25])
    learner._learn = lambda fresh, replayed: {"loss": 0.0, "replay_accepted": next(shares)}
    for _ in range(3):
        assert learner.step() is not None
    if trust_region:
        assert learner.summary()["replay_accepted_mean"] == pytest.approx(1.75 / 3, abs=1e-4)
        assert learner.progress()["accepted"] == 0.25
    else:
        assert "replay_accepted_mean" not in learner.summary() and "accepted" not in learner.progress()


@pytest.mark.parametrize("publish_every", [1, 2])
def test_the_mixed_learner_publishes_its_parameters_every_publish_every_steps(serve, publish_every):
    """The actors' and the replayer's theta: the network's, with its step count as the version."""
    config = dataclasses.replace(TOY, publish_every=publish_every)
    learner, client = started_learner(serve, config, 3 * config.batch_size)
    published_at = 0
    for step in (1, 2, 3):
        learner.step()
        *parameters, version = reverb_variables.fetch(client, agent.params_table(config))
        published_at = step if step % publish_every == 0 else published_at
        assert int(version) == published_at
        if published_at == step:
            for fetched, variable in zip(parameters, learner.network.trainable_variables, strict=True):
                np.testing.assert_array_equal(fetched, variable.numpy())


def random_batch(config, rng):
    batch_size, length = config.batch_size, config.unroll_length + 1
    return {
        "observation": tf.constant(rng.integers(0, 2, (batch_size, length, *CATCH.shape)), tf.uint8),
        "first": tf.constant(rng.random((batch_size, length)) < 0.1),
        "action": tf.constant(rng.integers(A, size=(batch_size, length)), tf.int32),
        "behaviour_logits": tf.constant(rng.standard_normal((batch_size, length, A)), tf.float32),
        "reward": tf.constant(rng.standard_normal((batch_size, length)), tf.float32),
        "terminal": tf.constant(rng.random((batch_size, length)) < 0.1),
    }


@pytest.mark.parametrize("fraction, batch_size", [(0.875, 16), (1.0, 8), (0.5, 8), (0.96, 128)])
def test_learner_step_adds_the_fresh_frames_only(fraction, batch_size):
    config = dataclasses.replace(TOY, replay_fraction=fraction, batch_size=batch_size, queue_size=256)
    learner = Learner(config, networks.make(config, CATCH, A))
    rng = np.random.default_rng(0)
    learner.build(random_batch(config, rng))
    for _ in range(3):
        metrics = learner.step(random_batch(config, rng))
    assert learner.frame_count == 3 * config.dequeued_per_step * config.unroll_length
    assert {"accepted", "replay_accepted", "mean_kl"} <= set(metrics)


@pytest.mark.parametrize("trust_region", [True, False])
def test_the_learner_passes_the_configs_loss_settings_to_the_loss(monkeypatch, trust_region):
    """Every field of the config that the loss takes reaches `laser_loss` (each here off its default)."""
    config = dataclasses.replace(
        TOY, trust_region=trust_region, trust_region_threshold=0.7, clip_rho_threshold=2.0, clip_pg_rho_threshold=3.0,
        baseline_cost=0.25, entropy_cost=0.02, loss_reduction="mean", replay_fraction=0.75,
    )  # fmt: skip
    seen = []
    loss = losses.laser_loss
    monkeypatch.setattr(losses, "laser_loss", lambda *args, **kwargs: seen.append(kwargs) or loss(*args, **kwargs))
    learner = Learner(config, networks.make(config, CATCH, A))
    rng = np.random.default_rng(0)
    learner.build(random_batch(config, rng))
    learner.step(random_batch(config, rng))
    expected = {
        "num_online": config.batch_size // 4, "trust_region_threshold": 0.7 if trust_region else None,
        "baseline_cost": 0.25, "entropy_cost": 0.02, "reduction": "mean", "correction": "vtrace",
        "clip_rho_threshold": 2.0, "clip_pg_rho_threshold": 3.0,
    }  # fmt: skip
    assert {name: seen[-1][name] for name in expected} == expected


# Prioritized replay (App. A.2). -------------------------------------------------

PRIORITIZED = dataclasses.replace(TOY, replay_priority="critic_loss", importance_sampling_exponent=0.5)


def reference_importance_weights(probabilities, table_size, beta):
    """PER §3.4 written out: w_i = (1/N 1/P(i))^beta, divided by the batch's largest."""
    raw = [(1.0 / table_size / p) ** beta for p in probabilities]
    return np.array([w / max(raw) for w in raw])


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_importance_weights_from_the_sample_probabilities(beta):
    probabilities = np.array([0.05, 0.2, 0.01, 0.2, 0.125])
    info = reverb.SampleInfo(
        key=tf.constant(range(5), tf.uint64), probability=tf.constant(probabilities, tf.float64),
        table_size=tf.fill([5], tf.constant(40, tf.int64)), priority=tf.ones(5, tf.float64),
        times_sampled=tf.ones(5, tf.int32),
    )  # fmt: skip
    weights = priorities.CriticLossPriorities(None, agent.REPLAY_TABLE, beta).importance_weights(info)
    np.testing.assert_allclose(weights, reference_importance_weights(probabilities, 40, beta), rtol=1e-12)


def test_normalised_priorities_keep_the_running_maximum_at_one():
    first, scale = priorities.normalised_priorities(np.array([0.5, 2.0, 0.0]), 0.0)
    eps = priorities.EPSILON
    np.testing.assert_allclose(first, [(0.5 + eps) / (2 + eps), 1.0, eps / (2 + eps)], rtol=1e-12)
    assert scale == 2.0 + eps
    second, scale = priorities.normalised_priorities(np.array([1.0]), scale)  # Below the maximum: M stays.
    np.testing.assert_allclose(second, [(1 + eps) / (2 + eps)], rtol=1e-12)
    third, scale = priorities.normalised_priorities(np.array([4.0, 1.0]), scale)  # A new maximum.
    np.testing.assert_allclose(third, [1.0, (1 + eps) / (4 + eps)], rtol=1e-12)
    assert scale == 4.0 + eps


def test_the_prioritized_replay_samples_by_p_to_the_alpha(serve):
    """P(i) = p_i^alpha / sum_k p_k^alpha (PER eq. 1), as Reverb reports it and as it samples (10K draws)."""
    client, _ = serve(PRIORITIZED)
    levels = [0.05, 0.2, 1.0, 0.6]
    stored = levels * 4  # 16 items: more than the table's minimum size, a replay batch (14).
    for priority in stored:
        client.insert([np.zeros(1)], priorities={agent.REPLAY_TABLE: priority})
    total = np.sum(np.power(stored, PRIORITIZED.priority_exponent))
    expected = {p: p**PRIORITIZED.priority_exponent / total for p in levels}  # One item's P.
    counts = dict.fromkeys(levels, 0)
    draws = 10_000
    for sample in client.sample(agent.REPLAY_TABLE, num_samples=draws, emit_timesteps=False):
        priority = sample.info.priority
        assert sample.info.probability == pytest.approx(expected[priority], rel=1e-9)
        counts[priority] += 1
    for priority, count in counts.items():  # Each level's 4 items, within 5 standard deviations.
        p = 4 * expected[priority]
        assert abs(count - draws * p) < 5 * np.sqrt(draws * p * (1 - p)), (priority, count)


def test_prioritized_learner_weights_and_writes_the_sampled_keys_critic_losses(serve):
    config = PRIORITIZED
    online = config.online_batch_size
    learner, client = started_learner(serve, config, 2 * config.batch_size)
    samples, written, real_mutate = [], [], client.mutate_priorities
    batches = learner._batches

    def spy_batches():
        for pair in batches:
            if pair is not None:
                samples.append(pair[1][0])  # The replayed batch's SampleInfo.
            yield pair

    def spy_mutate(table, updates):
        written.append((table, dict(updates)))
        real_mutate(table, updates=updates)

    learner._batches, client.mutate_priorities = spy_batches(), spy_mutate
    scale = 0.0
    for step in range(3):
        metrics = learner.step().metrics
        info, critic_losses = samples[step], learner.learner.critic_losses
        assert critic_losses.shape == (config.batch_size,) and np.all(critic_losses >= 0)
        weights = np.concatenate(
            [np.ones(online), reference_importance_weights(info.probability.numpy(), int(info.table_size[0]), 0.5)]
        )
        # The summed baseline term is sum_i w_i T L_i: the weights were applied and L_i is unroll i's share.
        assert metrics["baseline_loss"] == pytest.approx(config.unroll_length * np.sum(weights * critic_losses), 1e-4)
        assert metrics["importance_weight_min"] == pytest.approx(weights.min(), rel=1e-9)
        # Exactly the sampled keys, each at (L_i + eps) / M, M the running maximum; at most 1, new items' priority.
        scale = max(scale, critic_losses[online:].max() + priorities.EPSILON)
        expected = {}
        for key, loss in zip(info.key.numpy().tolist(), critic_losses[online:]):
            expected[key] = (loss + priorities.EPSILON) / scale  # A key sampled twice keeps its last.
        table, updates = written[step]
        assert table == agent.REPLAY_TABLE and updates.keys() == expected.keys()
        np.testing.assert_allclose(list(updates.values()), list(expected.values()), rtol=1e-6)
        assert max(updates.values()) <= 1.0
    assert len(written) == 3 and len(samples) >= 3
    # Reverb holds them: every item seen has its last written priority, or 1.0 if never sampled.
    last = {key: p for _, updates in written for key, p in updates.items()}
    sampled_since = {key for info in samples[3:] for key in info.key.numpy().tolist()}  # Drawn ahead, not yet updated.
    for sample in client.sample(agent.REPLAY_TABLE, num_samples=500, emit_timesteps=False):
        key, priority = sample.info.key, sample.info.priority
        assert priority == pytest.approx(last.get(key, 1.0), rel=1e-12) or key in sampled_since


def test_the_importance_weights_weigh_the_replayed_unrolls_at_beta(serve):
    """Unequal sample probabilities: the replayed unrolls take (N P(i))^-beta / max at importance_sampling_exponent
    (PER §3.4), not at the priority exponent; the fresh unrolls, first in the batch, weigh 1."""
    config = PRIORITIZED
    assert config.importance_sampling_exponent != config.priority_exponent
    client, address = serve(config)
    learner = agent.MixedLearner(config, client, address)
    learner.start()
    online, replayed = config.online_batch_size, config.replay_batch_size
    rng = np.random.default_rng(0)
    batch = random_batch(config, rng)
    probabilities = rng.uniform(0.01, 0.1, replayed)
    info = reverb.SampleInfo(
        key=tf.constant(range(replayed), tf.uint64), probability=tf.constant(probabilities, tf.float64),
        table_size=tf.fill([replayed], tf.constant(40, tf.int64)), priority=tf.ones(replayed, tf.float64),
        times_sampled=tf.ones(replayed, tf.int32),
    )  # fmt: skip
    weights, step = [], learner.learner.step

    def spy(batch, importance_weights=None):
        weights.append(importance_weights)
        return step(batch, importance_weights)

    learner.learner.step = spy
    fresh = {name: value[:online] for name, value in batch.items()}
    learner._learn(fresh, (info, {name: value[online:] for name, value in batch.items()}))
    expected = np.concatenate([np.ones(online), reference_importance_weights(probabilities, 40, 0.5)])
    np.testing.assert_allclose(weights[0], expected, rtol=1e-12)


def test_the_learner_refuses_a_distribution_strategy():
    """IMPALA's replicas would each take the global B_online and the full [B] weights (see `Learner`)."""
    with pytest.raises(ValueError, match="not split over replicas"):
        Learner(TOY, networks.make(TOY, CATCH, A), tf.distribute.OneDeviceStrategy("/cpu:0"))


def test_uniform_learner_refuses_importance_weights():
    learner = Learner(TOY, networks.make(TOY, CATCH, A))
    learner.build(random_batch(TOY, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="need prioritized replay"):
        learner.step(random_batch(TOY, np.random.default_rng(1)), np.ones(TOY.batch_size))
