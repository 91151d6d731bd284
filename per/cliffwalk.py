"""The Blind Cliffwalk (PER §3.1, Fig. 1, App. B.1) and Q-learning from a fixed memory.

n states in a row; two actions, one 'right' and one 'wrong', and which is which
alternates from state to state, so nothing generalises across states. 'Right'
moves on, 'wrong' ends the episode with reward 0; 'right' in the last state
ends it with reward 1.

The memory holds every transition of all 2^n action sequences executed until
termination, in random order: 2^(n+1) - 2 transitions, of which exactly one
carries the reward. Q-learning replays it (App. B.1):

    delta = R + gamma_t max_a Q(S', a) - Q(S, A)         (eq. 2; gamma_t = 0 at the end)
    theta <- theta + eta delta phi(S, A)                   (eq. 3)

with gamma = 1 - 1/n, eta = 1/4, theta ~ N(0, 0.1), until the mean squared error
of Q against the true Q* is below 1e-3. Representations: tabular (one-hot over
(s, a)) or linear (per action, a one-hot state plus a bias feature).

Replay variants: `uniform`; `oracle` (the transition whose update most reduces
the global loss, the squared error to Q*, in hindsight, §3.1; with the linear
representation it can stall where every update would raise that error, which
is reported as not converged); `greedy` (largest last-seen |delta| first,
new transitions at maximal priority, §3.2); and the stochastic `proportional`
and `rank` (eq. 1, §3.3) with no IS correction.
"""

from __future__ import annotations

import dataclasses
import heapq
import random

import numpy as np

from per.structures import RankOrder, SumTree

VARIANTS = ("uniform", "oracle", "greedy", "proportional", "rank")
REPRESENTATIONS = ("tabular", "linear")


@dataclasses.dataclass(frozen=True)
class Settings:
    step_size: float = 0.25  # eta (App. B.1).
    init_std: float = 0.1  # theta ~ N(0, 0.1) (App. B.1).
    mse_threshold: float = 1e-3  # Convergence (App. B.1).
    # App. B.1 does not give alpha or epsilon for the study; we use Table 3's
    # alphas and a small epsilon.
    alpha_proportional: float = 0.6
    alpha_rank: float = 0.7
    epsilon: float = 1e-6
    max_updates: int = 50_000_000  # A run that has not converged by then reports None.


def right_action(state: int) -> int:
    """Which action is 'right' alternates per state."""
    return state % 2


def memory(n: int, rng: random.Random) -> list[tuple[int, int, float, bool]]:
    """All transitions (s, a, r, terminal) of all 2^n action sequences, shuffled by sequence.

    s' is s + 1 unless terminal. Sequences sharing a prefix repeat its
    transitions, so transitions appear at the frequency random play meets them.
    """
    sequences = list(range(2**n))
    rng.shuffle(sequences)
    transitions = []
    for sequence in sequences:
        for state in range(n):
            action = (sequence >> state) & 1
            right = action == right_action(state)
            last = state == n - 1
            transitions.append((state, action, 1.0 if right and last else 0.0, (not right) or last))
            if not right:
                break
    assert len(transitions) == 2 ** (n + 1) - 2
    return transitions


def true_q(n: int) -> list[list[float]]:
    """Q*[s][a]: gamma^(n-1-s) for the right action, 0 for the wrong one."""
    gamma = 1.0 - 1.0 / n
    return [[gamma ** (n - 1 - s) if a == right_action(s) else 0.0 for a in range(2)] for s in range(n)]


class QFunction:
    """Q(s, a) = theta . phi(s, a), tabular or linear, with the squared error to Q* kept current."""

    def __init__(self, n: int, representation: str, rng: random.Random, settings: Settings):
        self.n, self.linear, self.eta = n, representation == "linear", settings.step_size
        self.gamma = 1.0 - 1.0 / n
        self.target = true_q(n)
        self.weights = [[rng.gauss(0.0, settings.init_std) for _ in range(n)] for _ in range(2)]
        self.bias = [rng.gauss(0.0, settings.init_std) if self.linear else 0.0 for _ in range(2)]
        self.row_sse = [self._row_sse(a) for a in range(2)]

    def q(self, s: int, a: int) -> float:
        return self.weights[a][s] + self.bias[a]

    def _row_sse(self, a: int) -> float:
        return sum((self.weights[a][s] + self.bias[a] - self.target[s][a]) ** 2 for s in range(self.n))

    def mse(self) -> float:
        return (self.row_sse[0] + self.row_sse[1]) / (2 * self.n)

    def td_error(self, transition) -> float:
        s, a, r, terminal = transition
        bootstrap = 0.0 if terminal else self.gamma * max(self.q(s + 1, 0), self.q(s + 1, 1))
        return r + bootstrap - self.q(s, a)

    def sse_after(self, transition, delta: float) -> float:
        """The total squared error if `transition` were applied with TD error `delta`."""
        s, a = transition[0], transition[1]
        step = self.eta * delta
        if not self.linear:
            old = self.q(s, a) - self.target[s][a]
            return self.row_sse[0] + self.row_sse[1] - old**2 + (old + step) ** 2
        row = sum(
            (self.weights[a][x] + self.bias[a] + step * (1 + (x == s)) - self.target[x][a]) ** 2 for x in range(self.n)
        )
        return self.row_sse[1 - a] + row

    def update(self, transition, delta: float) -> None:
        s, a = transition[0], transition[1]
        step = self.eta * delta
        if self.linear:
            self.weights[a][s] += step
            self.bias[a] += step
            self.row_sse[a] = self._row_sse(a)
        else:
            old = self.q(s, a) - self.target[s][a]
            self.weights[a][s] += step
            self.row_sse[a] += (old + step) ** 2 - old**2


def updates_to_converge(
    variant: str, representation: str, n: int, seed: int, settings: Settings | None = None
) -> int | None:
    """Q-learning updates until MSE < threshold, replaying with `variant`; None if capped."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; accepted: {', '.join(VARIANTS)}")
    settings = settings or Settings()
    rng = random.Random(seed)
    transitions = memory(n, rng)
    q = QFunction(n, representation, rng, settings)
    choose, after_update = _sampler(variant, transitions, q, rng, settings)
    for update in range(1, settings.max_updates + 1):
        index = choose()
        delta = q.td_error(transitions[index])
        if variant == "oracle" and q.sse_after(transitions[index], delta) >= q.mse() * 2 * q.n * (1 - 1e-12):
            # By the oracle's own criterion no transition lowers the error to
            # Q* any more: it has stalled and would choose in circles forever.
            return None
        q.update(transitions[index], delta)
        after_update(index, delta)
        if q.mse() < settings.mse_threshold:
            return update
    return None


def _sampler(variant, transitions, q: QFunction, rng: random.Random, settings: Settings):
    """(choose() -> index, after_update(index, delta)) for a replay variant."""
    size = len(transitions)
    ignore = lambda index, delta: None  # noqa: E731
    if variant == "uniform":
        return (lambda: rng.randrange(size)), ignore
    if variant == "oracle":
        # Duplicates act identically, so each distinct transition is tried once.
        distinct = {t: i for i, t in enumerate(transitions)}
        return (
            lambda: min(distinct.values(), key=lambda i: q.sse_after(transitions[i], q.td_error(transitions[i])))
        ), ignore
    if variant == "greedy":
        # Max-heap of last-seen |delta|; new transitions enter at maximal priority.
        heap = [(-float("inf"), i) for i in range(size)]
        heapq.heapify(heap)
        return (lambda: heapq.heappop(heap)[1]), (lambda index, delta: heapq.heappush(heap, (-abs(delta), index)))
    if variant == "proportional":
        tree = SumTree(size)
        for i in range(size):
            tree.set(i, 1.0)  # Maximal priority p = 1 (Algorithm 1, line 2).
        alpha, epsilon = settings.alpha_proportional, settings.epsilon
        return (lambda: tree.sample(rng)), (lambda index, delta: tree.set(index, (abs(delta) + epsilon) ** alpha))
    order = RankOrder(size, settings.alpha_rank)
    return (lambda: order.sample(rng)), (lambda index, delta: order.update(index, abs(delta)))


def replay_size(n: int) -> int:
    return 2 ** (n + 1) - 2


def median_and_range(values: list[int | None]) -> tuple[float, float, float]:
    finite = [v for v in values if v is not None]
    if len(finite) < len(values):
        return float("nan"), float("nan"), float("nan")
    return float(np.median(finite)), float(min(finite)), float(max(finite))
