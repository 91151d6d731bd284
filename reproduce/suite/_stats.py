"""A suite's scores: per-game normalisation and aggregates with stratified-bootstrap intervals.

Aggregates follow Agarwal et al. 2021 ("Deep RL at the edge of the statistical
precipice", `rliable`): the median over games of the mean over seeds, the
mean, the interquartile mean (IQM) over all runs, and the mean with every game
capped at 1.0 (IMPALA §5.3's capped mean); 95% percentile intervals from a
bootstrap that resamples seeds within each game (stratified), games fixed.
"""

from __future__ import annotations

import contextlib
import csv
import functools
from typing import Iterator, Mapping

import numpy as np

from common import scores
from common.errors import UsageError
from reproduce import RESULTS

STATISTICS = ("median", "mean", "iqm", "mean_capped")
# Atari reference tables per agent: IMPALA and LASER evaluate from no-op starts;
# PER reports human starts, which are not public, so ours are no-op starts
# scored against PER's human-starts table (as `per.evaluate` does).
ATARI_PROTOCOL = {"impala": "atari_noop", "laser": "atari_noop", "ddqn": "atari_human_starts"}
NORMALIZATION = {
    "minatar": "score / DQN at 5M frames (Young & Tian 2019, MinAtar has no human scores; "
    "results/published/minatar_young2019_5M.csv)",
    "atari": "(score - random) / |human - random| (common.scores, protocol {protocol})",
    "toy": "score / 1.0, Catch's maximum return",
    "dmlab": "(score - random) / |human - random| (common.scores, protocol dmlab30; IMPALA App. B)",
}


@functools.cache
def minatar_dqn() -> dict[str, float]:
    """Young & Tian 2019's DQN returns at 5M frames, per MinAtar game."""
    with open(RESULTS / "published" / "minatar_young2019_5M.csv", newline="") as f:
        return {row["game"]: float(row["dqn"]) for row in csv.DictReader(f)}


def normalized(agent: str, env: str, score: float) -> float:
    """`score` of game `env` (FAMILY:GAME) on its family's reference scale."""
    family, game = env.split(":")
    if family == "minatar":
        return score / minatar_dqn()[game]
    if family == "atari":
        return scores.normalized(game, score, ATARI_PROTOCOL[agent])
    if family == "toy":
        return score / 1.0
    if family == "dmlab":
        return scores.normalized(game, score, "dmlab30")
    raise UsageError(f"no normalisation for {env}: suites support minatar, atari, dmlab and toy games")


def normalization_notes(agent: str, families: set[str]) -> list[str]:
    """One line per env family in the suite saying how its scores are normalised."""
    return [f"{family}: " + NORMALIZATION[family].format(protocol=ATARI_PROTOCOL[agent]) for family in sorted(families)]


def score_matrix(rows: list[Mapping], games: list[str], seeds: list[int]) -> np.ndarray:
    """Normalised scores as rliable wants them: [num_seeds, num_games]."""
    table = {(row["game"], row["seed"]): row["normalized"] for row in rows}
    return np.array([[table[(game, seed)] for game in games] for seed in seeds], dtype=np.float64)


def complete_seeds(rows: list[Mapping], games: list[str]) -> list[int]:
    """Seeds evaluated on every game: the bootstrap needs a full [seeds, games] matrix."""
    by_seed: dict[int, set[str]] = {}
    for row in rows:
        by_seed.setdefault(row["seed"], set()).add(row["game"])
    return sorted(seed for seed, found in by_seed.items() if found >= set(games))


def _statistics(matrix: np.ndarray) -> np.ndarray:
    from rliable import metrics

    capped = np.mean(np.minimum(matrix, 1.0))
    return np.array(
        [metrics.aggregate_median(matrix), metrics.aggregate_mean(matrix), metrics.aggregate_iqm(matrix), capped]
    )


def aggregates(matrix: np.ndarray, reps: int, seed: int = 0) -> list[dict]:
    """Rows `statistic,value,ci_low,ci_high` for `STATISTICS` over a [seeds, games] matrix."""
    from rliable import library  # Imports arch and statsmodels: only when aggregating.

    if matrix.ndim != 2 or not matrix.size:
        raise UsageError(f"need scores of at least one seed on every game, got shape {matrix.shape}")
    with _global_seed(seed):
        points, intervals = library.get_interval_estimates({"suite": matrix}, _statistics, reps=reps)
    return [
        {
            "statistic": name,
            "value": float(points["suite"][i]),
            "ci_low": float(intervals["suite"][0, i]),
            "ci_high": float(intervals["suite"][1, i]),
        }
        for i, name in enumerate(STATISTICS)
    ]


def improvement(x: np.ndarray, y: np.ndarray, reps: int, seed: int = 0) -> dict:
    """P(X > Y), the probability of improvement of Agarwal et al. 2021 (§5), with its 95% percentile interval.

    x, y: [seeds, games] matrices of two agents on the same games. The
    bootstrap resamples each agent's seeds within each game.
    """
    from rliable import library

    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or not x.size or not y.size:
        raise UsageError(f"need two agents' scores on the same games, got shapes {x.shape} and {y.shape}")
    with _global_seed(seed):
        points, intervals = library.get_interval_estimates(
            {"pair": [x, y]}, lambda a, b: np.array([probability_of_improvement(a, b)]), reps=reps
        )
    return {"value": float(points["pair"][0]), "ci_low": float(intervals["pair"][0, 0]),
            "ci_high": float(intervals["pair"][1, 0])}  # fmt: skip


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """Per game, the chance that a run of X scores above a run of Y, a tie counting a half; the mean over games.

    x: [seeds_x, games], y: [seeds_y, games]. Per game this is the Mann-Whitney
    U statistic over the seeds_x * seeds_y pairs, what rliable's
    `metrics.probability_of_improvement` computes one game at a time with
    scipy; here all pairs at once, so that a bootstrap of thousands of
    resamples takes a second rather than a quarter of a minute.
    """
    above = x[:, None, :] > y[None, :, :]
    tied = x[:, None, :] == y[None, :, :]
    return float(np.mean(above.mean(axis=(0, 1)) + 0.5 * tied.mean(axis=(0, 1))))


@contextlib.contextmanager
def _global_seed(seed: int) -> Iterator[None]:
    """numpy's global generator seeded with `seed` inside the block, the caller's state given back after.

    rliable's stratified bootstrap draws its resamples from the global generator
    (`np.random.choice`), whatever `random_state` it is given.
    """
    caller_state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(caller_state)
