"""The IMPALA presets hold the paper's hyperparameters.

The expected values are typed in from the paper (Espeholt et al. 2018, arXiv
v3), not read back from `impala/config.py`; the comment on each row names its
section. The stored text (shared/papers/impala_espeholt2018.txt) stops at App. B,
so the App. D and G rows come from the arXiv appendix tables.
"""

import math

import pytest

from common import envs
from impala.config import PRESETS, ImpalaConfig

# IMPALA App. G, Table G.1 (Atari-57 experts), unless the row says otherwise.
ATARI = {
    "unroll_length": 20,  # Unroll length (n).
    "batch_size": 32,  # Batch size.
    "discount": 0.99,  # Discount (gamma).
    "baseline_cost": 0.5,  # Baseline loss scaling.
    "entropy_cost": 0.01,  # Entropy regularizer.
    "learning_rate": 0.0006,  # Learning rate, annealed linearly to 0.
    "rmsprop_epsilon": 0.01,  # RMSProp epsilon.
    "rmsprop_momentum": 0.0,  # RMSProp momentum.
    "rmsprop_decay": 0.99,  # Not in the table: scalable_agent's experiment.py default.
    "max_grad_norm": 40.0,  # Clip global gradient norm.
    "reward_clipping": "abs_one",  # Reward clipping [-1, 1].
    "total_frames": 200_000_000,  # §5.3.2: experts train for 200M frames per game.
    "use_lstm": False,  # §5.3.2: "the deep network (without the LSTM)".
    "correction": "vtrace",
    "clip_rho_threshold": 1.0,  # §5.2.2: rho_bar = c_bar = 1 worked best.
}
# §5.3.2: a shallow network "equivalent to ... (Mnih et al., 2016)" and the deep one (Figure 3 right).
ATARI_NETWORK = {"atari_shallow": "shallow", "atari_deep": "deep"}
ATARI_ACTION_REPEAT = 4  # App. G: action repetitions 4.

# IMPALA App. D.3 (DMLab, fixed values) and D.1 (swept values).
DMLAB = {
    "unroll_length": 100,  # D.3: unroll length (n).
    "batch_size": 32,  # D.3.
    "discount": 0.99,  # D.3.
    "baseline_cost": 0.5,  # D.3: baseline loss scaling.
    "rmsprop_momentum": 0.0,  # D.3.
    "reward_clipping": "dmlab_asymmetric",  # D.3.1: 0.3 min(tanh r, 0) + 5 max(tanh r, 0).
    "max_grad_norm": 0.0,  # D.3 clips no gradients (App. G's 40 is Atari's).
    "network": "deep",  # §5.3.1: DMLab experts use the deep model (Figure 3 right),
    "use_lstm": True,  # §5: both models have "an LSTM before the policy and value".
}
DMLAB_ACTION_REPEAT = 4  # D.3: action repetitions 4.
DMLAB_SWEEP = {  # D.1: each expert's value is drawn from these.
    "entropy_cost": (5e-5, 1e-2),  # log-uniform.
    "learning_rate": (5e-6, 5e-3),  # log-uniform.
}
DMLAB_EPSILONS = (1e-1, 1e-3, 1e-5, 1e-7)  # D.1: RMSProp epsilon, categorical.


def _frames_per_step(config: ImpalaConfig) -> int:
    return envs.frames_per_step(config.env, **dict(config.env_options))


@pytest.mark.parametrize("name", ["atari_shallow", "atari_deep"])
def test_atari_presets_use_appendix_g(name):
    config = PRESETS[name]
    assert {field: getattr(config, field) for field in ATARI} == ATARI
    assert config.network == ATARI_NETWORK[name]
    assert _frames_per_step(config) == ATARI_ACTION_REPEAT


@pytest.mark.parametrize("name", ["atari_shallow", "atari_deep"])
def test_atari_training_ends_episodes_on_life_loss_but_evaluation_does_not(name):
    # App. G: "end of episode when life lost: yes" in training; the evaluation
    # env takes the family's defaults, which are the evaluation protocol.
    options = dict(PRESETS[name].env_options)
    assert options.get("terminal_on_life_loss") is True
    assert envs.option_fields(PRESETS[name].env)["terminal_on_life_loss"] is False


def test_atari_presets_differ_only_in_the_network():
    shallow, deep = (vars(PRESETS[name]) for name in ATARI_NETWORK)
    assert {k for k in shallow if shallow[k] != deep[k]} == {"network"}


# The single-task expert and the multi-task agent (§5.3) share App. D's values.
DMLAB_PRESETS = ("dmlab", "dmlab30")


@pytest.mark.parametrize("preset", DMLAB_PRESETS)
def test_dmlab_preset_uses_appendix_d(preset):
    config = PRESETS[preset]
    assert {field: getattr(config, field) for field in DMLAB} == DMLAB
    assert _frames_per_step(config) == DMLAB_ACTION_REPEAT


@pytest.mark.parametrize("preset", DMLAB_PRESETS)
@pytest.mark.parametrize("field", sorted(DMLAB_SWEEP))
def test_dmlab_swept_values_lie_in_the_sweep_ranges(field, preset):
    low, high = DMLAB_SWEEP[field]
    assert low <= getattr(PRESETS[preset], field) <= high


@pytest.mark.parametrize("preset", DMLAB_PRESETS)
def test_dmlab_rmsprop_epsilon_is_one_of_the_swept_choices(preset):
    assert any(math.isclose(PRESETS[preset].rmsprop_epsilon, e) for e in DMLAB_EPSILONS)
