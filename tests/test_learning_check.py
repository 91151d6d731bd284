"""`reproduce.benchmarks.learning_check`: the spread test, the checkpoints, the yardstick and bad input.

Its runs are long (3 x 5M frames): not run here.
"""

import csv
import json
import sys

import numpy as np
import pytest

from common.errors import UsageError
from common.results import RESULTS
from reproduce.benchmarks.learning_check import compare
from tests.test_cli import assert_one_line_usage_error, run


def test_within_spread_is_two_sample_sds_from_the_mean():
    ours = [10.0, 14.0, 18.0]  # mean 14, sd (n - 1) 4: within means 6 <= reference <= 22.
    inside, edge, outside = (compare.within_spread(r, ours) for r in (7.0, 22.0, 22.5))
    assert (inside["mean"], inside["sd"], inside["min"], inside["max"]) == (14.0, 4.0, 10.0, 18.0)
    assert inside["within"] and edge["within"] and not outside["within"]


def summary(seed: int, last100: float, curve: dict[int, float], frames: int = 1_000_000) -> dict:
    return {
        "game": "breakout", "seed": seed, "frames": frames, "episodes": 500, "last100": last100,
        "wall_time_s": 60.0, "curve": {str(f): v for f, v in curve.items()},
        "run_provenance": {"commit": f"{seed}" * 40, "dirty": False},
    }  # fmt: skip


def test_the_comparison_reads_the_bins_ending_at_each_fifth_and_the_last_100():
    width = 100_000
    # Bins start at 0, 100K, ..., 900K; the checkpoints' bins end at 200K, 400K, ..., 1M.
    reference_curve = {f: f / 1e5 for f in range(0, 1_000_000, width)}
    summaries = [
        summary(0, 9.0, {f: f / 1e5 + 1 for f in reference_curve}),
        summary(1, 11.0, {f: f / 1e5 - 1 for f in reference_curve}),
    ]
    rows = compare.comparison_rows(30.0, reference_curve, summaries)
    assert [r["measure"] for r in rows[:-1]] == [
        f"mean return, frames {s:,}-{s + width:,}" for s in (100_000, 300_000, 500_000, 700_000, 900_000)
    ]
    assert [r["reference"] for r in rows[:-1]] == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert all(r["within"] for r in rows[:-1])  # Our two seeds sit 1 either side of the committed curve.
    last = rows[-1]
    assert last["measure"] == "last-100 training return at 1,000,000 frames"
    assert (last["reference"], last["mean"], last["within"]) == (30.0, 10.0, False)
    assert "OUTSIDE" in compare.markdown("breakout", {"seed": "0", "source": "x"}, summaries, rows, "full")


def test_a_checkpoint_missing_from_a_seed_is_left_out_not_compared_to_fewer_seeds():
    reference_curve = {f: 1.0 for f in range(0, 1_000_000, 100_000)}
    complete = {f: 1.0 for f in reference_curve}
    gap = {f: 1.0 for f in reference_curve if f != 100_000}  # No episode ended in that bin.
    rows = compare.comparison_rows(1.0, reference_curve, [summary(0, 1.0, complete), summary(1, 1.0, gap)])
    assert not any("100,000-200,000" in r["measure"] for r in rows)
    assert len(rows) == compare.CHECKPOINTS


def test_the_yardstick_is_the_committed_minatar_breakout_run():
    reference, curve = compare.committed(RESULTS, "full", "breakout")
    with open(RESULTS / "impala" / "full" / "minatar.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["game"] == "breakout")
    assert reference["impala_last100"] == row["impala_last100"] and reference["frames"] == "5000000"
    assert compare.bin_frames(curve) == 100_000 and max(curve) == 4_900_000
    recorded = json.loads((RESULTS / "impala" / "full" / "minatar.provenance.json").read_text())
    assert recorded["commit"][:10] in reference["source"]


def test_a_game_without_a_committed_row_is_a_usage_error(tmp_path):
    directory = tmp_path / "impala" / "full"
    directory.mkdir(parents=True)
    (directory / "minatar.csv").write_text("game,frames,impala_last100,seed\nbreakout,5000000,20.0,0\n")
    with pytest.raises(UsageError, match="no row for it; it has: breakout"):
        compare.committed(tmp_path, "full", "asterix")
    with pytest.raises(UsageError, match="run reproduce.impala.minatar --profile quick"):
        compare.committed(tmp_path, "quick", "breakout")


def test_summarise_bins_the_runs_episodes_like_the_committed_curve(tmp_path):
    frames = np.arange(1, 301) * 1_000  # 300 episodes, one every 1K frames, returns 0..299.
    with open(tmp_path / "episodes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "episode_return"])
        writer.writerows(zip(frames, range(300)))
    (tmp_path / "config.json").write_text('{"preset": "minatar"}')
    (tmp_path / "provenance.json").write_text('{"commit": "abc"}')
    s = compare.summarise(tmp_path, "breakout", 2, {"frames": 300_000, "wall_time_s": 5.0}, 100_000)
    assert s["last100"] == pytest.approx(np.mean(range(200, 300)))
    # Bin [0, 100K) holds the episodes ending at 1K..99K: returns 0..98.
    assert s["curve"]["0"] == pytest.approx(np.mean(range(0, 99)), abs=1e-3)
    # The episode ending at exactly 300K would be a bin of its own: it counts in the last one.
    assert sorted(s["curve"], key=int) == ["0", "100000", "200000"]
    assert s["curve"]["200000"] == pytest.approx(np.mean(range(199, 300)), abs=1e-3)
    assert (s["seed"], s["config"], s["run_provenance"]) == (2, {"preset": "minatar"}, {"commit": "abc"})


@pytest.mark.parametrize(
    "flag, fragments",
    [
        ("--game=pong", ["--game", "'pong'", "breakout"]),
        ("--seeds=1", ["--seeds=1", ">= 2"]),
        ("--profile=medium", ["profile", "quick", "full"]),
    ],
)
def test_bad_input_is_one_line_exit_2(flag, fragments):
    result = run(sys.executable, "-m", "reproduce.benchmarks.learning_check", flag)
    assert_one_line_usage_error(result, *fragments)
