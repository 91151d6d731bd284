"""The replay's configuration, apart from `per.replay` so that configs load without Reverb or TensorFlow.

The variants and their defaults are PER's (Schaul et al. 2016): §3.3 and Table 3.
"""

from __future__ import annotations

import dataclasses

from common.errors import UsageError, choice_error
from per import priorities

VARIANTS = ("proportional", "rank", "uniform")


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    variant: str = "proportional"
    capacity: int = 1_000_000  # PER §4: the last 10^6 transitions.
    alpha: float = priorities.PROPORTIONAL["alpha"]  # Table 3: 0.6 proportional, 0.7 rank.
    beta0: float = priorities.PROPORTIONAL["beta0"]  # Table 3: 0.4 proportional, 0.5 rank.
    epsilon: float = 1e-6  # p = |delta| + epsilon (§3.3); PER does not print its value.
    weight_normalization: str = "batch_max"  # Or global_min: whose max_i w_i (§3.4), see `per.config`.
    # Rank-based: item priority updates (a batch's per learner update) between full re-ranks.
    # Ours, not the paper's: PER App. B.2.1 re-sorted a heap kept roughly in order every 10^6
    # steps; between re-ranks our ranks come from a frozen snapshot (`per.replay.RankTracker`),
    # so it re-ranks more often.
    rerank_interval: int = 10_000
    min_size: int = 1  # Items before sampling may start.

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise choice_error("replay variant", self.variant, VARIANTS)
        if self.weight_normalization not in priorities.WEIGHT_NORMALIZATIONS:
            raise choice_error("weight normalization", self.weight_normalization, priorities.WEIGHT_NORMALIZATIONS)
        if self.capacity < 1 or self.min_size < 1 or self.rerank_interval < 1:
            raise UsageError("capacity, min_size and rerank_interval must be >= 1")
        if self.alpha < 0 or self.epsilon < 0 or not 0 <= self.beta0 <= 1:
            raise UsageError("need alpha >= 0, epsilon >= 0 and beta0 in [0, 1]")
        if self.weight_normalization == "global_min" and self.variant == "proportional" and self.epsilon == 0:
            raise UsageError(
                "global_min weights need epsilon > 0: with p = |delta| the least likely item can have P = 0"
            )

    @property
    def selector_exponent(self) -> float:
        return {"proportional": self.alpha, "uniform": 0.0, "rank": 1.0}[self.variant]


PRESETS = {
    "proportional": ReplayConfig(),
    "rank": ReplayConfig(variant="rank", alpha=priorities.RANK_BASED["alpha"], beta0=priorities.RANK_BASED["beta0"]),
    "uniform": ReplayConfig(variant="uniform", alpha=0.0, beta0=0.0),
}
