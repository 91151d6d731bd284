"""The papers' numbers beside a suite's: published per-game scores and their aggregates.

Each agent and preset of a suite (suite.json) has one published per-game column,
read from the papers' tables in `results/published/` (see its README):

* impala: IMPALA App. C.1, shallow experts (preset `atari_deep`: deep experts),
  200M frames, no-op starts like ours;
* ddqn: PER Table 7, tuned Double DQN (presets `atari_ddqn_rank` and
  `atari_ddqn_prop`: rank-based and proportional prioritized DDQN). PER
  evaluates from human starts and normalises with that protocol's random and
  human scores (eq. 4), as we normalise ours, which are no-op starts;
* laser: LASER (ICLR version) App. D Table 2, the single agent at 200M frames.

MinAtar has no human scores: its published column is Young & Tian 2019's DQN
at 5M frames, the score ours are normalised by, so its normalised value is 1.
Published scores are normalised by `_stats.normalized`, as ours are, and
aggregated by `common.scores`, as `reproduce.scores.published_tables`
recomputes the papers' own aggregates.
"""

from __future__ import annotations

import csv
import functools
from typing import Mapping, NamedTuple

from common import scores
from reproduce import RESULTS
from reproduce.suite import _stats

PUBLISHED = RESULTS / "published"
STATISTICS = ("median", "mean")
# PER Table 7 columns of the prioritized presets; any other ddqn preset is tuned Double DQN.
DDQN_COLUMNS = {"atari_ddqn_rank": "ddqn_rank", "atari_ddqn_prop": "ddqn_prop"}


class Reference(NamedTuple):
    """One published per-game column and what it is."""

    label: str  # For tables and legends.
    table: str  # File in results/published/.
    column: str
    note: str  # How its protocol compares with ours.


def reference(agent: str, preset: str, family: str) -> Reference | None:
    """The published column the suite's `family` games of `agent` (`preset`) are compared with."""
    if family == "minatar":
        note = "mean return of the final 100 training episodes (v2 figures); the normalising score, so 1.0"
        return Reference("DQN at 5M frames (Young & Tian 2019)", "minatar_young2019_5M.csv", "dqn", note)
    if family != "atari":
        return None
    if agent == "impala":
        size = "deep" if preset == "atari_deep" else "shallow"
        note = "no-op starts, as ours"
        return Reference(
            f"IMPALA {size} experts, 200M frames (App. C.1)", "impala_table_c1.csv", f"impala_{size}", note
        )
    if agent == "ddqn":
        column = DDQN_COLUMNS.get(preset, "ddqn")
        note = (
            "PER evaluates from human starts and is normalised with PER Table 7's own random and human scores; "
            "ours are no-op starts (human starts are not public), normalised with the same table"
        )
        return Reference(f"PER Table 7, `{column}` (human starts)", "per_table7_raw.csv", column, note)
    if agent == "laser":
        note = (
            "no-op starts, as ours; LASER's printed medians differ from those of its per-game Table 2, "
            "which the paper does not explain (results/published/README.md)"
        )
        return Reference(
            "LASER single agent, 200M frames (App. D Table 2)", "laser_table2.csv", "laser_no_sweep_200M", note
        )
    return None


@functools.cache
def column(table: str, name: str) -> dict[str, float]:
    """`{game: score}` of column `name` in results/published/`table` (games without a score left out)."""
    with open(PUBLISHED / table, newline="") as f:
        return {row["game"]: float(row[name]) for row in csv.DictReader(f) if row[name]}


def published(agent: str, preset: str, env: str) -> tuple[float, float] | None:
    """(raw, normalised) published score of `env` (FAMILY:GAME), normalised as ours; None if unpublished."""
    family, _, game = env.partition(":")
    ref = reference(agent, preset, family)
    raw = None if ref is None else column(ref.table, ref.column).get(game)
    return None if raw is None else (raw, _stats.normalized(agent, env, raw))


def protocols(agent: str, family: str) -> list[str | None]:
    """Normalisations to aggregate with: the suite's (None outside Atari) and the paper's own if it differs."""
    if family != "atari":
        return [None]
    own = scores.PAPER_PROTOCOLS.get(agent)
    return [_stats.ATARI_PROTOCOL[agent], *([own] if own else [])]


def summary(agent: str, family: str, by_game: Mapping[str, float], protocol: str | None) -> dict[str, float]:
    """Median, mean and capped mean of raw scores `by_game`, normalised by `protocol` (None: as ours)."""
    if protocol is not None:
        return scores.aggregate(by_game, protocol)
    return scores.summary([_stats.normalized(agent, f"{family}:{game}", raw) for game, raw in by_game.items()])


def printed(ref: Reference, statistic: str) -> float | None:
    """The paper's own aggregate of `ref`'s column over all its games, as printed, or None."""
    with open(PUBLISHED / "aggregates.csv", newline="") as f:
        for row in csv.DictReader(f):
            same = (row["table"], row["column"], row["statistic"]) == (ref.table, ref.column, statistic)
            if same and int(row["games"]) == len(column(ref.table, ref.column)):
                return float(row["published"])
    return None


def comparison(agent: str, preset: str, family: str, ours: Mapping[str, float]) -> list[dict]:
    """Ours beside the published column, per normalisation and statistic.

    `ours`: our raw score per game (mean over seeds) of the suite's `family` games.
    Rows: statistic, protocol, ours, published over the suite's games that have
    a published score (`suite_games` of them), published over all the paper's
    games (`paper_games`), and the aggregate the paper prints.
    """
    ref = reference(agent, preset, family)
    if ref is None:
        return []
    full = column(ref.table, ref.column)
    on_suite = {game: full[game] for game in ours if game in full}
    rows = []
    for protocol in protocols(agent, family):
        values = [summary(agent, family, by_game, protocol) if by_game else {} for by_game in (ours, on_suite, full)]
        for statistic in STATISTICS:
            rows.append(
                {
                    "statistic": statistic,
                    "protocol": protocol or family,
                    "ours": values[0].get(statistic),
                    "published_suite": values[1].get(statistic),
                    "suite_games": len(on_suite),
                    "published_paper": values[2][statistic],
                    "paper_games": len(full),
                    "printed": printed(ref, statistic),
                }
            )
    return rows
