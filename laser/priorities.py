"""LASER's prioritized replay alternative: priorities from the critic's loss (App. A.2, Fig. 4 right).

The paper's LASER samples its replay uniformly (§5.2). App. A.2 compares that
with "prioritization via the critic's loss", with "full (beta = 1) and partial
(beta = 0.5) importance corrections". For the replayed unroll i (PER's
transition), with N items in the replay:

    P(i) = p_i^alpha / sum_k p_k^alpha        (PER eq. 1: Reverb's `Prioritized(alpha)` selector)
    w_i  = (N P(i))^-beta / max_j w_j         (PER §3.4; max over the batch's replayed unrolls: our reading)
    p_i  = (L_i + epsilon) / M                (L_i: the unroll's critic loss, `laser.losses`)

beta is held fixed, as in Fig. 4 right (PER anneals it to 1).

New items. M is the running maximum of L + epsilon over every priority the
learner has written, so every priority is in (0, 1] and the actors insert new
unrolls at 1.0, which is always the maximum: PER's rule that a new item enters
at the largest priority (Algorithm 1, line 6) holds without the actors having
to learn the maximum from the learner. Scaling every priority by the same M
changes no P(i); an item last updated when M was smaller keeps a relatively
larger priority until it is sampled again, the staleness PER's priorities have
anyway.

epsilon keeps an unroll whose critic loss is 0 reachable (PER §3.3). App. A.2
mixes the sampling distribution with a uniform one instead; Reverb's selector
has no such mixture.

A sample may predate the priority updates of the last few batches (the
dataset's prefetch and in-flight samples), as in Acme's prioritized DQN. M is
not checkpointed, and neither is the replay: a resumed run refills it with new
items at 1.0 and starts M again.
"""

from __future__ import annotations

import numpy as np
import reverb

from per import priorities as per_priorities

# PER §3.3's epsilon in p = |delta| + epsilon (PER does not print it either).
EPSILON = 1e-6


def normalised_priorities(critic_losses: np.ndarray, scale: float) -> tuple[np.ndarray, float]:
    """(p_i = (L_i + epsilon) / M, M), M = max(scale, max_i L_i + epsilon) the new running maximum.

    Args:
      critic_losses: [k] L_i of the replayed unrolls.
      scale: M so far (0 before the first update).
    """
    raw = np.asarray(critic_losses, np.float64) + EPSILON
    scale = max(scale, float(raw.max()))
    return raw / scale, scale


class CriticLossPriorities:
    """The learner's side of the prioritized replay: a sample's IS weights, then its new priorities."""

    def __init__(self, client: reverb.Client, table: str, beta: float):
        self.client, self.table, self.beta = client, table, beta
        self.scale = 0.0  # M.

    def importance_weights(self, info: reverb.SampleInfo) -> np.ndarray:
        """[k] w_i of a batch's samples, from their `probability` and the table size N."""
        return per_priorities.importance_weights(info.probability.numpy(), int(info.table_size[0]), self.beta)

    def update(self, keys: np.ndarray, critic_losses: np.ndarray) -> np.ndarray:
        """Writes the sampled items' new priorities (an item evicted since is ignored by Reverb); returns them."""
        priorities, self.scale = normalised_priorities(critic_losses, self.scale)
        self.client.mutate_priorities(self.table, updates=dict(zip(np.asarray(keys).tolist(), priorities.tolist())))
        return priorities
