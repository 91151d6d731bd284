"""Prioritized experience replay's sampling maths (Schaul et al. 2016, §3.3-3.4).

Pure NumPy functions of the Reverb replay (`per/replay.py`), which samples by
eq. 1 itself (Reverb's `Prioritized` selector; rank-based: `replay.RankTracker`
stores rank(i)^-alpha); the tests hold float64 references of P(i).

    P(i) = p_i^alpha / sum_k p_k^alpha                       (eq. 1)
    proportional: p_i = |delta_i| + epsilon
    rank-based:   p_i = 1 / rank(i), rank 1 = the largest |delta|
    w_i = (N P(i))^-beta / max_j w_j                         (§3.4, Algorithm 1 line 10)

with beta annealed linearly from beta_0 to 1 over training (§3.4).
"""

from __future__ import annotations

import numpy as np

# PER App. B.2.2, Table 3: (alpha, beta_0) of each variant.
PROPORTIONAL = {"alpha": 0.6, "beta0": 0.4}
RANK_BASED = {"alpha": 0.7, "beta0": 0.5}
WEIGHT_NORMALIZATIONS = ("batch_max", "global_min")


def proportional_priority(td_errors: np.ndarray, epsilon: float) -> np.ndarray:
    """p = |delta| + epsilon (§3.3); epsilon > 0 keeps every item reachable."""
    return np.abs(td_errors) + epsilon


def importance_weights(
    probabilities: np.ndarray,
    table_size: int,
    beta: float,
    normalization: str = "batch_max",
    min_probability: float | None = None,
) -> np.ndarray:
    """IS weights w_i = (N P(i))^-beta, scaled so they only shrink updates (§3.4).

    Args:
      probabilities: [k] P(i) of the sampled items.
      table_size: N, the number of items in the replay.
      beta: the IS exponent; 1 corrects fully.
      normalization: which max_i w_i the weights are divided by (§3.4,
        Algorithm 1 line 10; the paper does not say over which items):
        `batch_max`, the largest weight in the batch; `global_min`, the weight
        of the least likely item in the replay, `min_probability` (or of the
        batch's, if it is less likely), which bounds every weight by 1 across
        batches.

    Returns [k] weights in (0, 1].
    """
    probabilities = np.asarray(probabilities, np.float64)
    weights = np.power(table_size * probabilities, -beta)
    if normalization == "batch_max":
        return weights / weights.max()
    if normalization == "global_min":
        if min_probability is None:
            raise ValueError("global_min normalization needs min_probability")
        # A batch drawn before the latest priority writes may hold an item less
        # likely than the replay's least likely one now: it weighs 1.
        least = min(min_probability, float(probabilities.min()))
        return weights / np.power(table_size * least, -beta)
    raise ValueError(f"unknown normalization {normalization!r}; accepted: {', '.join(WEIGHT_NORMALIZATIONS)}")
