"""Prioritized Double DQN's configuration: one frozen dataclass, a preset per setting.

Presets (each value's source in a comment):

* `atari_ddqn`, `atari_ddqn_rank`, `atari_ddqn_prop`: tuned Double DQN (van
  Hasselt et al. 2016) with uniform, rank-based and proportional replay, PER
  §4, App. B.2 and Table 3;
* `minatar_ddqn`, `minatar_ddqn_rank`, `minatar_ddqn_prop`: Young & Tian
  2019's DQN settings (kenjyoung/MinAtar `examples/dqn.py`) with Double DQN's
  target and PER's replay variants: our reduced-scale setting;
* `toy`: Catch, for tests.

Counts of time, and what they count:

* `update_period`, `epsilon_decay_steps`: agent steps (one action; an Atari
  agent step is 4 frames);
* `target_update_period`: learner updates;
* `min_replay_size`, `replay_capacity`: transitions (items of the replay);
* `total_frames`: environment frames, the run's budget; beta reaches 1 there.

Entry points override fields by name (`--config_override name=value`).
"""

from __future__ import annotations

import dataclasses

from common import config as config_lib
from common import envs
from common.errors import UsageError, choice_error
from per import priorities
from per.replay_config import VARIANTS, ReplayConfig

NETWORKS = ("nature_dqn", "minatar", "toy")
# How the networks' first weights are drawn: Sonnet's default, or PyTorch's
# (`common.networks.torch_default_init`), which Young & Tian's code had.
INITIALIZATIONS = ("sonnet", "torch")
LOSS_REDUCTIONS = ("mean", "sum")
# The torso each env family was published with; a network made for another
# family's observations would run (a conv net takes any image) but is not the paper's.
NETWORK_FAMILY = {"nature_dqn": "atari", "minatar": "minatar"}


@dataclasses.dataclass(frozen=True)
class PerConfig(config_lib.EnvConfig):
    ADDED_FIELDS = (  # `EnvConfig.ADDED_FIELDS`.
        "beta_final", "td_error_snapshot_frames", "shared_bias", "initialization", "learner_threads", "rmsprop_form"
    )  # fmt: skip

    # One bias shared by all actions' values in the Q-head, instead of one per action.
    shared_bias: bool = False
    initialization: str = "sonnet"  # One of INITIALIZATIONS.
    # Acting. num_actors = 0: the learner acts itself, `update_period` agent
    # steps before each update (the synchronous DQN loop). num_actors > 0:
    # actor processes act (Ape-X style) and the replay's rate limiter alone
    # holds `update_period` agent steps per update.
    num_actors: int = 0
    envs_per_actor: int = 1  # Envs stepped together; with num_actors = 0, update_period must be a multiple.
    epsilon_start: float = 1.0
    epsilon_end: float = 0.01
    epsilon_decay_steps: int = 1_000_000  # Agent steps over which epsilon goes linearly start -> end.
    # PER Table 5: tuned DDQN and both prioritized variants under human starts (the
    # issue's choice); Table 5's no-op "Test" evaluation used 0.01.
    eval_epsilon: float = 0.001
    # Replay (per.replay_config.ReplayConfig's fields).
    replay: str = "proportional"  # One of per.replay_config.VARIANTS.
    replay_capacity: int = 1_000_000
    min_replay_size: int = 50_000  # Transitions before learning starts.
    alpha: float = priorities.PROPORTIONAL["alpha"]
    beta0: float = priorities.PROPORTIONAL["beta0"]  # Annealed linearly to beta_final at total_frames.
    # §3.4: beta reaches 1 at the end of learning. PER App. Fig. 12 holds beta
    # fixed instead (beta0 = beta_final = 1: full correction; 0: none).
    beta_final: float = 1.0
    priority_epsilon: float = 1e-6  # p = |delta| + epsilon (§3.3).
    # §3.4 and Algorithm 1 line 10 divide w_j by max_i w_i without saying over
    # which items: `batch_max` reads it as the minibatch (as Dopamine does),
    # `global_min` as the whole replay (as OpenAI baselines does). A choice.
    weight_normalization: str = "batch_max"
    rerank_interval: int = 10_000  # Rank-based: item priority updates between re-ranks; ours (`per.replay_config`).
    # Learning.
    batch_size: int = 32  # k.
    update_period: int = 4  # Agent steps per update: samples_per_insert = batch_size / update_period.
    target_update_period: int = 7_500  # Learner updates between copies of theta to theta^-.
    discount: float = 0.99
    clip_rewards: bool = True  # To [-1, 1].
    learning_rate: float = 0.00025 / 4
    rmsprop_decay: float = 0.95
    rmsprop_epsilon: float = 0.01  # Inside the square root (TF1).
    rmsprop_momentum: float = 0.0
    rmsprop_centered: bool = True
    rmsprop_form: str = "tf1"  # TF1's (DQN, Dopamine) or "torch" (PyTorch's: Y&T); `common.optimizers`.
    # Over the minibatch. Algorithm 1 (line 13) and Mnih et al. 2015 sum, and
    # RMSProp's epsilon 0.01 is sized for summed gradients: a mean with epsilon
    # 0.01 / k^2 is the same update (Dopamine: mean, 1e-5).
    loss_reduction: str = "sum"
    total_frames: int = 200_000_000
    seed: int = 0
    # PER App. Fig. 10: frames between snapshots of the replay's last-seen
    # |delta| (RUN_DIR/td_errors.jsonl, `per.td_errors`); 0: none.
    td_error_snapshot_frames: int = 0
    # TF's intra-op threads in the learner's process (`common.launch.use_threads`);
    # 0: TF's default, one per core. Operational: it changes the speed, not the maths.
    learner_threads: int = 0
    # Run directory.
    checkpoint_every_s: float = 600.0
    log_every_s: float = 10.0

    def __post_init__(self):
        family, _ = envs.parse(self.env)
        envs.resolve_options(self.env, **dict(self.env_options))
        for name, choices in (
            ("network", NETWORKS),
            ("initialization", INITIALIZATIONS),
            ("replay variant", VARIANTS),
            ("weight_normalization", priorities.WEIGHT_NORMALIZATIONS),
            ("loss_reduction", LOSS_REDUCTIONS),
            ("rmsprop_form", config_lib.RMSPROP_FORMS),
        ):
            value = getattr(self, name.split()[0])
            if value not in choices:
                raise choice_error(name, value, choices)
        published = NETWORK_FAMILY.get(self.network)
        if published is not None and published != family:
            raise UsageError(
                f"network {self.network!r} is the {published} network and this preset holds {published} settings, "
                f"but the env is {self.env}; {presets_for(family)}"
            )
        for name in (
            "envs_per_actor", "epsilon_decay_steps", "replay_capacity", "min_replay_size", "rerank_interval",
            "batch_size", "update_period", "target_update_period", "total_frames",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise UsageError(f"{name}={getattr(self, name)}: must be >= 1")
        for name in ("num_actors", "td_error_snapshot_frames", "learner_threads"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name}={getattr(self, name)}: must be >= 0")
        # PER §3.3's range: 0 is uniform, 1 samples by priority alone (beyond it p^alpha soon overflows).
        if not 0.0 <= self.alpha <= 1.0:
            raise UsageError(f"alpha={self.alpha}: must be in [0, 1] (0 samples uniformly, 1 by priority alone)")
        if self.replay == "uniform" and self.alpha:
            raise UsageError(
                f"alpha={self.alpha} with replay=uniform, which samples with P = 1/N whatever alpha is: set alpha=0, "
                "or choose replay=proportional or rank (e.g. --preset minatar_ddqn_prop)"
            )
        for name in ("beta0", "beta_final"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"{name}={value}: must be in [0, 1] (1 corrects the sampling bias fully)")
        if self.beta_final < self.beta0:  # PER §3.4 anneals beta up to full correction, never down.
            raise UsageError(f"beta_final={self.beta_final} < beta0={self.beta0}: beta anneals up (equal: fixed)")
        if self.priority_epsilon < 0:
            raise UsageError(f"priority_epsilon={self.priority_epsilon}: must be >= 0")
        config_lib.check_table_size("replay_capacity", self.replay_capacity, "transitions")
        if self.replay_capacity < max(self.batch_size, self.min_replay_size):
            raise UsageError(
                f"replay_capacity={self.replay_capacity} must hold at least batch_size={self.batch_size} and "
                f"min_replay_size={self.min_replay_size} transitions, or learning never starts"
            )
        if not self.num_actors and self.update_period % self.envs_per_actor:
            raise UsageError(
                f"update_period={self.update_period} must be a multiple of envs_per_actor={self.envs_per_actor}: "
                "each batched env step inserts one transition per env between updates (with --actors 0)"
            )
        for name in ("epsilon_start", "epsilon_end", "eval_epsilon", "discount"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UsageError(f"{name}={getattr(self, name)}: must be in [0, 1]")
        if self.learning_rate <= 0:
            raise UsageError(f"learning_rate={self.learning_rate}: must be > 0")
        config_lib.check_run_fields(self)
        config_lib.check_rmsprop(self)
        # Builds (and so checks) the replay's own config too.
        self.replay_config  # noqa: B018

    @property
    def frames_per_step(self) -> int:
        """Environment frames per agent step (the action repeat)."""
        return envs.frames_per_step(self.env, **dict(self.env_options))

    @property
    def samples_per_insert(self) -> float:
        """The replay ratio the Reverb rate limiter holds: B items sampled per `update_period` inserted."""
        return self.batch_size / self.update_period

    @property
    def replay_config(self) -> ReplayConfig:
        return ReplayConfig(
            variant=self.replay, capacity=self.replay_capacity, alpha=self.alpha, beta0=self.beta0,
            epsilon=self.priority_epsilon, weight_normalization=self.weight_normalization,
            rerank_interval=self.rerank_interval, min_size=self.min_replay_size,
        )  # fmt: skip


# Tuned Double DQN (van Hasselt et al. 2016), the baseline of PER §4 and App. B.2.
ATARI_DDQN = PerConfig(
    env="atari:pong",
    env_options=(("terminal_on_life_loss", True),),  # Mnih et al. 2015: a life loss ends training episodes.
    network="nature_dqn",  # PER §4: "the identical neural network architecture" as tuned DDQN: Mnih et al. 2015's,
    shared_bias=True,  # with tuned DDQN's one bias for all action values in the top layer (van Hasselt 2016).
    replay="uniform",
    alpha=0.0,  # Uniform: P(i) = 1/N.
    beta0=0.0,  # Uniform: every IS weight is 1 anyway.
    replay_capacity=1_000_000,  # PER §4: a sliding window of the last 10^6 transitions.
    min_replay_size=50_000,  # Tuned DDQN: learning starts after 50K transitions.
    batch_size=32,  # PER §4: minibatches of 32.
    update_period=4,  # PER §4: one update per 4 agent steps (8 samples per insert).
    # Tuned DDQN: theta^- copied every 30K steps; dqn_zoo reads them as agent steps (its
    # double_dqn: 1.2e5 frames), here 7,500 updates.
    target_update_period=7_500,
    discount=0.99,  # Mnih et al. 2015.
    clip_rewards=True,  # PER §4: rewards clipped to [-1, 1].
    loss_reduction="sum",  # PER Algorithm 1 line 13; Mnih et al. 2015.
    learning_rate=0.00025,  # Tuned DDQN.
    rmsprop_decay=0.95,  # Mnih et al. 2015: (squared) gradient momentum 0.95, centered.
    rmsprop_epsilon=0.01,  # Mnih et al. 2015: min squared gradient 0.01, inside the root.
    rmsprop_centered=True,
    epsilon_start=1.0,  # Mnih et al. 2015.
    epsilon_end=0.01,  # Tuned DDQN.
    # Tuned DDQN: over 1M agent steps. Mnih et al. anneal after the 50K-step warm-up;
    # we anneal from step 0, so epsilon reaches 0.01 50K steps earlier.
    epsilon_decay_steps=1_000_000,
    eval_epsilon=0.001,  # PER Table 5: tuned DDQN, human starts (no-op "Test": 0.01).
    total_frames=200_000_000,  # PER App. Fig. 7's caption: 200M frames (50M agent steps).
)

# Young & Tian 2019's DQN on MinAtar (kenjyoung/MinAtar examples/dqn.py), with a
# Double DQN target and, in the variants below, PER's replay.
MINATAR_DDQN = PerConfig(
    env="minatar:breakout",
    network="minatar",  # Y&T: conv 16 3x3/1, FC 128.
    replay="uniform",  # Y&T: uniform replay.
    alpha=0.0,
    beta0=0.0,
    replay_capacity=100_000,  # Y&T: REPLAY_BUFFER_SIZE.
    min_replay_size=5_000,  # Y&T: REPLAY_START_SIZE.
    batch_size=32,  # Y&T: BATCH_SIZE.
    # Y&T: TRAINING_FREQ = 1, one update per agent step (32 samples per insert).
    # Until 2026-11-25 PER §4's one per 4 steps, chosen for speed. With Y&T's
    # optimizer (no momentum) it learned far slower: uniform Asterix reached 4.66
    # at 2M frames, 14.49 at one per step (results/per/archive/update_every_4/).
    # On one learner thread one per step ran about 380 agent steps/s alone here
    # while the replay filled, but 220-240 once it was full (Seaquest,
    # proportional, 2026-12-04): 2M frames from 0 took 2.4 h.
    # `reproduce.per.minatar`'s arm `uniform_every_4` runs PER's ratio.
    update_period=1,
    # Y&T: TARGET_NETWORK_UPDATE_FREQ = 1,000 updates, which at one update per
    # frame is also 1,000 frames.
    target_update_period=1_000,
    discount=0.99,  # Y&T: GAMMA.
    clip_rewards=False,  # Y&T: raw MinAtar rewards.
    loss_reduction="mean",  # Y&T: PyTorch's smooth_l1_loss averages over the minibatch.
    learning_rate=0.00025,  # Y&T: STEP_SIZE.
    # Y&T: torch.optim.RMSprop(lr=STEP_SIZE, alpha=SQUARED_GRAD_MOMENTUM,
    # centered=True, eps=MIN_SQUARED_GRAD): PyTorch's form, epsilon outside the root.
    rmsprop_form="torch",
    rmsprop_decay=0.95,  # Y&T: SQUARED_GRAD_MOMENTUM.
    rmsprop_epsilon=0.01,  # Y&T: MIN_SQUARED_GRAD.
    # Y&T's code of the paper defines GRAD_MOMENTUM = 0.95 and passes no momentum
    # (PyTorch's default 0). kenjyoung/MinAtar PR #37 (2024) proposed passing it;
    # the author replied he believed none was intended (the Nature DQN's
    # "gradient momentum" being centered RMSProp's mean-gradient decay). This
    # preset used 0.95, and TF1's form, for the MinAtar runs committed before the
    # fix (README). Not matched: Sonnet's default initialisation (truncated normal,
    # sd 1/sqrt(fan_in), zero biases) against PyTorch's (uniform +-1/sqrt(fan_in),
    # biases too; `initialization="torch"` draws it), and batches drawn with
    # replacement (Y&T: random.sample).
    rmsprop_momentum=0.0,
    rmsprop_centered=True,
    epsilon_start=1.0,  # Y&T: EPSILON.
    epsilon_end=0.1,  # Y&T: END_EPSILON.
    # Y&T: FIRST_N_FRAMES. They anneal after the 5K random warm-up frames; we
    # anneal from step 0, so epsilon reaches 0.1 5K frames earlier.
    epsilon_decay_steps=100_000,
    eval_epsilon=0.001,  # PER Table 5 (Y&T report training returns only).
    total_frames=5_000_000,  # Y&T: NUM_FRAMES.
    # One thread: this network's ops are too small to split over two. Measured
    # on MinAtar Breakout at Y&T's ratio on a quiet machine: the update alone ran
    # 1,045-1,118/s on one thread, 886-932/s on TF's default two; 100K frames
    # of `per.train` took 213 s, not 241 s (with a test beside the 213 s run).
    learner_threads=1,
    checkpoint_every_s=300.0,
)


def _prioritized(base: PerConfig, variant: dict[str, float], replay: str) -> PerConfig:
    return dataclasses.replace(
        base,
        replay=replay,
        alpha=variant["alpha"],  # PER Table 3.
        beta0=variant["beta0"],  # PER Table 3.
        learning_rate=base.learning_rate / 4,  # PER App. B.2.2: step size divided by 4 with prioritization.
    )


PRESETS = {
    "atari_ddqn": ATARI_DDQN,
    "atari_ddqn_rank": _prioritized(ATARI_DDQN, priorities.RANK_BASED, "rank"),  # alpha 0.7, beta0 0.5.
    "atari_ddqn_prop": _prioritized(ATARI_DDQN, priorities.PROPORTIONAL, "proportional"),  # alpha 0.6, beta0 0.4.
    "minatar_ddqn": MINATAR_DDQN,
    # PER's rule (step size / 4) applied to Y&T's step size: our choice, not published.
    # Uniform replay at this step size is `reproduce.per.minatar`'s arm `uniform_small_step`.
    "minatar_ddqn_rank": _prioritized(MINATAR_DDQN, priorities.RANK_BASED, "rank"),
    "minatar_ddqn_prop": _prioritized(MINATAR_DDQN, priorities.PROPORTIONAL, "proportional"),
    "toy": PerConfig(
        env="toy:catch",
        network="toy",
        envs_per_actor=1,
        replay="proportional",
        replay_capacity=10_000,
        min_replay_size=500,
        batch_size=32,
        update_period=2,  # 16 samples per insert: Catch needs few transitions, many updates.
        target_update_period=100,
        discount=0.99,
        learning_rate=0.001,
        loss_reduction="sum",
        epsilon_end=0.05,
        epsilon_decay_steps=5_000,
        total_frames=10_000,
        log_every_s=5.0,
    ),
}


def presets_for(family: str) -> str:
    """The presets made for an env family's observations, as an error names them (the preset's name prefix)."""
    names = [name for name in PRESETS if name.split("_")[0] == family]
    if names:
        return f"choose a preset for {family}: {', '.join(names)}"
    return f"no preset is for {family} (presets: {', '.join(PRESETS)})"
