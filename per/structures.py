"""Exact in-memory samplers for P(i) (PER §3.3, App. B.2.1).

* `SumTree`: proportional sampling in O(log N): leaves hold p_i^alpha, each
  parent the sum of its children. Any capacity works: the leaf level is padded
  to a power of two with zero-priority leaves that can never be drawn.
* `RankOrder`: rank-based sampling. Items are kept sorted by |delta| (largest
  first), and a rank k is drawn from the fixed power law P(k) = k^-alpha /
  sum_j j^-alpha, so sampling is O(log N) and an update is one O(N) memmove.

The Blind Cliffwalk study uses these directly, one item at a time, millions of
times. They are pure Python because scalar work on NumPy arrays is slower.
"""

from __future__ import annotations

import bisect
import itertools
import random


class SumTree:
    """Priorities p_i^alpha of `capacity` items; draws i with probability value_i / total."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: must be >= 1")
        self.capacity = capacity
        self._leaves = 1 << (capacity - 1).bit_length()  # Next power of two.
        self._nodes = [0.0] * (2 * self._leaves)

    @property
    def total(self) -> float:
        return self._nodes[1]

    def get(self, index: int) -> float:
        return self._nodes[self._leaves + index]

    def set(self, index: int, value: float) -> None:
        if not 0 <= index < self.capacity:
            raise IndexError(f"index {index} outside [0, {self.capacity})")
        if value < 0:
            raise ValueError(f"priority {value} < 0")
        node = self._leaves + index
        self._nodes[node] = value
        node //= 2
        while node:
            self._nodes[node] = self._nodes[2 * node] + self._nodes[2 * node + 1]
            node //= 2

    def find(self, mass: float) -> int:
        """The index whose cumulative range contains `mass` in [0, total)."""
        node = 1
        while node < self._leaves:
            left = self._nodes[2 * node]
            if mass < left or self._nodes[2 * node + 1] == 0.0:
                node = 2 * node
            else:
                mass -= left
                node = 2 * node + 1
        return min(node - self._leaves, self.capacity - 1)

    def sample(self, rng: random.Random) -> int:
        return self.find(rng.random() * self.total)


class RankOrder:
    """Items sorted by |delta|; `sample` draws rank k with P(k) proportional to k^-alpha."""

    def __init__(self, size: int, alpha: float, initial: float = float("inf")):
        self._keys = [(-initial, i) for i in range(size)]  # Sorted ascending: largest |delta| first.
        self._value = [initial] * size
        weights = [k**-alpha for k in range(1, size + 1)]
        total = sum(weights)
        self._cdf = list(itertools.accumulate(w / total for w in weights))
        self._cdf[-1] = 1.0

    def rank_probability(self, rank: int) -> float:
        """P(rank), 1-based."""
        return self._cdf[rank - 1] - (self._cdf[rank - 2] if rank > 1 else 0.0)

    def sample(self, rng: random.Random) -> int:
        rank = bisect.bisect_left(self._cdf, rng.random())
        return self._keys[rank][1]

    def update(self, index: int, value: float) -> None:
        position = bisect.bisect_left(self._keys, (-self._value[index], index))
        del self._keys[position]
        self._value[index] = value
        bisect.insort(self._keys, (-value, index))

    def ranks(self) -> dict[int, int]:
        """{index: rank}, 1-based (for tests)."""
        return {index: rank for rank, (_, index) in enumerate(self._keys, start=1)}
