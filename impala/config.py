"""IMPALA's configuration: one frozen dataclass and a named preset per setting.

Presets (each value's source in a comment):

* `atari_shallow`, `atari_deep`: IMPALA App. G (Atari-57 experts);
* `dmlab`: IMPALA App. D (single-task DMLab expert);
* `dmlab30`: IMPALA §5.3 and App. D, one agent on all 30 DMLab-30 levels;
* `minatar`: our reduced-scale setting on MinAtar (Young & Tian 2019's env
  protocol, IMPALA's learning rule);
* `toy`: Catch, for tests.

Entry points override fields by name (`--config_override name=value`).
"""

from __future__ import annotations

import dataclasses

from common import config as config_lib
from common import envs
from common.errors import UsageError, choice_error

NETWORKS = ("shallow", "deep", "deep_x4", "minatar", "toy")
REWARD_CLIPPING = ("abs_one", "dmlab_asymmetric", "none")
LOSS_REDUCTIONS = ("sum", "mean")
# The off-policy corrections compared in IMPALA Table 2 (§5.2.2), which
# `impala.vtrace.off_policy_targets` computes. Here, not in the maths module,
# so that configs load without TensorFlow.
CORRECTIONS = ("vtrace", "none", "epsilon", "one_step_is")
# What XLA compiles: "all" = the whole learner step and the actor's policy step
# (best on accelerators); "losses" = only V-trace and the losses, the network
# going through TF's graph executor, whose oneDNN convolutions ran the shallow
# learner step about 3x faster than XLA's on these CPUs; "auto" = "all" when a GPU
# is visible, else "losses".
XLA_MODES = ("auto", "all", "losses")


@dataclasses.dataclass(frozen=True)
class ImpalaConfig(config_lib.EnvConfig):
    # `EnvConfig.ADDED_FIELDS`. Before `xla`, the whole step ran under XLA ("all"): the same maths, to float32
    # rounding, where "auto" compiles only V-trace and the losses on a CPU.
    ADDED_FIELDS = ("anneal_learning_rate", "xla", "publish_every")

    use_lstm: bool = False
    lstm_size: int = 256
    # Acting.
    num_actors: int = 1
    envs_per_actor: int = 8
    unroll_length: int = 20  # T.
    # Learning.
    batch_size: int = 32  # B, unrolls per learner step.
    discount: float = 0.99
    reward_clipping: str = "abs_one"
    baseline_cost: float = 0.5
    entropy_cost: float = 0.01
    learning_rate: float = 0.0006
    # App. G: annealed linearly to 0 over total_frames. False: constant (LASER's sweeps, §5.1).
    anneal_learning_rate: bool = True
    rmsprop_decay: float = 0.99
    rmsprop_epsilon: float = 0.01
    rmsprop_momentum: float = 0.0
    max_grad_norm: float = 40.0  # Global-norm clip; 0 = none.
    loss_reduction: str = "sum"  # Over time and batch, as IMPALA's release (scalable_agent: tf.reduce_sum).
    correction: str = "vtrace"  # IMPALA Table 2: vtrace, none, epsilon, one_step_is.
    clip_rho_threshold: float = 1.0  # rho_bar (IMPALA §5.2.2: 1 worked best).
    clip_pg_rho_threshold: float = 1.0
    total_frames: int = 200_000_000  # Environment frames; the LR anneals to 0 over it.
    queue_size: int = 128  # Unrolls the queue holds; must exceed batch_size.
    # Learner steps between parameter publishes. IMPALA §3: an actor takes the
    # learner's latest parameters at the start of each unroll, so 1 keeps them
    # freshest; k > 1 saves k - 1 of every k publishes (measured on Pong shallow
    # for issue #13: publishing was 7.7% of the learner's CPU, about 1.5% of the
    # whole run's) at up to k - 1 more learner steps of policy lag, which V-trace
    # corrects (§4). The run reports the lag (`policy_lag`) whatever k is.
    publish_every: int = 1
    xla: str = "auto"  # One of XLA_MODES.
    seed: int = 0
    # Run directory.
    checkpoint_every_s: float = 600.0
    log_every_s: float = 10.0

    def __post_init__(self):
        # Multi-task training (IMPALA §5.3) is IMPALA's own; subclasses (LASER)
        # share this check, and their replay does not handle a suite.
        envs.parse(self.env, suites=type(self) is ImpalaConfig)
        envs.resolve_options(self.env, **dict(self.env_options))
        for name, choices in (
            ("network", NETWORKS),
            ("reward_clipping", REWARD_CLIPPING),
            ("loss_reduction", LOSS_REDUCTIONS),
            ("correction", CORRECTIONS),
            ("xla", XLA_MODES),
        ):
            if getattr(self, name) not in choices:
                raise choice_error(name, getattr(self, name), choices)
        for name in (
            "num_actors", "envs_per_actor", "unroll_length", "batch_size", "total_frames", "publish_every", "lstm_size"
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise UsageError(f"{name}={getattr(self, name)}: must be >= 1")
        config_lib.check_table_size("queue_size", self.queue_size, "unrolls")
        if self.queue_size <= self.batch_size:
            raise UsageError(
                f"queue_size={self.queue_size} must exceed batch_size={self.batch_size}: a Reverb queue "
                "that cannot hold a whole batch blocks the actors before the learner can sample one"
            )
        if not 0.0 <= self.discount <= 1.0:
            raise UsageError(f"discount={self.discount}: must be in [0, 1]")
        if not self.learning_rate > 0:
            raise UsageError(f"learning_rate={self.learning_rate}: must be > 0")
        for name, note in (("max_grad_norm", " (0: no clipping)"), ("baseline_cost", ""), ("entropy_cost", "")):
            if not getattr(self, name) >= 0:
                raise UsageError(f"{name}={getattr(self, name)}: must be >= 0{note}")
        for name in ("clip_rho_threshold", "clip_pg_rho_threshold"):
            # rho_bar = 0 would zero every importance weight: no TD error and no policy gradient (eq. (1)).
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise UsageError(f"{name}={getattr(self, name)}: must be > 0, or None for no clipping")
        if self.correction == "vtrace" and self.clip_rho_threshold is not None and self.clip_rho_threshold < 1:
            # c_bar is 1 (`impala.losses` passes no clip_c_threshold: vtrace's default), and
            # IMPALA §4.1 (as LASER §2.3) assumes rho_bar >= c_bar.
            raise UsageError(
                f"clip_rho_threshold={self.clip_rho_threshold}: must be >= 1 or None (IMPALA §4.1: "
                "rho_bar >= c_bar, and c_bar is 1)"
            )
        config_lib.check_run_fields(self)
        config_lib.check_rmsprop(self)
        if envs.is_suite(self.env):
            self._check_suite()

    def _check_suite(self) -> None:
        """A multi-task run needs an env for every level: each env plays one level (`envs.task_indices`)."""
        levels = len(envs.tasks(self.env))
        if self.num_actors * self.envs_per_actor < levels:
            raise UsageError(
                f"{self.env} has {levels} levels but num_actors x envs_per_actor = {self.num_actors} x "
                f"{self.envs_per_actor} envs: each env plays one level, so some levels would never be trained; "
                f"use at least {levels} envs, e.g. --actors 2 --config_override envs_per_actor={-(-levels // 2)}"
            )

    @property
    def frames_per_step(self) -> int:
        """Environment frames per agent step (the action repeat)."""
        return envs.frames_per_step(self.env, **dict(self.env_options))


PRESETS = {
    "atari_shallow": ImpalaConfig(
        env="atari:pong",
        env_options=(("terminal_on_life_loss", True),),  # App. G: life loss ends training episodes.
        network="shallow",  # Fig. 3 left, Mnih et al. 2016's network.
        # App. G ran 48 actors; 2 processes x 16 envs fill 2 cores (#13), and only the policy lag differs.
        num_actors=2,
        envs_per_actor=16,
        unroll_length=20,  # App. G.
        batch_size=32,  # App. G.
        discount=0.99,  # App. G.
        reward_clipping="abs_one",  # App. G: [-1, 1].
        baseline_cost=0.5,  # App. G.
        entropy_cost=0.01,  # App. G.
        learning_rate=0.0006,  # App. G, annealed linearly to 0.
        rmsprop_epsilon=0.01,  # App. G.
        max_grad_norm=40.0,  # App. G.
        total_frames=200_000_000,  # App. G / Table C.1: 200M frames per game.
    ),
    "dmlab": ImpalaConfig(
        env="dmlab:rooms_watermaze",
        network="deep",  # §5.3: the deep model with an LSTM.
        use_lstm=True,
        num_actors=2,
        envs_per_actor=4,
        unroll_length=100,  # App. D.
        batch_size=32,  # App. D.3, as dmlab30's.
        # App. D.3: DMLab-30's levels, experts included: 0.3 min(tanh r, 0) + 5 max(tanh r, 0).
        reward_clipping="dmlab_asymmetric",
        max_grad_norm=0.0,  # App. D.3 lists no gradient clipping (App. G's 40 is Atari's); the release clips none.
        # The paper sweeps these (App. D.1); values inside its ranges:
        entropy_cost=0.0033,  # log-U[5e-5, 1e-2].
        learning_rate=0.00048,  # log-U[5e-6, 5e-3].
        rmsprop_epsilon=0.1,  # {1e-1, 1e-3, 1e-5, 1e-7}.
        total_frames=1_000_000_000,  # Our budget for one level: §5.3's text gives none for its experts.
    ),
    # IMPALA, deep, multi-task on DMLab-30 (§5.3, Table 3). The paper ran 150
    # actors, a fixed number per level; here 2 actor processes step 15 envs
    # each, one level per env (envs.task_indices), so every level has one env.
    "dmlab30": ImpalaConfig(
        env="dmlab:dmlab30",
        network="deep",  # §5.3: "All models used the deep architecture" (Fig. 3 right), with its LSTM.
        use_lstm=True,
        num_actors=2,
        envs_per_actor=15,  # 2 x 15 = 30 envs: one per level.
        unroll_length=100,  # App. D.3: unroll length 100.
        batch_size=32,  # App. D.3; scalable_agent README's DMLab-30 command: --batch_size=32.
        discount=0.99,  # App. D.3.
        baseline_cost=0.5,  # App. D.3.
        # App. D.3 clips single tasks to [-1, 1] but "DMLab-30, including experts"
        # to [-0.3, 5]: 0.3 min(tanh r, 0) + 5 max(tanh r, 0). The paper's formula: the release's
        # soft_asymmetric (5 tanh(r / 5), times 0.3 below 0) differs, and its command's learning
        # rate and entropy cost below were tuned with that one.
        reward_clipping="dmlab_asymmetric",
        max_grad_norm=0.0,  # App. D.3 lists no gradient clipping (App. G's 40 is Atari's); the release clips none.
        # The paper tunes these by sweep or PBT (App. D.1, F). Its release's
        # DMLab-30 command (scalable_agent README, "Distributed Training on
        # DMLab-30", 150 actors) gives the values below, inside D.1's ranges;
        # the learning rate differs from the `dmlab` preset's 0.00048 (the
        # release's flag default).
        entropy_cost=0.0033391318945337044,  # log-U[5e-5, 1e-2] (D.1); README --entropy_cost.
        learning_rate=0.00031866995608948655,  # log-U[5e-6, 5e-3] (D.1); README; annealed to 0 as the release does.
        rmsprop_epsilon=0.1,  # {1e-1, 1e-3, 1e-5, 1e-7} (D.1); scalable_agent's --epsilon default.
        total_frames=10_000_000_000,  # README's --total_environment_frames: 10B over all 30 levels.
    ),
    "minatar": ImpalaConfig(
        env="minatar:breakout",
        network="minatar",  # Young & Tian's torso: conv 16 3x3, FC 128.
        num_actors=2,
        envs_per_actor=16,
        unroll_length=20,
        # Chosen by a 1M-frame sweep on breakout and asterix over learning rate
        # {6e-4, 2e-3, 6e-3} x batch {32, 8}: App. G's 6e-4 with B = 32 makes
        # only 7.8K updates in 5M frames and stays far below Young & Tian's
        # AC(lambda); more, larger steps (B = 8, 6e-3) learn several times faster.
        batch_size=8,
        learning_rate=0.006,
        discount=0.99,
        entropy_cost=0.01,
        total_frames=5_000_000,  # Young & Tian report returns at 5M frames.
        checkpoint_every_s=300.0,
    ),
    "toy": ImpalaConfig(
        env="toy:catch",
        network="toy",
        num_actors=1,
        envs_per_actor=8,
        unroll_length=9,  # One Catch episode.
        batch_size=16,
        queue_size=64,
        learning_rate=0.005,
        total_frames=120_000,
        log_every_s=5.0,
    ),
}
PRESETS["atari_deep"] = dataclasses.replace(PRESETS["atari_shallow"], network="deep")  # Fig. 3 right.
