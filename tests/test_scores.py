"""Normalisation (PER eq. 4) and the published aggregates recomputed from per-game tables."""

import csv
import pathlib

import pytest

from common import scores
from common.errors import UsageError

PUBLISHED = pathlib.Path(__file__).resolve().parent.parent / "results" / "published"


def _table(name):
    with open(PUBLISHED / name, newline="") as f:
        return list(csv.DictReader(f))


def _column(rows, column, only=lambda row: True):
    return {r["game"]: float(r[column]) for r in rows if r[column] and only(r)}


def test_normalized_is_zero_at_random_and_one_at_human():
    random, human = scores.reference("atari_noop")["pong"]
    assert scores.normalized("pong", random, "atari_noop") == 0.0
    assert scores.normalized("pong", human, "atari_noop") == pytest.approx(1.0)


def test_normalized_divides_by_the_absolute_gap():
    # Video Pinball's human human-starts score is below random (PER Table 7).
    random, human = scores.reference("atari_human_starts")["video_pinball"]
    assert human < random
    assert scores.normalized("video_pinball", random + 1000, "atari_human_starts") > 0


def test_aggregate_caps_each_game_at_human_for_mean_capped():
    table = scores.reference("dmlab30")
    by_level = {
        "rooms_watermaze": table["rooms_watermaze"][1] * 10,  # Far above human.
        "explore_goal_locations_small": table["explore_goal_locations_small"][0],  # Random.
    }
    result = scores.aggregate(by_level, "dmlab30")
    assert result["mean_capped"] == pytest.approx(0.5)
    assert result["mean"] > 1.0


def test_dmlab_train_levels_are_scored_against_their_test_twins():
    random, human = scores.reference("dmlab30")["rooms_collect_good_objects_test"]
    assert scores.normalized("rooms_collect_good_objects_train", human, "dmlab30") == pytest.approx(1.0)


@pytest.mark.parametrize("column, expected", [("impala_shallow", 0.932), ("impala_deep", 1.918)])
def test_impala_expert_medians_match_table_4(column, expected):
    by_game = _column(_table("impala_table_c1.csv"), column)
    assert len(by_game) == 57
    assert scores.aggregate(by_game, "atari_noop")["median"] == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize(
    "column, median, mean",
    [("ddqn", 1.11, 4.18), ("ddqn_rank", 1.13, 4.54), ("ddqn_prop", 1.28, 5.51)],
)
def test_per_table_1_over_57_games(column, median, mean):
    by_game = _column(_table("per_table7_raw.csv"), column)
    assert len(by_game) == 57
    result = scores.aggregate(by_game, "atari_human_starts")
    # PER prints whole percents.
    assert round(100 * result["median"]) == round(100 * median)
    assert round(100 * result["mean"]) == round(100 * mean)


def test_per_dqn_median_over_the_original_49_games_is_48_percent():
    by_game = _column(_table("per_table7_raw.csv"), "dqn", only=lambda r: r["gorila"])
    assert len(by_game) == 49
    assert round(100 * scores.aggregate(by_game, "atari_human_starts")["median"]) == 48


def test_per_table_6_is_table_7_normalised():
    raw = {r["game"]: r for r in _table("per_table7_raw.csv")}
    for row in _table("per_table6_normalized.csv"):
        for column in ("dqn", "ddqn", "ddqn_prop"):
            if row[column]:
                ours = 100 * scores.normalized(row["game"], float(raw[row["game"]][column]), "atari_human_starts")
                assert abs(ours - float(row[column])) <= 1.0, (row["game"], column)


def test_unknown_protocol_and_game_name_the_accepted_values():
    with pytest.raises(UsageError, match="accepted: atari_noop, atari_human_starts, dmlab30"):
        scores.normalized("pong", 1.0, "atari_sticky")
    with pytest.raises(UsageError, match="unknown atari_noop game 'pongg'; accepted: alien"):
        scores.normalized("pongg", 1.0, "atari_noop")
