"""LASER's configuration: IMPALA's fields plus the replay and the trust region.

Presets (each value's source in a comment):

* `atari_laser`: LASER §5.1's Atari agent (the sweeps' setting: 96% replay);
* `minatar_laser`: our reduced-scale setting on MinAtar (IMPALA's `minatar`
  preset with LASER's replay and trust region);
* `minatar_laser_a2`: App. A.2 / Fig. 4 right at MinAtar scale (50% replay, a
  smaller replay); its arms are this preset as is (uniform) and with
  `--config_override replay_priority=critic_loss` and
  `--config_override importance_sampling_exponent=0.5` or `=1` (prioritized);
* `toy_laser`: Catch, for tests.

Units: `replay_capacity` and `min_replay_size` count observations (env steps),
as the paper does ("a capacity of 10 million observations"); the table holds
unrolls of T of them. A batch of B unrolls holds B_online from the queue, in
queue order, then B_replay sampled from the replay:
B_online = round(B (1 - replay_fraction)).

The replay samples uniformly (the paper's LASER) or, with
`replay_priority="critic_loss"`, in proportion to p^alpha with p each unroll's
critic loss, its updates weighted by (N P)^-beta (App. A.2, `laser.priorities`).

LSTM agents replay stale states unless `recompute_replay_state` is set: then
actors store whole episodes and a replayer recomputes the states from each
episode's start with the newest parameters (App. A.2, App. B; `laser.replayer`).
The paper does so for its LSTM agents (DMLab's PreCo LSTM); none of the presets
here has an LSTM (we read §5.1's Atari network as feed-forward; the paper does
not say), so all leave it off; an LSTM preset (e.g. `--config_override
use_lstm=true`) should turn it on.
"""

from __future__ import annotations

import dataclasses

from common import config as config_lib
from common.errors import UsageError, choice_error
from impala.config import PRESETS as IMPALA_PRESETS
from impala.config import ImpalaConfig

# Replay fractions of LASER Fig. 2 left and §5.1 (0 is IMPALA on the mixed-batch code path).
PAPER_REPLAY_FRACTIONS = (0.0, 0.5, 0.75, 0.875, 0.96, 1.0)
# How the replay samples: uniformly (§5.2, the paper's choice) or by the critic's loss (App. A.2).
REPLAY_PRIORITIES = ("uniform", "critic_loss")


@dataclasses.dataclass(frozen=True)
class LaserConfig(ImpalaConfig):
    ADDED_FIELDS = (  # `EnvConfig.ADDED_FIELDS`: since LASER's first config, which had IMPALA's others.
        "publish_every", "recompute_replay_state", "max_replay_episode_steps", "replay_priority", "priority_exponent",
        "importance_sampling_exponent",
    )  # fmt: skip

    # 1 - alpha of Algorithm 1: the share of each batch replayed. 1 is pure replay
    # (Fig. 2 left's failure case): the learner still dequeues one fresh unroll a
    # step, to pace the actors and count frames and episodes, but learns from replay only.
    replay_fraction: float = 0.875
    replay_capacity: int = 10_000_000  # Observations; §5.1 / Fig. 2: 10M, FIFO.
    min_replay_size: int = 0  # Observations before replay sampling starts; 0: one replay batch's worth.
    trust_region: bool = True  # §4: reject steps whose behaviour is too far from pi (eq. 8).
    # b of §4.2: a step is accepted when beta_KL = KL(pi || pi~_mu) < b (§4.3).
    # The paper does not print b; 0.3 nats is our choice (README, the LASER section).
    trust_region_threshold: float = 0.3
    # -1: a lone agent. i >= 0: member i of a shared-replay sweep (`laser.sweep`),
    # with its own queue_i and params_i tables beside the one shared replay.
    sweep_member: int = -1
    replay_priority: str = "uniform"  # One of REPLAY_PRIORITIES; App. A.2 / Fig. 4 right compares them.
    # alpha of P(i) = p_i^alpha / sum_k p_k^alpha. App. A.2 does not print it: PER's
    # proportional variant's 0.6 (Schaul et al. 2016, Table 3).
    priority_exponent: float = 0.6
    # beta of the IS weights (N P(i))^-beta: Fig. 4 right runs 0.5 and 1, and "the best
    # prioritized replay agent uses full importance sampling corrections (beta = 1)".
    importance_sampling_exponent: float = 1.0
    # App. A.2 / App. B: replay whole episodes, recomputing the LSTM state from each
    # episode's start with the newest parameters. False: the actor's stored (stale)
    # state, Fig. 4 right's "no refresh". Needs use_lstm and replay; a lone, uniform agent.
    recompute_replay_state: bool = False
    # The longest episode stored whole, in steps: the actors' writers keep this many
    # steps alive per env. A longer episode is cut into segments; the replayer treats
    # a cut as the end of an episode and starts the next segment from the zero state.
    max_replay_episode_steps: int = 1000

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.replay_fraction <= 1.0:
            raise UsageError(f"replay_fraction={self.replay_fraction}: must be in [0, 1] (0.875 replays 7 of 8)")
        if not self.trust_region_threshold > 0:
            # KL >= 0, so b = 0 would reject every step but those that rounding lets through.
            raise UsageError(f"trust_region_threshold={self.trust_region_threshold}: must be > 0 (a KL in nats)")
        if self.min_replay_size < 0:
            raise UsageError(f"min_replay_size={self.min_replay_size}: must be >= 0 (0: one replay batch's worth)")
        if self.sweep_member < -1:
            raise UsageError(f"sweep_member={self.sweep_member}: -1 (a lone agent) or a member index >= 0")
        self._check_priorities()
        self._check_recompute()
        if self.trust_region and self.correction != "vtrace":
            raise UsageError(
                f"correction={self.correction!r} with trust_region=True: the trust region is defined for V-trace "
                "(eq. 8); use correction=vtrace or trust_region=False"
            )
        online, replayed = self.online_batch_size, self.replay_batch_size
        if 0 < self.replay_fraction < 1 and not (online and replayed):
            raise UsageError(
                f"replay_fraction={self.replay_fraction} of batch_size={self.batch_size} rounds to {online} online "
                f"and {replayed} replayed unrolls; a mixed batch needs at least one of each: change either"
            )
        # In observations, which bound the tables' unrolls and episodes (each one observation at least).
        config_lib.check_table_size("replay_capacity", self.replay_capacity, "observations")
        if replayed and self.replay_capacity_unrolls < replayed:
            raise UsageError(
                f"replay_capacity={self.replay_capacity} observations hold {self.replay_capacity_unrolls} unroll(s) "
                f"of unroll_length={self.unroll_length}, fewer than a replay batch of {replayed}; give at least "
                f"replay_capacity={replayed * self.unroll_length}"
            )
        if replayed and self.min_replay_unrolls > self.replay_capacity_unrolls:
            raise UsageError(
                f"min_replay_size={self.min_replay_size} exceeds replay_capacity={self.replay_capacity}: "
                "sampling would never start"
            )
        if replayed and self.min_replay_unrolls > self.queue_size:
            raise UsageError(
                f"min_replay_size={self.min_replay_size} observations ({self.min_replay_unrolls} unrolls) exceed "
                f"queue_size={self.queue_size} unrolls: the actors block on the full queue before the replay "
                "fills; lower min_replay_size or raise queue_size"
            )

    def _check_priorities(self) -> None:
        if self.replay_priority not in REPLAY_PRIORITIES:
            raise choice_error("replay_priority", self.replay_priority, REPLAY_PRIORITIES)
        if self.priority_exponent < 0:
            raise UsageError(f"priority_exponent={self.priority_exponent}: must be >= 0 (alpha; 0 samples uniformly)")
        if not 0.0 <= self.importance_sampling_exponent <= 1.0:
            raise UsageError(
                f"importance_sampling_exponent={self.importance_sampling_exponent}: must be in [0, 1] "
                "(beta; 1 corrects fully)"
            )
        if self.replay_priority != "uniform" and self.sweep_member >= 0:
            raise UsageError(
                f"replay_priority={self.replay_priority} in a sweep: one agent's critic loss is ill-defined as the "
                "priority of a replay shared by several agents (LASER §5.2); sweeps use replay_priority=uniform"
            )

    def _check_recompute(self) -> None:
        if self.max_replay_episode_steps < 1:
            raise UsageError(f"max_replay_episode_steps={self.max_replay_episode_steps}: must be >= 1")
        if not self.recompute_replay_state:
            return
        why = None
        if not self.use_lstm:
            why = "there is no LSTM state to recompute: set use_lstm=true"
        elif not self.replay_batch_size:
            why = "nothing is replayed: set replay_fraction > 0"
        elif self.replay_priority != "uniform":
            why = "App. A.2 recomputes for uniform replay only (a prioritized replay samples mid-episode)"
        elif self.sweep_member >= 0:
            why = "not yet in a shared-replay sweep"
        if why:
            raise UsageError(f"recompute_replay_state=True: {why}")

    @property
    def prioritized_replay(self) -> bool:
        """Whether the replay samples by priority (and the learner weights and re-prioritizes)."""
        return self.replay_priority != "uniform" and self.replay_batch_size > 0

    @property
    def online_batch_size(self) -> int:
        """B_online: unrolls from the queue in each batch."""
        return round(self.batch_size * (1.0 - self.replay_fraction))

    @property
    def replay_batch_size(self) -> int:
        """B_replay: unrolls sampled from the replay in each batch."""
        return self.batch_size - self.online_batch_size

    @property
    def dequeued_per_step(self) -> int:
        """Fresh unrolls the learner takes from the queue each step (one even with pure replay)."""
        return max(self.online_batch_size, 1)

    @property
    def replay_capacity_unrolls(self) -> int:
        return self.replay_capacity // self.unroll_length

    @property
    def replay_capacity_episodes(self) -> int:
        """Episodes the `episodes` table holds: at most `replay_capacity` observations, whatever their lengths."""
        return max(self.replay_capacity // self.max_replay_episode_steps, 1)

    @property
    def min_replay_episodes(self) -> int:
        """Episodes before sampling starts: `min_replay_size`, or a replay batch, of observations at the longest."""
        observations = max(self.min_replay_size, self.replay_batch_size * self.unroll_length)
        return min(-(-observations // self.max_replay_episode_steps), self.replay_capacity_episodes)

    @property
    def min_replay_unrolls(self) -> int:
        return max(-(-self.min_replay_size // self.unroll_length), self.replay_batch_size, 1)


# laser.sweep's grid (§5.1): the learning rate and entropy cost times each factor.
SWEEP_FACTORS = (1.0, 0.5, 2.0)  # Centre first, so a smaller sweep keeps the preset's own values.
MAX_SWEEP = len(SWEEP_FACTORS) ** 2


def sweep_members(base: LaserConfig, count: int) -> list[LaserConfig]:
    """The first `count` of the 3 x 3 grid of (learning rate, entropy cost) around the base's."""
    if not 1 <= count <= MAX_SWEEP:
        raise UsageError(f"--agents={count}: a sweep has 1 to {MAX_SWEEP} members (the lr x entropy grid)")
    grid = [(lr, entropy) for lr in SWEEP_FACTORS for entropy in SWEEP_FACTORS]
    grid.sort(key=lambda f: (f != (1.0, 1.0), f))  # The centre first.
    return [
        dataclasses.replace(
            base,
            learning_rate=base.learning_rate * lr,
            entropy_cost=base.entropy_cost * entropy,
            seed=base.seed * MAX_SWEEP + i,  # Sweeps from base seeds s and s + 1 share no member's seed.
            sweep_member=i,
        )  # fmt: skip
        for i, (lr, entropy) in enumerate(grid[:count])
    ]


def _laser(base: ImpalaConfig, **fields) -> LaserConfig:
    return LaserConfig(**{**dataclasses.asdict(base), **fields})


PRESETS = {
    "atari_laser": _laser(
        IMPALA_PRESETS["atari_shallow"],  # IMPALA App. G for everything not below (LASER §5.1 builds on it).
        network="deep_x4",  # §5.1: IMPALA's deep network with 4x the channels (Kaiser et al. 2019).
        discount=0.995,  # §5.1, following Xu et al. 2018.
        max_grad_norm=0.0,  # §5.1: no gradient clipping by norm.
        unroll_length=19,  # §5.1: trajectories of 19 steps.
        # App. D: "a random number of no-op actions (up to 37 in our case)" at reset, in the training
        # episodes its scores average; life loss ends a training episode as in IMPALA App. G.
        env_options=(("terminal_on_life_loss", True), ("noop_max", 37)),
        # §5.1: "mini-batches of 32 (regular) and 128 (replay)" and "96% replay per
        # batch": 32 + 128 would be 80% replay. We read 32 as the no-replay
        # baseline's batch and 128 as the replay agents' whole batch, of which 96%
        # is replay: 5 online + 123 replayed unrolls (96.1%).
        batch_size=128,
        replay_fraction=0.96,  # §5.1.
        # The paper prints no Atari capacity (its lone Atari agent: 15M, §5.1); 10M
        # is its DMLab setting (§5.3 / Fig. 2 right), our choice here.
        replay_capacity=10_000_000,
        queue_size=256,
        # §5.1: the sweeps use constant learning rates and entropy costs, centred on
        # IMPALA's (6e-4, 1e-2); laser.sweep spreads them by {1/2, 1, 2}.
        learning_rate=0.0006,
        anneal_learning_rate=False,
        entropy_cost=0.01,
        trust_region=True,
    ),
    "minatar_laser": _laser(
        IMPALA_PRESETS["minatar"],  # Our MinAtar IMPALA setting (reduced scale).
        batch_size=16,  # 2 online + 14 replayed at 87.5%.
        replay_fraction=0.875,  # §5.3: 87.5% worked best (Fig. 2).
        replay_capacity=500_000,  # Reduced scale (the paper's 10M is DMLab's, §5.3): half a 1M-frame study run.
        queue_size=64,
        trust_region=True,
    ),
    "minatar_laser_a2": _laser(
        IMPALA_PRESETS["minatar"],  # As minatar_laser, but for App. A.2's replay settings.
        batch_size=16,  # 8 online + 8 replayed.
        replay_fraction=0.5,  # App. A.2, Fig. 4 right: "All replay experiments use 50% replay ratio".
        # Fig. 4 right: "a capacity of 3 million observations", 0.3 of the 10M of §5.3;
        # scaled as minatar_laser's 500K scales the 10M.
        replay_capacity=150_000,
        queue_size=64,
        trust_region=True,
    ),
    "toy_laser": _laser(
        IMPALA_PRESETS["toy"],
        replay_fraction=0.875,  # 2 online + 14 replayed.
        replay_capacity=20_000,
        trust_region=True,
    ),
}
