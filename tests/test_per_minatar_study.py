"""`reproduce.per.minatar`'s arms, App. Fig. 10/12 assembly and bad input (its runs are long: not run here)."""

import dataclasses
import decimal
import json
import re
import shutil
import sys
import types

import matplotlib.image
import numpy as np
import pytest
from absl import flags as absl_flags

import reproduce
from common import config as config_lib
from common.errors import UsageError
from per.config import PRESETS
from reproduce import _runs
from reproduce.per import minatar
from tests.test_cli import REPO, assert_one_line_usage_error, run


def resolve(arm: str):
    """The config `per.train` builds from the arm's job flags."""
    preset, overrides = minatar.ARMS[arm]
    snapshots = [f.split("=", 1)[1] for f in minatar.job_flags(arm, "breakout", 2_000_000, 0) if "override" in f]
    request = config_lib.Request(preset=preset, overrides=tuple(snapshots))
    return config_lib.resolve(PRESETS, preset, request, "per config")


@pytest.mark.parametrize("arm", list(minatar.ARMS))
def test_every_arm_is_a_valid_config_that_changes_only_its_overrides_and_the_snapshots(arm):
    preset, overrides = minatar.ARMS[arm]
    config = resolve(arm)
    changed = {
        f.name for f in dataclasses.fields(config) if getattr(config, f.name) != getattr(PRESETS[preset], f.name)
    }
    assert changed <= {o.split("=")[0] for o in overrides} | {"td_error_snapshot_frames"}
    assert config.td_error_snapshot_frames == 2_000_000 // minatar.TD_ERROR_SNAPSHOTS


def test_the_fig12_arms_are_what_per_compares():
    """App. Fig. 12: beta = 1 at uniform's step size; beta = 0 at a quarter of it; both rank-based."""
    full, none, uniform, rank = (resolve(a) for a in ("rank_full_is", "rank_no_is", "uniform", "rank"))
    assert full.replay == none.replay == rank.replay == "rank"
    assert (full.beta0, full.beta_final, full.learning_rate) == (1.0, 1.0, uniform.learning_rate)
    assert (none.beta0, none.beta_final, none.learning_rate) == (0.0, 0.0, uniform.learning_rate / 4)
    assert (rank.beta0, rank.beta_final) == (0.5, 1.0)


def test_the_presets_run_young_and_tians_ratio_and_the_every_4_arm_pers():
    """Y&T: one update per agent step (32 samples per insert), the target copied every 1,000 updates (frames).

    The ablation: PER §4's one update per 4 steps (8 per insert), the target still every 1,000 frames.
    """
    every_4, uniform, rank, proportional = (resolve(a) for a in ("uniform_every_4", "uniform", "rank", "proportional"))
    for variant in (uniform, rank, proportional):
        assert (variant.update_period, variant.samples_per_insert, variant.target_update_period) == (1, 32.0, 1_000)
    assert every_4.replay == uniform.replay == "uniform"
    assert (every_4.update_period, every_4.samples_per_insert, every_4.target_update_period) == (4, 8.0, 250)
    assert dataclasses.replace(every_4, update_period=1, target_update_period=1_000) == uniform


def test_the_small_step_arm_is_uniform_at_the_prioritized_step_size():
    """Only the step size moves: to the rank-based and proportional presets' (PER App. B.2.2's uniform / 4)."""
    small, uniform, rank, proportional = (resolve(a) for a in ("uniform_small_step", "uniform", "rank", "proportional"))
    assert small.replay == "uniform" and small.learning_rate == rank.learning_rate == proportional.learning_rate
    assert small.learning_rate == uniform.learning_rate / 4
    changed = {f.name for f in dataclasses.fields(small) if getattr(small, f.name) != getattr(uniform, f.name)}
    assert changed == {"learning_rate"}


def test_the_full_step_arms_are_the_prioritized_presets_at_uniforms_step_size():
    """The converse control: only the step size moves, up to uniform's (Y&T's); alpha and the beta schedule stay."""
    uniform = resolve("uniform")
    for variant in ("rank", "proportional"):
        full, preset = resolve(f"{variant}_full_step"), resolve(variant)
        assert full.replay == preset.replay == variant and full.learning_rate == uniform.learning_rate
        assert full.learning_rate == 4 * preset.learning_rate
        changed = {f.name for f in dataclasses.fields(full) if getattr(full, f.name) != getattr(preset, f.name)}
        assert changed == {"learning_rate"}


def summary(variant: str, last100: float, snapshots: int = 3) -> dict:
    frames = [100_000 * (i + 1) for i in range(snapshots)]
    return {
        "game": "breakout", "variant": variant, "seed": 0, "frames": 2_000_000, "episodes": 500,
        "last100": last100, "wall_time_s": 1.0,
        "curve": {"frames": [1_000_000, 2_000_000], "trailing100": [last100 / 2, last100]},
        "td_errors": [
            {"frames": f, "table_size": 10, "seen": 3, "unseen": 7, "rank_fraction": [0, 0.5, 1],
             "abs_td_error": [1.0 / (i + 1), 0.1, 0.01]}
            for i, f in enumerate(frames)
        ],
    }  # fmt: skip


# A summary trained under settings the preset has since changed (RMSProp's momentum, epsilon and form).
EARLIER_PRESETS_SUMMARY = REPO / "results/per/archive/rmsprop_momentum/minatar_runs/breakout_uniform_s0.json"


def write_summaries(summaries_dir, *scores: tuple[str, float]) -> None:
    """Breakout summaries of seed 0, one a (variant, last-100 score), as a finished study writes them."""
    summaries_dir.mkdir(parents=True)
    for variant, score in scores:
        record = {**summary(variant, score), "config": {}, "run_provenance": {}}
        (summaries_dir / f"breakout_{variant}_s0.json").write_text(json.dumps(record))


def study_flags(**changes) -> types.SimpleNamespace:
    """`minatar.main`'s flags: every game and variant, seed 0, the profile's budget."""
    flags = dict(
        profile="full", summarise_only=False, games=None, variants=list(minatar.VARIANTS), frames=None,
        seed=0, seeds=1, fresh=False, extend=False, jobs=1,
    )  # fmt: skip
    return types.SimpleNamespace(**{**flags, **changes})


def curve_run(variant: str, frames: int, curve: list[tuple[int, float]]) -> dict:
    """A Breakout summary of `frames` whose curve is `curve`'s (frames, 100-episode mean) points."""
    points = {"frames": [f for f, _ in curve], "trailing100": [r for _, r in curve]}
    return {**summary(variant, curve[-1][1]), "frames": frames, "curve": points}


def test_the_main_table_holds_only_the_three_variants_and_fig12_its_four_curves():
    runs = [summary("uniform", 6.0), summary("rank", 8.0), summary("rank_no_is", 9.0), summary("proportional", 7.0)]
    reference = {"breakout": 10.3}
    main = minatar.table_rows(runs, reference)
    assert [r["variant"] for r in main] == ["uniform", "rank", "proportional"]
    fig12 = minatar.table_rows(runs, reference, minatar.FIG12_CURVES)
    assert [r["variant"] for r in fig12] == ["uniform", "rank", "rank_no_is"]
    assert fig12[2]["uniform_final"] == 6.0 and fig12[2]["frames_to_uniform_final"] == 2_000_000


def test_fig12_holds_only_the_games_where_an_importance_sampling_arm_ran():
    space_invaders = [{**summary(v, 20.0), "game": "space_invaders"} for v in ("uniform", "rank", "proportional")]
    breakout = [summary("uniform", 6.0), summary("rank_full_is", 9.0), summary("proportional", 7.0)]
    chosen = minatar.side_summaries(space_invaders + breakout, minatar.FIG12_ARMS, minatar.FIG12_CURVES)
    assert [(s["game"], s["variant"]) for s in chosen] == [("breakout", "uniform"), ("breakout", "rank_full_is")]
    assert minatar.side_summaries(space_invaders, minatar.FIG12_ARMS, minatar.FIG12_CURVES) == []


def test_the_update_ratio_study_sets_each_ratio_beside_uniform_and_young_and_tian():
    runs = [summary("uniform", 5.0), summary("uniform_every_4", 11.0), summary("rank_full_is", 9.0)]
    chosen = minatar.side_summaries(runs, minatar.RATIO_ARMS, minatar.RATIO_CURVES)
    assert [s["variant"] for s in chosen] == ["uniform", "uniform_every_4"]
    rows = minatar.table_rows(chosen, {"breakout": 10.3}, minatar.RATIO_CURVES)
    assert rows[1]["frames_to_uniform_final"] == 1_000_000  # Its curve is at 5.5 at 1M frames: past uniform's 5.0.
    text = minatar.side_markdown("the update ratio", minatar.RATIO_TEXT, rows, "full")
    row = "| breakout | uniform_every_4 | 0 | 2,000,000 | 11.00 | 11.00 (2,000,000) | 10.3 | 1,000,000 | 1 | 0.000 |"
    assert row in text
    assert [minatar.hours(s) for s in (None, 90.0, 5_400.0)] == ["", "0.025", "1.5"]  # A quick run is not 0.0 h.


def test_each_row_has_its_peak_sittings_and_the_curves_resolution_and_uniform_is_the_baseline():
    """The peak and the frames to uniform's final are read off the summary's curve: the text gives its spacing."""
    uniform = {**summary("uniform", 6.0), "curve": {"frames": [100_000, 150_000, 400_000], "trailing100": [1, 8, 6]}}
    segments = [{"frames_at_start": 0}, {"frames_at_start": 700_000}, {"frames_at_start": 1_400_000}]
    rank = {**summary("rank", 7.0), "run_provenance": {"segments": segments}}
    rows = minatar.table_rows([uniform, rank], {"breakout": 10.3})
    assert [(r["peak100"], r["peak_frames"], r["curve_resolution"]) for r in rows] == [
        (8.0, 150_000, 250_000), (7.0, 2_000_000, 1_000_000),
    ]  # fmt: skip
    assert [r["sittings"] for r in rows] == [1, 3]
    assert rows[0]["frames_to_uniform_final"] is None and minatar.to_uniform(rows[0]) == "baseline"
    assert rows[1]["frames_to_uniform_final"] == 2_000_000  # Its curve: 3.5 at 1M, 7 at 2M; uniform's final 6.
    text = minatar.markdown(rows, "full")
    assert "| breakout | uniform | 0 | 2,000,000 | 6.00 | 8.00 (150,000) | 10.3 | baseline | 1 | 0.000 |" in text
    assert "| breakout | rank | 0 | 2,000,000 | 7.00 | 7.00 (2,000,000) | 10.3 | 2,000,000 | 3 | 0.000 |" in text
    assert "The curves' points are at most 1,000,000 frames apart" in text
    assert "`uniform_small_step` (step_size.md, once it has run)" in text  # Not run: promised, not claimed.
    assert "`uniform_small_step` (step_size.md) separates" in minatar.markdown(rows, "full", step_size_run=True)


def test_the_study_record_names_each_summary_file_with_its_hash(tmp_path):
    directory = tmp_path / "minatar_runs"
    directory.mkdir()
    (directory / "breakout_rank_s0.json").write_text('{"x": 1}\n')
    record = _runs.study_record({"breakout_rank_s0": {**summary("rank", 1.0), "run_provenance": {}, "config": {}}},
                                "reduced", 0.0, directory)  # fmt: skip
    expected = "936353965b4ba9180e3acb781d81aa634390ac95fd2874a9cbc4c4846b49fbd4"  # sha256sum of '{"x": 1}\n'.
    assert record["extra"]["summary_files"] == {
        "breakout_rank_s0": {"path": str(directory / "breakout_rank_s0.json"), "sha256": expected}
    }


def test_the_quick_profile_waits_only_for_its_own_game():
    rows = minatar.table_rows([summary(v, 5.0) for v in ("uniform", "rank")], {"breakout": 10.3})
    assert "Not run yet: breakout/proportional." in minatar.markdown(rows, "quick")
    rows += minatar.table_rows([summary("proportional", 5.0)], {"breakout": 10.3})
    everything = "Games run: breakout. All 1 game x 3 variants of the quick profile are in."
    assert everything in minatar.markdown(rows, "quick")
    assert "Not run yet: asterix/uniform, asterix/rank, asterix/proportional, freeway/uniform" in minatar.markdown(
        rows, "full"
    )
    # A game beyond the profile's, run in part: its missing variants are named too.
    asterix = [dict(r, game="asterix") for r in minatar.table_rows([summary("uniform", 1.0)], {"breakout": 10.3})]
    assert "Games run: asterix, breakout. Not run yet: asterix/rank, asterix/proportional." in minatar.markdown(
        rows + asterix, "quick"
    )


def test_the_step_size_study_sets_the_small_step_beside_all_three_variants():
    scores = {"uniform": 5.0, "uniform_small_step": 8.0, "rank": 7.0, "proportional": 9.0}
    runs = [summary(variant, last100) for variant, last100 in scores.items()]
    chosen = minatar.side_summaries(runs + [summary("rank_no_is", 9.0)], minatar.STEP_ARMS, minatar.STEP_CURVES)
    rows = minatar.table_rows(chosen, {"breakout": 10.3}, minatar.STEP_CURVES)
    assert [r["variant"] for r in rows] == ["uniform", "uniform_small_step", "rank", "proportional"]
    assert minatar.side_summaries(runs[:1] + runs[2:], minatar.STEP_ARMS, minatar.STEP_CURVES) == []
    # (8 - 5) / (7 - 5) of the way to rank, (8 - 5) / (9 - 5) of the way to proportional.
    shares = minatar.step_shares(rows)
    assert shares[-1] == (
        "- breakout, seed 0, 2,000,000 frames: the smaller step (8.00) moves uniform 150% of the way to rank "
        "(5.00 -> 7.00); 75% of the way to proportional (5.00 -> 9.00)."
    )
    text = minatar.side_markdown("the step size", minatar.STEP_TEXT, rows, "full", shares)
    assert text.endswith(shares[-1] + "\n")
    assert "One seed per arm and budget: how much" in text
    second_seed = [{**r, "seed": 1} for r in rows[:2]]  # The seed count follows the runs, a second seed of two arms.
    two_seeds = minatar.side_markdown("the step size", minatar.STEP_TEXT, rows + second_seed, "full")
    assert "1-2 seeds per arm and budget: how much" in two_seeds
    every_arm = rows + [{**r, "seed": 1} for r in rows]
    assert "frames. 2 seeds per arm and budget: how" in minatar.side_markdown("s", minatar.STEP_TEXT, every_arm, "full")
    # A variant below uniform (Asterix's): the share of its deficit, (4.5 - 5) / (3 - 5); one equal to
    # uniform has no gap to share.
    behind = [
        {**r, "last100": {"uniform_small_step": 4.5, "rank": 3.0, "proportional": 5.0}.get(r["variant"], r["last100"])}
        for r in rows
    ]
    assert minatar.step_shares(behind)[-1] == (
        "- breakout, seed 0, 2,000,000 frames: the smaller step (4.50) moves uniform 25% of the way to rank "
        "(5.00 -> 3.00)."
    )
    assert minatar.step_shares(rows[:1] + rows[2:]) == []  # No small-step run: nothing to say.


def test_a_shorter_small_step_run_is_set_beside_the_longer_runs_curves_at_its_frames():
    """Seaquest's control ran 1M frames beside 2M-frame variants: each is read at its last curve point <= 1M."""

    small = curve_run("uniform_small_step", 1_000_000, [(500_000, 0.8), (999_000, 1.0)])
    longer = [
        curve_run("uniform", 2_000_000, [(990_000, 4.0), (1_001_000, 9.0), (2_000_000, 18.0)]),
        curve_run("rank", 2_000_000, [(995_000, 0.5), (1_004_000, 7.0), (2_000_000, 1.4)]),
        curve_run("proportional", 2_000_000, [(1_000_000, 2.0), (2_000_000, 1.8)]),
    ]
    assert minatar.read_at(longer[0], 1_000_000) == 4.0 and minatar.read_at(longer[0], 900_000) is None
    runs = [small, *longer]
    rows = minatar.table_rows(runs, {"breakout": 10.3}, minatar.STEP_CURVES)
    shares = minatar.step_shares(rows, runs)
    # (1 - 4) / (0.5 - 4) of the way to rank, (1 - 4) / (2 - 4) to proportional; not the 2M scores.
    assert shares[-1] == (
        "- breakout, seed 0, 1,000,000 frames: the smaller step (1.00) moves uniform 86% of the way to rank "
        "(4.00 -> 0.50); 150% of the way to proportional (4.00 -> 2.00) (read off the curves of the 2,000,000-frame "
        "runs)."
    )
    assert any("a prioritized variant's beta had annealed only part of the way" in line for line in shares)
    assert len([line for line in shares if line.startswith("- ")]) == 1  # The 2M runs have no small-step run.
    assert minatar.step_shares(rows) == []  # Without the longer runs' curves there is nothing at 1M to compare.
    # Runs of equal budgets are compared on their own scores, with nothing said of curves.
    equal = minatar.step_shares(minatar.table_rows(longer + [{**small, "frames": 2_000_000}], {"breakout": 10.3},
                                                   minatar.STEP_CURVES), runs)  # fmt: skip
    assert not any("curve" in line for line in equal)


def test_a_full_step_run_is_the_share_of_its_variants_gap_that_uniforms_step_closes():
    """Freeway's converse arm at 750K beside 2M runs: (full - variant) / (uniform - variant), read at 750K."""
    longer = [
        curve_run("uniform", 2_000_000, [(740_000, 40.0), (2_000_000, 52.0)]),
        curve_run("rank", 2_000_000, [(745_000, 14.0), (2_000_000, 39.0)]),
        curve_run("proportional", 2_000_000, [(749_000, 19.0), (2_000_000, 40.0)]),
    ]
    full = curve_run("rank_full_step", 750_000, [(750_000, 33.5)])
    runs = [*longer, full]
    rows = minatar.table_rows(runs, {"breakout": 10.3}, minatar.STEP_CURVES)
    shares = minatar.step_shares(rows, runs)
    # (33.5 - 14) / (40 - 14) = 75%: uniform's step closes three quarters of rank's gap at 750K frames.
    assert shares[-1] == (
        "- breakout, seed 0, 750,000 frames: uniform's step (33.50) moves rank 75% of the way to uniform "
        "(14.00 -> 40.00) (read off the curves of the 2,000,000-frame runs)."
    )
    assert shares[0].startswith("How far a prioritized variant at uniform's step size moves")
    assert any("a prioritized variant's beta had annealed only part of the way" in line for line in shares)
    # With the small-step control too, its block comes first and the converse's follows after a blank line.
    small = curve_run("uniform_small_step", 750_000, [(750_000, 7.0)])
    both = minatar.step_shares(minatar.table_rows([*runs, small], {"breakout": 10.3}, minatar.STEP_CURVES),
                               [*runs, small])  # fmt: skip
    assert both[0].startswith("How far uniform replay at the prioritized variants' step size")
    assert both[both.index("") + 1 :].count("") == 2 and both[-1] == shares[-1]
    assert minatar.step_shares(rows) == []  # Without the 2M runs' curves there is nothing at 750K to compare.


def test_the_step_table_sets_every_arm_side_by_side_at_each_step_arms_budget():
    """A converse arm at 1M and the small-step control at 2M: one row per budget, longer runs read at 1M (`*`)."""
    runs = [
        curve_run("uniform", 2_000_000, [(990_000, 11.0), (1_010_000, 30.0), (2_000_000, 12.5)]),
        curve_run("rank", 2_000_000, [(1_000_000, 2.5), (2_000_000, 6.8)]),
        curve_run("uniform_small_step", 2_000_000, [(1_200_000, 1.0), (2_000_000, 6.75)]),
        curve_run("rank_full_step", 1_000_000, [(1_000_000, 12.0)]),
    ]
    rows = minatar.table_rows(runs, {"breakout": 10.3}, minatar.STEP_CURVES)
    table = minatar.step_table(rows, runs)
    assert table[-4] == (
        "| game | seed | frames | uniform | uniform_small_step | rank | proportional | rank_full_step "
        "| proportional_full_step |"
    )
    # At 1M: uniform's last point at or before it (11, not 30), rank's own point there, no small-step point
    # yet, no proportional run at all, and the converse arm's own score; at 2M the runs' own scores.
    assert table[-2:] == [
        "| breakout | 0 | 1,000,000 | 11.00* | - | 2.50* | - | 12.00 | - |",
        "| breakout | 0 | 2,000,000 | 12.50 | 6.75 | 6.80 | - | - | - |",
    ]
    assert minatar.step_table(rows) == table[:-2] + [table[-2].replace("11.00*", "-").replace("2.50*", "-"), table[-1]]
    assert minatar.step_table(minatar.table_rows(runs[:2], {"breakout": 10.3}, minatar.STEP_CURVES), runs) == []
    # step_size.md's notes: this table, a blank line, then the shares, each block present only if it has lines.
    notes = minatar.step_notes(rows, runs)
    shares = minatar.step_shares(rows, runs)
    assert notes == [*table, "", *shares] and shares
    assert minatar.joined([[], ["a"], [], ["b", "c"]]) == ["a", "", "b", "c"]


def test_a_variant_short_of_uniforms_budget_is_set_beside_uniforms_curve_at_its_frames():
    """Space Invaders' rank-based run at 750K, committed before it is extended to uniform's 2M."""
    uniform = curve_run("uniform", 2_000_000, [(500_000, 3.0), (740_000, 6.0), (760_000, 9.0), (2_000_000, 12.0)])
    rank = curve_run("rank", 750_000, [(300_000, 2.0), (600_000, 6.5), (750_000, 7.0)])
    proportional = curve_run("proportional", 750_000, [(400_000, 4.0), (750_000, 5.0)])
    notes = minatar.beside_uniforms_curve([uniform, rank, proportional])
    assert notes[-2:] == [
        "- breakout rank, seed 0, 750,000 frames: 7.00; uniform's 2,000,000-frame run had 6.00 by then, which rank "
        "first reached at 600,000 frames.",
        "- breakout proportional, seed 0, 750,000 frames: 5.00; uniform's 2,000,000-frame run had 6.00 by then, "
        "which proportional never reached.",
    ]
    rows = minatar.table_rows([uniform, rank, proportional], {"breakout": 10.3})
    text = minatar.markdown(rows, "full", notes=notes)
    assert notes[-1] + "\n\nRuns of 750,000 frames" in text
    assert "(frames run): breakout/rank (750,000), breakout/proportional (750,000)." in text
    assert "breakout/rank" not in text.split("Not run yet:")[1].split(".")[0]
    # Equal budgets, or no longer uniform run: the table's own column says it all.
    assert minatar.beside_uniforms_curve([uniform, {**rank, "frames": 2_000_000}]) == []
    assert minatar.beside_uniforms_curve([rank, proportional]) == []
    assert minatar.beside_uniforms_curve([{**uniform, "frames": 700_000}, rank]) == []


def test_an_extended_variant_is_set_beside_uniforms_curve_at_each_budget_short_of_uniforms():
    uniform = curve_run("uniform", 2_000_000, [(500_000, 3.0), (1_000_000, 6.0), (2_000_000, 12.0)])
    rank = curve_run("rank", 1_000_000, [(400_000, 3.5), (900_000, 6.5), (1_000_000, 6.0)])
    rank["earlier_budgets"] = [
        {"budget": 500_000, "frames": 500_000, "last100": 3.5, "curve": {"frames": [400_000], "trailing100": [3.5]}}
    ]
    lines = [line for line in minatar.beside_uniforms_curve([uniform, rank]) if line.startswith("- ")]
    assert lines == [
        "- breakout rank, seed 0, 500,000 frames: 3.50; uniform's 2,000,000-frame run had 3.00 by then, which rank "
        "first reached at 400,000 frames.",
        "- breakout rank, seed 0, 1,000,000 frames: 6.00; uniform's 2,000,000-frame run had 6.00 by then, which "
        "rank first reached at 900,000 frames.",
    ]


def test_fig12_reads_every_curve_early_midway_and_at_the_shortest_importance_sampling_arms_budget():
    """A 1M-frame arm beside 2M-frame runs: all are read at 250K, 500K and 1M, none at 2M."""

    runs = [
        curve_run(
            "uniform", 2_000_000, [(240_000, 1.0), (260_000, 2.0), (500_000, 3.0), (990_000, 4.0), (2_000_000, 8.0)]
        ),
        curve_run("rank", 2_000_000, [(300_000, 5.0), (1_000_000, 6.0), (2_000_000, 9.0)]),
        curve_run("rank_no_is", 1_000_000, [(250_000, 7.0), (499_999, 7.5), (1_000_000, 5.5)]),
        curve_run("proportional", 2_000_000, [(250_000, 99.0), (2_000_000, 99.0)]),  # Not one of Fig. 12's curves.
    ]
    notes = minatar.fig12_checkpoints(minatar.side_summaries(runs, minatar.FIG12_ARMS, minatar.FIG12_CURVES))
    assert notes[-5:] == [
        "| game | seed | frames | uniform | rank | rank_full_is | rank_no_is |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        "| breakout | 0 | 250,000 | 1.00 | - | - | 7.00 |",  # Rank's first point is past 250K.
        "| breakout | 0 | 500,000 | 3.00 | 5.00 | - | 7.50 |",
        "| breakout | 0 | 1,000,000 | 4.00 | 6.00 | - | 5.50 |",
    ]
    assert any("had gone only part of the way" in line for line in notes)
    # Equal budgets: each run is read at its own frames, and nothing is said of longer runs.
    equal = [{**r, "frames": 2_000_000} for r in runs]
    notes = minatar.fig12_checkpoints(equal)
    assert notes[-1] == "| breakout | 0 | 2,000,000 | 8.00 | 9.00 | - | 5.50 |"
    assert not any("part of the way" in line for line in notes)
    assert minatar.fig12_checkpoints(runs[:2]) == []  # No importance-sampling arm: nothing to say.


def test_fig10_draws_both_replays(tmp_path, monkeypatch):
    """Rank-based on top, uniform below, each with one line per snapshot of its own."""
    monkeypatch.setattr(minatar, "FLAGS", type("Flags", (), {"profile": "full"}))
    figures, close = [], minatar.plt.close
    monkeypatch.setattr(minatar.plt, "close", lambda fig: figures.append(fig) or close(fig))
    rank, uniform = summary("rank", 8.0, snapshots=3), summary("uniform", 6.0, snapshots=2)
    for snapshot in uniform["td_errors"]:
        snapshot["abs_td_error"] = [2 * x for x in snapshot["abs_td_error"]]  # Unlike rank's.
    path = tmp_path / "fig10.png"
    minatar.plot_td_errors(rank, uniform, path)
    assert matplotlib.image.imread(path).shape[0] > 400
    (figure,) = figures
    for ax, shown in zip(figure.axes, (rank, uniform), strict=True):
        assert ax.get_title() == f"{shown['variant']} replay"
        drawn = [(line.get_xdata().tolist(), line.get_ydata().tolist()) for line in ax.get_lines()]
        assert drawn == [(s["rank_fraction"], s["abs_td_error"]) for s in shown["td_errors"]]


@pytest.mark.parametrize(
    "flag, fragments",
    [
        ("--variants=rank_beta2", ["--variants: unknown variant 'rank_beta2'", "rank_full_is", "rank_no_is"]),
        ("--games=pong", ["--games: unknown minatar game 'pong'", "breakout"]),
        ("--seeds=0", ["--seeds=0", "not a positive integer"]),
        ("--jobs=0", ["--jobs=0", "not a positive integer"]),
        ("--seeds=two", ["--seeds=two: expected a whole number"]),
        ("--frames=0.5", ["--frames=0.5: need a whole number >= 1"]),
        ("--frames=nan", ["--frames=nan: expected a finite number"]),
        ("--extend --fresh", ["--fresh retrains from the start and --extend trains on: pass one of them"]),
        ("--extend", ["--extend trains summarised runs on to a larger budget: name it with --frames"]),
        ("--summarise_only --fresh", ["--summarise_only trains nothing, --fresh trains: pass one of them"]),
        ("--summarise_only --extend", ["--summarise_only trains nothing, --extend trains: pass one of them"]),
        ("--summarise_only --frames=1e4", ["--summarise_only tables every summary", "--frames=10000 would change"]),
        (
            "--summarise_only --games=breakout --variants=rank --seed=1 --seeds=2 --jobs=2",
            ["present; --games, --variants, --seed, --seeds, --jobs choose or shape runs to train: drop them"],
        ),
        ("--summarise_only --seed=1", ["every summary present; --seed chooses or shapes runs to train: drop it"]),
    ],
)
def test_bad_input_is_one_line_exit_2(flag, fragments):
    assert_one_line_usage_error(run(sys.executable, "-m", "reproduce.per.minatar", *flag.split()), *fragments)


@pytest.mark.parametrize("seed_1_first", [True, False])
def test_fig10_is_seed_0s_whichever_seed_the_command_trains(tmp_path, monkeypatch, seed_1_first):
    """fig10_<game>.png names no seed: a `--seed 1` command redrew it from seed 1's runs (seen), and the
    next `--summarise_only` drew seed 0's again; seed 0's, whichever order the summaries come in (they
    load by file name, seed 1's after seed 0's)."""
    seed_0 = [summary("uniform", 6.0), summary("rank", 8.0)]
    seed_1 = [{**summary(variant, 5.0, snapshots=2), "seed": 1} for variant in ("uniform", "rank")]
    monkeypatch.setattr(reproduce, "output_dir", lambda paper, profile: tmp_path)
    monkeypatch.setattr(reproduce, "RESULTS", tmp_path)
    monkeypatch.setattr(minatar, "published", lambda: {"breakout": 10.3})
    monkeypatch.setattr(minatar, "write_provenance", lambda *args, **kwargs: None)
    monkeypatch.setattr(minatar, "plot", lambda *args, **kwargs: None)
    drawn = []
    monkeypatch.setattr(minatar, "plot_td_errors", lambda rank, uniform, path: drawn.append((rank, uniform, path)))
    monkeypatch.setattr(minatar, "train", lambda *args: seed_1 + seed_0 if seed_1_first else seed_0 + seed_1)
    monkeypatch.setattr(minatar, "FLAGS", study_flags(seed=1, games=["breakout"], variants=["uniform", "rank"]))
    minatar.main([])
    ((rank, uniform, path),) = drawn
    assert (rank["seed"], uniform["seed"], path.name) == (0, 0, "fig10_breakout.png")
    assert (rank["variant"], uniform["variant"]) == ("rank", "uniform")


def test_summarise_only_builds_the_tables_from_the_summaries_present_and_trains_nothing(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    (results / "published").mkdir(parents=True)
    shutil.copy(REPO / "results" / "published" / "minatar_young2019_5M.csv", results / "published")
    summaries_dir = results / "per" / "full" / "minatar_runs"
    write_summaries(summaries_dir, ("uniform", 6.0), ("rank", 8.0))
    monkeypatch.setattr(reproduce, "RESULTS", results)
    monkeypatch.setattr(reproduce, "output_dir", lambda paper, profile: results / paper / profile)
    monkeypatch.setattr(minatar, "FLAGS", study_flags(profile="full", summarise_only=True))
    monkeypatch.setattr(minatar, "train", lambda *args: pytest.fail("--summarise_only trained"))
    minatar.main([])
    text = (results / "per" / "full" / "minatar.md").read_text()
    assert "| breakout | rank | 0 | 2,000,000 | 8.00 |" in text
    assert "asterix/proportional, breakout/proportional, freeway" in text  # Not run yet.
    record = json.loads((results / "per" / "full" / "minatar.provenance.json").read_text())
    assert set(record["summary_files"]) == {"breakout_uniform_s0", "breakout_rank_s0"}
    # The last line names what it wrote (App. Fig. 10 too: the fixture's summaries carry TD errors).
    written = "fig10_breakout.png, fig10_breakout.provenance.json, minatar.csv, minatar.md, minatar.png"
    assert (
        capsys.readouterr().out.strip().splitlines()[-1]
        == f"wrote {results}/per/full/: {written}, minatar.provenance.json"
    )
    empty = tmp_path / "empty"
    monkeypatch.setattr(reproduce, "RESULTS", empty)
    monkeypatch.setattr(reproduce, "output_dir", lambda paper, profile: empty / paper / profile)
    with pytest.raises(UsageError, match=r"--summarise_only: no job summaries in .*/full/minatar_runs/"):
        minatar.main([])
    assert not empty.exists()  # Refused before any directory is made.


def test_the_committed_tables_are_what_the_committed_summaries_make(tmp_path, monkeypatch):
    """Rebuilt with today's code from results/per/full/minatar_runs: a generator change commits its tables too."""
    committed = REPO / "results" / "per" / "full"
    if not any((committed / "minatar_runs").glob("*.json")):
        pytest.skip("no PER MinAtar run is committed yet")
    results = tmp_path / "results"
    shutil.copytree(REPO / "results" / "published", results / "published")
    shutil.copytree(committed / "minatar_runs", results / "per" / "full" / "minatar_runs")
    monkeypatch.setattr(reproduce, "RESULTS", results)
    monkeypatch.setattr(reproduce, "output_dir", lambda paper, profile: results / paper / profile)
    monkeypatch.setattr(minatar, "FLAGS", study_flags(profile="full", summarise_only=True))
    minatar.main([])
    rebuilt = sorted(p.name for p in (results / "per" / "full").iterdir() if p.suffix in (".csv", ".md"))
    assert "minatar.md" in rebuilt
    for name in rebuilt:
        assert (results / "per" / "full" / name).read_text() == (committed / name).read_text(), f"{name} is stale"
    # Every table and figure written is in a record's outputs, whatever its name (the aggregates are minatar's).
    written = {p.name for p in (results / "per" / "full").iterdir() if p.is_file() and "provenance" not in p.name}
    recorded = {
        name
        for record in (results / "per" / "full").glob("*.provenance.json")
        for name in json.loads(record.read_text())["outputs"]
    }
    assert minatar.AGGREGATE_FILES[0] in written
    assert written <= recorded, f"written without provenance: {sorted(written - recorded)}"


def committed_summary() -> dict:
    """A committed summary of the main study (one run of seed 0), to refuse commands against."""
    for path in sorted((REPO / "results" / "per" / "full" / "minatar_runs").glob("*_s0.json")):
        summary = json.loads(path.read_text())
        if summary["variant"] in minatar.VARIANTS:
            return summary
    pytest.skip("no PER MinAtar run is committed yet: the refusal has nothing to refuse against")


def test_a_larger_budget_is_refused_without_extend_and_extend_needs_the_run_here():
    """Against a committed summary: both commands stop before any training."""
    summary = committed_summary()
    game, variant, frames = summary["game"], summary["variant"], summary["frames"]
    job = ["--profile=full", f"--games={game}", f"--variants={variant}", "--frames=1e9"]
    refused = run(sys.executable, "-m", "reproduce.per.minatar", *job)
    at = f"summarises this job at {frames:,} frames, not 1,000,000,000"
    if (REPO / "runs" / "reproduce" / "per_minatar_full" / f"{game}_{variant}_s0" / "config.json").exists():
        assert_one_line_usage_error(refused, at, "pass --extend to train it on to 1,000,000,000")
        pytest.skip("this checkout holds the PER MinAtar run: --extend would train it on")
    # Its run is not in this checkout: the refusal says where it was, not only to pass --extend.
    on = "--extend would train it on to 1,000,000,000 frames from its last checkpoint, which was"
    assert_one_line_usage_error(refused, at, "pass --fresh to retrain it", on)
    extend = run(sys.executable, "-m", "reproduce.per.minatar", *job, "--extend")
    assert_one_line_usage_error(extend, f"holds no run to train on (no config.json): --extend resumes {game}_")


def test_a_larger_budget_keeps_the_jobs_snapshot_period_so_a_run_extends():
    """App. Fig. 10's snapshot period is the profile's, not the budget's: the extended job's flags are the run's."""
    at_2m, at_5m = (minatar.job_flags("rank", "seaquest", frames, 0) for frames in (2_000_000, 5_000_000))
    assert [f for f in at_2m if "frames=" not in f] == [f for f in at_5m if "frames=" not in f]
    assert "--frames=5000000" in at_5m


def test_a_variant_is_set_beside_uniform_at_its_own_budget_and_the_target_is_counted_per_budget():
    at = {2_000_000: {"uniform": 5.0, "proportional": 11.0}, 5_000_000: {"uniform": 10.5, "rank": 12.0}}
    runs = [{**summary(v, x), "frames": f} for f, scores in at.items() for v, x in scores.items()]
    rows = minatar.table_rows(runs, {"breakout": 10.3})
    uniform_final = {(r["variant"], r["frames"]): r["uniform_final"] for r in rows}
    assert uniform_final == {
        ("uniform", 2_000_000): 5.0, ("proportional", 2_000_000): 5.0,
        ("uniform", 5_000_000): 10.5, ("rank", 5_000_000): 10.5,
    }  # fmt: skip
    segments = [
        {"total_frames": 2_000_000, "frames_at_start": 0},
        {"total_frames": 5_000_000, "frames_at_start": 2_000_000},
    ]
    runs[2]["run_provenance"] = {"segments": segments}  # Uniform at 5M, extended from 2M.
    text = minatar.markdown(minatar.table_rows(runs, {"breakout": 10.3}), "full")
    assert (
        "Trained on to a larger budget (resumed from the last checkpoint): breakout uniform seed 0: to 2,000,000, then "
        in text
    )
    alone = minatar.table_rows([runs[1]], {"breakout": 10.3})[0]
    assert minatar.to_uniform(alone) == "-" and alone["frames_to_uniform_final"] is None
    at_or_above = "frames at or above Y&T's DQN (at 5M), one per game and seed:"
    assert minatar.verdicts(rows) == [
        f"Runs of 2,000,000 {at_or_above} uniform 0 of 1, proportional 1 of 1.",
        f"Runs of 5,000,000 {at_or_above} uniform 1 of 1, rank 1 of 1.",
    ]


def test_the_study_reads_its_numbers_by_their_definitions():
    """Small cases each count could get wrong: ties, equality, windows, budgets."""
    level = {**summary("uniform", 10.3), "young_tian_dqn_5M": 10.3}
    assert minatar.verdicts([level]) == [
        "Runs of 2,000,000 frames at or above Y&T's DQN (at 5M), one per game and seed: uniform 1 of 1."
    ]  # At is enough.
    twin_peaks = {"curve": {"frames": [1, 2, 3, 4], "trailing100": [2.0, 5.0, 3.0, 5.0]}}
    assert minatar.peak(twin_peaks) == (5.0, 2)  # Reached first at frame 2.
    one_seed_two_budgets = [summary("uniform", 1.0), {**summary("uniform", 2.0), "frames": 1_000_000}]
    assert minatar.seeds(one_seed_two_budgets) == "One seed"
    trailing = _runs.trailing_mean(np.arange(1.0, 201.0), 100)  # Fewer than 100 at the start, then the last 100.
    np.testing.assert_allclose(trailing[[0, 98, 99, 100, 199]], [1.0, 50.0, 50.5, 51.5, 150.5])
    assert _runs.wall_time([{"wall_time_s": 10.0}, {"wall_time_s": None}, {"wall_time_s": 2.5}]) == 12.5


def extended_run(run_dir, episode_frames):
    """A run dir trained to 2M frames in two sittings, then on to 5M: its episodes and provenance."""
    run_dir.mkdir()
    rows = ["frames,episode_return,episode_length,wall_time"]
    rows += [f"{f},{f / 1e6},100,0" for f in episode_frames]
    (run_dir / "episodes.csv").write_text("\n".join(rows) + "\n")
    segments = [
        {"frames_at_start": 0, "total_frames": 2_000_000, "wall_time_s": 50.0},
        {"frames_at_start": 1_000_000, "total_frames": 2_000_000, "wall_time_s": 60.0},  # Resumed after a stop.
        # Killed after its last checkpoint (2,000,040: past the budget), before final.json: this start finished it.
        {"frames_at_start": 2_000_040, "total_frames": 2_000_000, "wall_time_s": 5.0},
        {"frames_at_start": 2_000_040, "total_frames": 5_000_000, "wall_time_s": 150.0},  # --extend.
    ]
    (run_dir / "provenance.json").write_text(json.dumps({"segments": segments}))
    (run_dir / "config.json").write_text(json.dumps({"total_frames": 2_000_000}))


def test_an_extended_run_keeps_its_score_at_the_budget_it_was_extended_from(tmp_path):
    frames = [*range(10_000, 2_000_001, 10_000), 2_000_040, *range(2_010_000, 5_000_001, 10_000)]
    extended_run(tmp_path / "run", frames)  # An episode every 10K frames (and at 2,000,040), returning frames / 1M.
    (at_2m,) = _runs.earlier_budgets(tmp_path / "run", curve_points=5)
    # The last 100 episodes up to 2,000,040 frames: 1.02 ... 2.00, 2.00004; the starts before the extension: 115 s.
    assert at_2m["budget"] == 2_000_000 and at_2m["frames"] == 2_000_040 and at_2m["episodes"] == 201
    assert at_2m["last100"] == pytest.approx((sum(range(102, 201)) / 100 + 2.00004) / 100, abs=1e-3)
    assert at_2m["wall_time_s"] == 115.0 and at_2m["curve"]["frames"][-1] == 2_000_040
    final = _runs.summarise_run(tmp_path / "run", {"frames": 5_000_000, "wall_time_s": 265.0}, curve_points=5)
    assert final["last100"] == pytest.approx(4.505) and final["episodes"] == 501
    extended_run(tmp_path / "once", frames[:200])
    once = [{"frames_at_start": 0, "total_frames": 2_000_000, "wall_time_s": 50.0}]
    (tmp_path / "once" / "provenance.json").write_text(json.dumps({"segments": once}))
    assert _runs.earlier_budgets(tmp_path / "once") == []  # A run of one budget has no earlier scores.


def extended_summary(variant: str, first: list[tuple[int, float]], last: list[tuple[int, float]]) -> dict:
    """A Breakout summary of a run trained to `first`'s last frame, then (`--extend`) to `last`'s, with each curve."""
    first_budget, last_budget = first[-1][0], last[-1][0]
    return {
        **curve_run(variant, last_budget, last),
        "run_provenance": {"segments": [
            {"total_frames": first_budget, "frames_at_start": 0},
            {"total_frames": last_budget, "frames_at_start": first_budget},
        ]},
        "earlier_budgets": [{
            "budget": first_budget, "frames": first_budget, "episodes": 300, "last100": first[-1][1],
            "wall_time_s": 7.0, "curve": curve_run(variant, first_budget, first)["curve"],
        }],
    }  # fmt: skip


def test_the_table_has_a_row_at_each_budget_an_extended_run_reached():
    uniform = {**summary("uniform", 5.0)}  # At 2M only.
    extended = extended_summary(
        "proportional", [(1_000_000, 4.0), (2_000_000, 9.0)], [(1_000_000, 4.0), (3_000_000, 10.0), (5_000_000, 12.0)]
    )
    rows = minatar.table_rows([uniform, extended], {"breakout": 10.3})
    seen = [(r["variant"], r["frames"], r["last100"], r["budgets"], r["uniform_final"]) for r in rows]
    assert seen == [
        ("uniform", 2_000_000, 5.0, "2000000", 5.0),
        ("proportional", 2_000_000, 9.0, "2000000", 5.0),  # Beside uniform at its own budget, as before.
        ("proportional", 5_000_000, 12.0, "2000000 5000000", None),
    ]
    assert rows[1]["frames_to_uniform_final"] == 2_000_000  # Its curve up to 2M, the 5M curve's 1M point merged in.
    assert rows[2]["frames_to_uniform_final"] is None and rows[2]["peak_frames"] == 5_000_000  # No uniform at 5M.
    assert [r["sittings"] for r in rows] == [1, 1, 2]  # The 2M view counts the starts before 2M only.
    at_or_above = "frames at or above Y&T's DQN (at 5M), one per game and seed:"
    assert minatar.verdicts(rows) == [
        f"Runs of 2,000,000 {at_or_above} uniform 0 of 1, proportional 0 of 1.",
        f"Runs of 5,000,000 {at_or_above} proportional 1 of 1.",
    ]
    assert _runs.extended(rows)[1].count("breakout proportional seed 0") == 1
    assert minatar.side_markdown("a side study", (), rows, "full").endswith(_runs.extended(rows)[1] + "\n")
    on_to_10m = {
        **extended, "frames": 10_000_000, "run_provenance": {"segments": [
            *extended["run_provenance"]["segments"], {"total_frames": 10_000_000, "frames_at_start": 5_000_000},
        ]},
        "earlier_budgets": [*extended["earlier_budgets"], {**extended["earlier_budgets"][0], "budget": 5_000_000,
                                                            "frames": 5_000_000}],
    }  # fmt: skip
    rows = minatar.table_rows([on_to_10m], {"breakout": 10.3})
    assert [r["budgets"] for r in rows] == ["2000000", "2000000 5000000", "2000000 5000000 10000000"]
    (note,) = re.findall(r"breakout proportional seed 0: [^;]*frames", _runs.extended(rows)[1])  # Named once.
    assert note == "breakout proportional seed 0: to 2,000,000, then 5,000,000, then 10,000,000 frames"


def test_an_extended_runs_rows_read_its_curves_at_every_budget_so_they_agree():
    """Each budget's curve samples the same trailing mean at other episodes: a point one holds counts for all rows.

    The 2M curve holds the peak at 600K frames that the 1M curve, thinned over
    fewer episodes, missed: the 1M row has it too, and no 2M point past 1M.
    """
    uniform = [
        curve_run("uniform", 1_000_000, [(500_000, 2.0), (1_000_000, 8.0)]),
        curve_run("uniform", 2_000_000, [(1_000_000, 8.0), (2_000_000, 9.0)]),
    ]
    extended = extended_summary(
        "rank", [(300_000, 5.0), (1_000_000, 6.0)], [(600_000, 9.0), (1_500_000, 9.5), (2_000_000, 7.0)]
    )
    rows = minatar.table_rows([*uniform, extended], {"breakout": 10.3})
    rank = [(r["frames"], r["peak100"], r["peak_frames"], r["frames_to_uniform_final"]) for r in rows[2:]]
    assert rank == [(1_000_000, 9.0, 600_000, 600_000), (2_000_000, 9.5, 1_500_000, 600_000)]
    assert [r["curve_resolution"] for r in rows[2:]] == [400_000, 500_000]  # The merged points' spacing.
    assert minatar.read_at(extended, 500_000) == 5.0  # On the 1M curve only.
    assert _runs.run_curve(extended, up_to=1_000_000) == {
        "frames": [300_000, 600_000, 1_000_000], "trailing100": [5.0, 9.0, 6.0],
    }  # fmt: skip


def test_a_summary_trained_under_an_earlier_preset_is_refused_not_kept(tmp_path):
    """The archived runs used RMSProp momentum 0.95: today's presets must not keep them as their own."""
    flags = minatar.job_flags("uniform", "breakout", 2_000_000, 0)
    (tmp_path / "breakout_uniform_s0.json").write_text(EARLIER_PRESETS_SUMMARY.read_text())
    with pytest.raises(UsageError) as refused:
        _runs.check_settings(tmp_path, {"breakout_uniform_s0": minatar.job_config(flags)})
    message = str(refused.value)
    assert "breakout_uniform_s0.json was trained with other settings than its preset now gives (" in message
    # rmsprop_form is newer than the run: the record lacks it, and the run used its default.
    for change in ("rmsprop_epsilon 0.0001 -> 0.01", "rmsprop_form 'tf1' -> 'torch'", "rmsprop_momentum 0.95 -> 0.0"):
        assert change in message
    assert message.endswith("pass --fresh to retrain (the summary is replaced)")


def test_a_summary_of_todays_preset_is_kept_whatever_its_operational_fields():
    config = minatar.job_config(minatar.job_flags("rank", "seaquest", 2_000_000, 3))
    assert (config.replay, config.seed, config.total_frames) == ("rank", 3, 2_000_000)
    recorded = json.loads(json.dumps(dataclasses.asdict(config), default=str))
    assert _runs.changed_settings(recorded, config) == []
    recorded.update(total_frames=5_000_000, checkpoint_every_s=1.0)  # Operational: an extension, say.
    assert _runs.changed_settings(recorded, config) == []
    recorded["learning_rate"] = 0.1
    assert _runs.changed_settings(recorded, config) == [f"learning_rate 0.1 -> {config.learning_rate!r}"]


def test_the_full_profile_keeps_every_committed_run():
    """`make reproduce PROFILE=full` runs the script's default command: every committed summary must be one
    it keeps (at the profile's budget, or extended past it), or the command refuses it and trains nothing."""
    committed = sorted((REPO / "results" / "per" / "full" / "minatar_runs").glob("*_s[0-9]*.json"))
    summaries = [p for p in committed if not p.name.endswith(".provenance.json")]
    if not summaries:
        pytest.skip("no PER MinAtar run is committed yet")
    first, count = (absl_flags.FLAGS[name].default for name in ("seed", "seeds"))
    assert (first, count) == (0, 1)  # The default command trains seed 0.
    for path in summaries:
        summary = json.loads(path.read_text())
        if summary["variant"] not in minatar.VARIANTS and summary["frames"] < minatar.FRAMES["full"]:
            continue  # A side arm run short (Seaquest's step-size control): the default command names none.
        if summary["seed"] != first:
            continue  # Another seed (Seaquest's seed 1, run to 1M frames) is another command's, not the default's.
        flags = minatar.job_flags(summary["variant"], summary["game"], minatar.FRAMES["full"], summary["seed"])
        assert _runs.summary_kept(path, False, flags, say=print), path.name


@pytest.fixture
def trained(monkeypatch):
    """What `minatar.train` hands `_runs.train_jobs`: the jobs (name -> (run dir, flags)), `done`, and its options."""
    calls = []
    monkeypatch.setattr(
        _runs, "train_jobs", lambda module, jobs, done, **options: calls.append((module, jobs, done, options))
    )
    return calls


def test_train_runs_every_seed_from_seed_with_fresh_extend_and_jobs_passed_on(tmp_path, monkeypatch, trained):
    """`--seed 3 --seeds 2 --jobs 2 --fresh`: seeds 3 and 4 of every game and variant, two at a time, retrained."""
    flags = study_flags(variants=["uniform", "rank"], seed=3, seeds=2, jobs=2, fresh=True)
    monkeypatch.setattr(minatar, "FLAGS", flags)
    summaries, runs = tmp_path / "minatar_runs", tmp_path / "runs"
    minatar.train(["breakout", "asterix"], 2_000_000, summaries, runs)
    ((module, jobs, _, options),) = trained
    assert module == "per.train"
    assert sorted(jobs) == sorted(
        f"{game}_{variant}_s{seed}"
        for game in ("breakout", "asterix")
        for variant in ("uniform", "rank")
        for seed in (3, 4)
    )
    run_dir, flags = jobs["asterix_rank_s4"]
    assert run_dir == runs / "asterix_rank_s4"
    assert flags == minatar.job_flags("rank", "asterix", 2_000_000, 4, "full")
    assert options == {"fresh": True, "extend": False, "parallel": 2}


def test_train_passes_extend_on_and_the_quick_profiles_snapshot_period(tmp_path, monkeypatch, trained):
    monkeypatch.setattr(minatar, "FLAGS", study_flags(profile="quick", variants=["rank"], extend=True))
    minatar.train(["breakout"], 15_000, tmp_path / "minatar_runs", tmp_path / "runs")
    ((_, jobs, _, options),) = trained
    assert options == {"fresh": False, "extend": True, "parallel": 1}
    ((_, flags),) = jobs.values()
    assert f"--config_override=td_error_snapshot_frames={15_000 // minatar.TD_ERROR_SNAPSHOTS}" in flags


def test_a_finished_job_is_summarised_under_its_own_game_variant_and_seed(tmp_path, monkeypatch, trained):
    monkeypatch.setattr(minatar, "FLAGS", study_flags(seed=2, variants=["rank"]))
    summaries, runs = tmp_path / "minatar_runs", tmp_path / "runs"
    minatar.train(["seaquest"], 2_000_000, summaries, runs)
    ((_, jobs, done, _),) = trained
    run_dir = runs / "seaquest_rank_s2"
    run_dir.mkdir(parents=True)
    (run_dir / "episodes.csv").write_text("frames,episode_return,episode_length,wall_time\n1000,3.0,10,0\n")
    (run_dir / "config.json").write_text(json.dumps({"seed": 2}))
    segment = {"commit": "c" * 40, "frames_at_start": 0, "total_frames": 2_000_000, "wall_time_s": 9.0}
    (run_dir / "provenance.json").write_text(json.dumps({"commit": "c" * 40, "segments": [segment]}))
    done("seaquest_rank_s2", {"frames": 2_000_000, "wall_time_s": 9.0})
    written = json.loads((summaries / "seaquest_rank_s2.json").read_text())
    assert (written["game"], written["variant"], written["seed"], written["frames"]) == (
        "seaquest",
        "rank",
        2,
        2_000_000,
    )
    assert json.loads((summaries / "seaquest_rank_s2.provenance.json").read_text())["commit"] == "c" * 40


def test_train_returns_every_summary_present_not_only_this_commands(tmp_path, monkeypatch, trained):
    """The tables are rebuilt from every summary present: a `--games breakout` command keeps Asterix's rows."""
    summaries = tmp_path / "minatar_runs"
    summaries.mkdir()
    other = {"game": "asterix", "variant": "uniform", "seed": 0, "frames": 2_000_000}
    (summaries / "asterix_uniform_s0.json").write_text(json.dumps(other))
    monkeypatch.setattr(minatar, "FLAGS", study_flags(variants=["uniform"]))
    assert minatar.train(["breakout"], 2_000_000, summaries, tmp_path / "runs") == [other]


@pytest.mark.parametrize("position", [0, 1])
def test_train_refuses_a_summary_of_an_earlier_preset_for_any_job_and_trains_nothing(
    tmp_path, monkeypatch, trained, position
):
    """Without --fresh, a summary trained under since-changed settings is refused, whichever job it is; with
    --fresh it is retrained."""
    summaries = tmp_path / "minatar_runs"
    summaries.mkdir()
    (summaries / "breakout_uniform_s0.json").write_text(EARLIER_PRESETS_SUMMARY.read_text())
    variants = ["uniform", "rank"] if position == 0 else ["rank", "uniform"]
    monkeypatch.setattr(minatar, "FLAGS", study_flags(variants=variants))
    with pytest.raises(UsageError, match="breakout_uniform_s0.json was trained with other settings"):
        minatar.train(["breakout"], 2_000_000, summaries, tmp_path / "runs")
    assert trained == []
    monkeypatch.setattr(minatar, "FLAGS", study_flags(variants=variants, fresh=True))
    minatar.train(["breakout"], 2_000_000, summaries, tmp_path / "runs")
    assert "breakout_uniform_s0" in trained[0][1]


def test_a_study_stopped_under_fresh_resumes_without_it_past_an_old_presets_summary(tmp_path, monkeypatch, trained):
    """`--fresh` asked the job to retrain (then the study stopped): run again without --fresh, as the stop says, the
    old-preset summary it will replace is not refused (refused, the user's only way on is --fresh again)."""
    summaries, runs = tmp_path / "minatar_runs", tmp_path / "runs"
    summaries.mkdir()
    (summaries / "breakout_uniform_s0.json").write_text(EARLIER_PRESETS_SUMMARY.read_text())
    _runs.ask_fresh([runs / "breakout_uniform_s0"])
    monkeypatch.setattr(minatar, "FLAGS", study_flags(variants=["uniform"]))
    minatar.train(["breakout"], 2_000_000, summaries, runs)
    ((_, jobs, _, options),) = trained
    assert list(jobs) == ["breakout_uniform_s0"] and options["fresh"] is False


def test_a_run_short_of_the_profiles_budget_is_not_called_in():
    """Every job of the quick profile run, one only to 10,000 of its 15,000 frames: short, never "All ... are in"."""
    runs = [{**summary(v, 5.0), "frames": 15_000} for v in ("uniform", "rank")]
    runs.append({**summary("proportional", 5.0), "frames": 10_000})
    line = minatar.progress_line(minatar.table_rows(runs, {"breakout": 10.3}), "quick")
    short = "Short of the profile's 15,000 frames so far (frames run): breakout/proportional (10,000)."
    assert line == f"Games run: breakout. {short}"


def test_each_tables_record_names_the_summaries_it_was_made_from(tmp_path, monkeypatch):
    """minatar.* from the three variants' summaries only; fig12.* (with its own record) from its four curves'."""
    results = tmp_path / "results"
    shutil.copytree(REPO / "results" / "published", results / "published")
    summaries_dir = results / "per" / "full" / "minatar_runs"
    write_summaries(summaries_dir, ("uniform", 6.0), ("rank", 8.0), ("rank_no_is", 9.0))
    monkeypatch.setattr(reproduce, "RESULTS", results)
    monkeypatch.setattr(reproduce, "output_dir", lambda paper, profile: results / paper / profile)
    monkeypatch.setattr(minatar, "FLAGS", study_flags(profile="full", summarise_only=True))
    minatar.main([])
    out = results / "per" / "full"
    main = json.loads((out / "minatar.provenance.json").read_text())
    assert set(main["summary_files"]) == {"breakout_uniform_s0", "breakout_rank_s0"}
    fig12 = json.loads((out / "fig12.provenance.json").read_text())
    assert set(fig12["summary_files"]) == {"breakout_uniform_s0", "breakout_rank_s0", "breakout_rank_no_is_s0"}
    assert set(fig12["outputs"]) == {"fig12.csv", "fig12.md", "fig12.png"}


def _study(tmp_path, monkeypatch):
    results = tmp_path / "results"
    shutil.copytree(REPO / "results" / "published", results / "published")
    monkeypatch.setattr(reproduce, "RESULTS", results)
    monkeypatch.setattr(reproduce, "REPO_ROOT", tmp_path)

    def output_dir(paper, profile):
        (results / paper / profile).mkdir(parents=True, exist_ok=True)
        return results / paper / profile

    monkeypatch.setattr(reproduce, "output_dir", output_dir)
    return results


def test_a_quick_command_trains_and_writes_only_in_the_quick_profiles_directories(tmp_path, monkeypatch):
    """A smoke-scale run must never write into results/per/full/ (the published tables and their summaries) nor
    resume a full-profile run."""
    results = _study(tmp_path, monkeypatch)
    asked = []
    runs = [{**summary(v, 1.0), "frames": 15_000, "config": {}, "run_provenance": {}} for v in minatar.VARIANTS]

    def train(games, frames, summaries_dir, run_root):  # Summarises its jobs where it was told to.
        asked.append((games, frames, summaries_dir, run_root))
        summaries_dir.mkdir(parents=True, exist_ok=True)
        for written in runs:
            (summaries_dir / f"breakout_{written['variant']}_s0.json").write_text(json.dumps(written))
        return runs

    monkeypatch.setattr(minatar, "train", train)
    monkeypatch.setattr(minatar, "FLAGS", study_flags(profile="quick", summarise_only=False))
    minatar.main([])
    ((games, frames, summaries_dir, run_root),) = asked
    assert (games, frames) == (["breakout"], 15_000)
    assert summaries_dir == results / "per" / "quick" / "minatar_runs"
    assert run_root == tmp_path / "runs" / "reproduce" / "per_minatar_quick"
    assert (results / "per" / "quick" / "minatar.md").read_text().startswith("# SMOKE SCALE")
    assert not (results / "per" / "full").exists()


def test_summarise_only_names_a_job_fresh_asked_to_retrain_whose_old_row_it_tables(tmp_path, monkeypatch, capsys):
    results = _study(tmp_path, monkeypatch)
    summaries_dir = results / "per" / "full" / "minatar_runs"
    write_summaries(summaries_dir, ("uniform", 6.0), ("rank", 8.0))
    _runs.ask_fresh([tmp_path / "runs" / "reproduce" / "per_minatar_full" / "breakout_rank_s0"])
    monkeypatch.setattr(minatar, "FLAGS", study_flags(profile="full", summarise_only=True))
    minatar.main([])
    out = capsys.readouterr().out
    assert "breakout_rank_s0: --fresh asked at " in out and "has not retrained it yet; the tables use its old" in out


def test_the_shared_flags_default_to_the_quick_profile_and_reuse_finished_runs():
    """A study run with no flags is the smoke-scale one, and keeps what it finished: never days of retraining."""
    assert absl_flags.FLAGS["profile"].default == "quick"
    assert absl_flags.FLAGS["fresh"].default is False
    assert absl_flags.FLAGS["seed"].default == 0


def test_the_exploration_named_is_the_one_runs_of_that_budget_reached():
    """The quick profile's 15K-frame table said "epsilon 0.1 after 100K frames", which its runs never reached."""
    assert minatar.exploration_text(2_000_000) == "epsilon-greedy, epsilon 0.1 after 100K frames"
    assert minatar.exploration_text(100_000) == "epsilon-greedy, epsilon 0.1 after 100K frames"
    assert minatar.exploration_text(15_000) == (
        "epsilon-greedy, epsilon falling from 1 to 0.1 over 100K frames: not reached here"
    )


def test_the_mean_over_seeds_sets_each_variant_beside_uniform_on_the_same_seeds_and_counts_games():
    def row(game, variant, seed, frames, last100, young_tian):
        return {"game": game, "variant": variant, "seed": seed, "frames": frames, "last100": last100,
                "young_tian_dqn_5M": young_tian}  # fmt: skip

    rows = [
        row("seaquest", "uniform", 0, 2_000_000, 19.3, 19.4),
        row("seaquest", "uniform", 1, 2_000_000, 19.5, 19.4),  # Mean 19.4: a tie with Y&T, which counts.
        row("seaquest", "uniform", 2, 2_000_000, 29.9, 19.4),  # Seed 2 ran uniform only at 2M.
        row("seaquest", "rank", 0, 2_000_000, 1.42, 19.4),
        row("seaquest", "rank", 1, 2_000_000, 1.11, 19.4),  # Beside uniform's seeds 0 and 1 only: 19.4.
        row("seaquest", "rank", 2, 1_000_000, 0.9, 19.4),  # One seed at 1M: left out.
        row("freeway", "proportional", 1, 1_000_000, 50.0, 49.9),
        row("freeway", "proportional", 2, 1_000_000, 50.4, 49.9),  # Mean 50.2, exactly 0.3 over: within.
        row("freeway", "uniform", 1, 1_000_000, 47.0, 49.9),  # Uniform lacks seed 2 at 1M: no match.
        row("space_invaders", "rank", 0, 1_000_000, 44.0, 45.4),
        row("space_invaders", "rank", 1, 1_000_000, 44.9, 45.4),
        row("space_invaders", "rank", 2, 1_000_000, 44.3, 45.4),  # Mean 44.4: 1.0 under, within its ±1.
    ]
    cells = {(c["game"], c["variant"], c["frames"]): c for c in minatar.over_seeds(rows)}
    assert list(cells) == [("freeway", "proportional", 1_000_000), ("seaquest", "uniform", 2_000_000),
                           ("seaquest", "rank", 2_000_000), ("space_invaders", "rank", 1_000_000)]  # fmt: skip
    rank = cells["seaquest", "rank", 2_000_000]
    assert (rank["seeds"], rank["low"], rank["high"]) == ([0, 1], 1.11, 1.42)
    assert (rank["mean"], rank["uniform_mean"]) == (decimal.Decimal("1.265"), decimal.Decimal("19.4"))
    assert cells["seaquest", "uniform", 2_000_000]["mean"] == decimal.Decimal("22.9")  # Three seeds.
    assert cells["freeway", "proportional", 1_000_000]["uniform_mean"] is None
    at_or_above = "is at or above Y&T's DQN (at 5M), of those run on two seeds or more:"
    reading = "Within the reading of Y&T's figures (±0.3; ±1 on Space Invaders):"
    assert minatar.game_verdicts(list(cells.values())) == [
        f"Games whose mean over seeds at 1,000,000 frames {at_or_above} rank 0 of 1 (of space_invaders), "
        f"proportional 1 of 1 (freeway; of freeway). {reading} freeway proportional (50.200 against 49.9), "
        "space_invaders rank (44.400 against 45.4).",
        f"Games whose mean over seeds at 2,000,000 frames {at_or_above} uniform 1 of 1 (seaquest; of seaquest), "
        "rank 0 of 1 (of seaquest).",
    ]
    tie = [row("seaquest", "uniform", 0, 2_000_000, 19.3, 19.4), row("seaquest", "uniform", 1, 2_000_000, 19.5, 19.4)]
    assert minatar.game_verdicts(minatar.over_seeds(tie)) == [
        f"Games whose mean over seeds at 2,000,000 frames {at_or_above} uniform 1 of 1 (seaquest). "
        f"{reading} seaquest uniform (19.400 against 19.4).",
    ]  # The table's only game: not named again.
    text = "\n".join(minatar.over_seeds_lines(rows))
    assert "| seaquest | rank | 2,000,000 | 0, 1 | 1.265 | 1.11–1.42 | 19.400 | 19.4 |" in text
    assert "| freeway | proportional | 1,000,000 | 1, 2 | 50.200 | 50.00–50.40 | - | 49.9 |" in text
    assert minatar.over_seeds_lines(rows[:1]) == []


def test_across_games_pools_the_budgets_every_variant_ran_on_every_game_with_two_seeds_or_more(tmp_path):
    """Scores are divided by Y&T's DQN; 1M (seeds 1 and 2 everywhere) is pooled, 2M (seed 2 lacks Seaquest's rank
    run) has one complete seed and is left out. Rank beats uniform in every run: P(above uniform) is 1, in every
    resample. Proportional ties uniform on Breakout and loses elsewhere: 0.5 / 5 = 0.1."""
    reference = minatar.published()

    def row(game, variant, seed, frames, ratio):
        return {"game": game, "variant": variant, "seed": seed, "frames": frames,
                "last100": ratio * reference[game], "young_tian_dqn_5M": reference[game]}  # fmt: skip

    def ratio(game, variant, seed):
        level = "uniform" if (game, variant) == ("breakout", "proportional") else variant
        return {"uniform": 0.5, "rank": 0.8, "proportional": 0.2}[level] + 0.1 * seed

    jobs = [(game, variant, seed) for game in minatar.GAMES for variant in minatar.VARIANTS for seed in (1, 2)]
    rows = [row(*job, 1_000_000, ratio(*job)) for job in jobs]
    rows += [row(*job, 2_000_000, 1.0) for job in jobs if job != ("seaquest", "rank", 2)]
    cells = {(c["frames"], c["variant"], c["statistic"]): c for c in minatar.across_games(rows)}
    assert {frames for frames, _, _ in cells} == {1_000_000}
    assert {c["seeds"] for c in cells.values()} == {"1 2"}
    assert cells[1_000_000, "uniform", "mean"]["value"] == pytest.approx(0.65)  # Seeds at 0.6 and 0.7.
    assert cells[1_000_000, "rank", "iqm"]["value"] == pytest.approx(0.95)
    assert (1_000_000, "uniform", "p_above_uniform") not in cells
    rank = cells[1_000_000, "rank", "p_above_uniform"]
    assert (rank["value"], rank["ci_low"], rank["ci_high"]) == (1.0, 1.0, 1.0)
    assert cells[1_000_000, "proportional", "p_above_uniform"]["value"] == pytest.approx(0.1)
    text = "\n".join(minatar.across_games_lines(list(cells.values())))
    assert "| 1,000,000 | 1, 2 | uniform | 0.65 [0.60, 0.70] | 0.65 [0.60, 0.70] | 0.65 [0.62, 0.68] | - |" in text
    assert "| 1,000,000 | 1, 2 | rank | 0.95 [0.90, 1.00] |" in text
    assert minatar.across_games([r for r in rows if r["seed"] == 1]) == []  # One seed: no interval.
    minatar.plot_across_games(list(cells.values()), tmp_path / "pooled.png")
    height, width, _ = matplotlib.image.imread(tmp_path / "pooled.png").shape
    assert width > 5 * height  # One row (one budget) of four panels; two rows would be under 4 times as wide.
    minatar.write_across_games(list(cells.values()), tmp_path)
    assert all((tmp_path / name).stat().st_size for name in minatar.AGGREGATE_FILES)
    minatar.write_across_games([], tmp_path)  # Nothing pools (summaries removed): no earlier pair is left.
    assert not any((tmp_path / name).exists() for name in minatar.AGGREGATE_FILES)


def test_the_curves_legend_is_beside_the_panels_not_over_a_games_curves(tmp_path, monkeypatch):
    """The legend once sat inside Asterix's panel, over the curves it names."""
    monkeypatch.setattr(minatar, "FLAGS", types.SimpleNamespace(profile="full"))
    figures = []
    monkeypatch.setattr(minatar.plt, "close", figures.append)
    runs = [{**summary(v, 5.0), "seed": seed} for v in ("uniform", "rank") for seed in (0, 1)]
    minatar.plot(runs, {"breakout": 10.3}, tmp_path / "curves.png")
    (figure,) = figures
    assert [ax.get_legend() for ax in figure.axes] == [None]
    (legend,) = figure.legends
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == ["uniform, seed 0", "uniform, seed 1", "rank, seed 0", "rank, seed 1", "Y&T DQN at 5M"]
    renderer = figure.canvas.get_renderer()
    panel, box = figure.axes[0].get_window_extent(renderer), legend.get_window_extent(renderer)
    assert box.x0 >= panel.x1
