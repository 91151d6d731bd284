"""`reproduce.per.atari`'s jobs, table and bad input (its runs are long: not trained here).

The study's logic is imported from `reproduce.per._atari`, not the script: the
script's flags (`games`, `variants`, `seeds`, `frames`) are other scripts' too,
and absl refuses a second definition of a flag in one process.
"""

import csv
import dataclasses
import json
import shutil
import sys
import time

import matplotlib.image
import pytest

from common import config as config_lib
from common.errors import UsageError
from per.config import PRESETS
from reproduce import _runs
from reproduce.per import _atari
from tests.test_cli import REPO, assert_one_line_usage_error, run


def resolve(job_flags: list[str]):
    """The config `per.train` builds from a job's flags."""
    given = dict(f.removeprefix("--").split("=", 1) for f in job_flags if not f.startswith("--config_override="))
    overrides = tuple(f.removeprefix("--config_override=") for f in job_flags if f.startswith("--config_override="))
    request = config_lib.Request(
        preset=given["preset"], env=given["env"], frames=float(given["frames"]), seed=int(given["seed"]),
        overrides=overrides,
    )  # fmt: skip
    return config_lib.resolve(PRESETS, given["preset"], request, "per config")


@pytest.mark.parametrize("profile", list(_atari.OVERRIDES))
@pytest.mark.parametrize("variant", list(_atari.VARIANTS))
def test_each_variant_is_its_preset_with_only_the_budget_and_the_profiles_overrides(variant, profile):
    preset = PRESETS[_atari.VARIANTS[variant]]
    overrides = _atari.OVERRIDES[profile]
    config = resolve(_atari.job_flags(variant, "breakout", 20_000, 3, overrides))
    changed = {f.name for f in dataclasses.fields(config) if getattr(config, f.name) != getattr(preset, f.name)}
    assert changed == {"env", "total_frames", "seed", *(o.split("=")[0] for o in overrides)}
    assert (config.env, config.total_frames, config.seed, config.replay) == ("atari:breakout", 20_000, 3, variant)


@pytest.mark.parametrize("variant", list(_atari.VARIANTS))
def test_quick_learns_within_its_budget(variant):
    """A smoke run that never updates, or never copies its target, would not test the agent."""
    frames = _atari.FRAMES["quick"]
    config = resolve(_atari.job_flags(variant, "pong", frames, 0, _atari.OVERRIDES["quick"]))
    steps = frames // config.frames_per_step
    updates = (steps - config.min_replay_size) // config.update_period
    assert config.epsilon_decay_steps < steps and updates >= 2 * config.target_update_period
    assert config.replay_capacity <= 10_000


def summary(variant: str, eval_return: float, overrides: tuple[str, ...] = ()) -> dict:
    return {
        "game": "pong", "variant": variant, "seed": 0, "frames": 4_000_000, "episodes": 900, "last100": -5.0,
        "wall_time_s": 10.0, "curve": {"frames": [2_000_000, 4_000_000], "trailing100": [-15.0, -5.0]},
        "config": {"env": "atari:pong"}, "run_provenance": {"commit": "a" * 40}, "overrides": list(overrides),
        # Pong in PER Table 7: random -18.0, human 15.5.
        "eval": {"episodes": 30, "mean_return": eval_return, "human_normalized": (eval_return + 18.0) / 33.5},
    }  # fmt: skip


SUMMARIES = [summary("proportional", 1.0), summary("uniform", 2.0), summary("rank", 3.0)]


def test_rows_follow_the_variants_beside_per_tables_7_and_6():
    rows = _atari.table_rows(SUMMARIES, _atari.published())
    assert [r["variant"] for r in rows] == ["uniform", "rank", "proportional"]
    assert [r["eval_mean_return"] for r in rows] == [2.0, 3.0, 1.0]
    # PER Table 7 (raw) and Table 6 (% human) for Pong: tuned DDQN, rank-based, proportional.
    assert [r["per_200M"] for r in rows] == [19.1, 18.9, 18.9]
    assert [r["per_200M_normalized"] for r in rows] == [1.11, 1.10, 1.10]
    assert (rows[0]["frames"], rows[0]["paper_frames"], rows[0]["train_last100"]) == (4_000_000, 200_000_000, -5.0)
    assert (rows[0]["eval_starts"], rows[0]["paper_starts"]) == ("no-op", "human")


def test_markdown_says_the_starts_and_budgets_differ():
    text = _atari.markdown(_atari.table_rows(SUMMARIES, _atari.published()), "full")
    assert text.startswith("# Reduced scale")
    assert "**no-op starts** (up to 30 no-ops" in text and "**human starts**" in text
    assert "not the same measurement" in text
    assert "episodes, the final agent" in text and "the best agent found during training" in text
    assert "tuned DDQN's\nshared bias" in text and "epsilon anneals from the first step" in text
    assert "4,000,000 frames of the paper's 200M, 1 seed," in text
    assert "epsilon decays over 1M agent steps" in text  # No override: the paper's schedule, said to be long.
    assert "| pong | uniform | 0 | 4,000,000 | -5.00 | 2.0 | 59.7% | 19.1 | 111% |" in text
    assert "| pong | rank | 0 | 4,000,000 | -5.00 | 3.0 | 62.7% | 18.9 | 110% |" in text
    assert "| pong | proportional | 0 | 4,000,000 | -5.00 | 1.0 | 56.7% | 18.9 | 110% |" in text


def test_a_quick_table_is_marked_smoke_scale_and_names_its_overrides():
    runs = [summary(v, 0.0, _atari.OVERRIDES["quick"]) for v in ("uniform", "proportional")]
    text = _atari.markdown(_atari.table_rows(runs, _atari.published()), "quick")
    assert text.startswith("# SMOKE SCALE")
    assert "Smoke-scale overrides: `" + " ".join(_atari.OVERRIDES["quick"]) + "`." in text


def test_a_run_trained_on_to_a_larger_budget_is_named_with_its_budgets():
    command = "python -m per.train --preset=atari_ddqn_prop --env=atari:pong --frames={} --seed=0"
    segments = [{"command": command.format(2_000_000)}, {"command": command.format(4_000_000) + " --resume"}]
    extended = {**summary("proportional", 1.0), "run_provenance": {"segments": segments}}
    rows = _atari.table_rows([summary("uniform", 2.0), extended], _atari.published())
    assert [r["budgets"] for r in rows] == ["4000000", "2000000 4000000"]
    text = _atari.markdown(rows, "full")
    note = "budget (resumed from the last checkpoint): pong proportional seed 0: to 2,000,000, then 4,000,000 frames"
    assert note in text.replace("\n", " ")
    assert "Trained on" not in _atari.markdown(_atari.table_rows(SUMMARIES, _atari.published()), "full")


def test_the_study_is_written_from_the_summaries(tmp_path):
    (tmp_path / "atari_runs").mkdir()
    for s in SUMMARIES:
        (tmp_path / "atari_runs" / f"{s['game']}_{s['variant']}_s{s['seed']}.json").write_text(json.dumps(s))
    _atari.write_study(tmp_path, SUMMARIES, "full", time.time())
    with open(tmp_path / "atari.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["game"], r["variant"], r["seed"], r["frames"]) for r in rows][0] == ("pong", "uniform", "0", "4000000")
    assert {"train_last100", "eval_mean_return", "per_200M"} <= set(rows[0])
    assert (tmp_path / "atari.md").read_text().count("| pong |") == 3
    assert matplotlib.image.imread(tmp_path / "atari.png").shape[0] > 300
    record = json.loads((tmp_path / "atari.provenance.json").read_text())
    assert set(record["run_provenance"]) == {"pong_uniform_s0", "pong_rank_s0", "pong_proportional_s0"}
    assert set(record["summary_files"]) == set(record["run_provenance"])


def test_the_committed_table_is_what_the_committed_summaries_make(tmp_path):
    """Rebuilt with today's code from results/per/full/atari_runs: a generator change commits its table too."""
    committed = REPO / "results" / "per" / "full"
    shutil.copytree(committed / "atari_runs", tmp_path / "atari_runs")
    _atari.write_study(tmp_path, _runs.load_summaries(tmp_path / "atari_runs"), "full", time.time())
    for name in ("atari.md", "atari.csv"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), f"{name} is stale"


@pytest.mark.parametrize(
    "flag, fragments",
    [
        ("--games=pongg", ["--games: unknown atari game 'pongg'", "pong"]),
        ("--variants=prioritized", ["--variants: unknown variant 'prioritized'", "uniform, rank, proportional"]),
        ("--frames=0.5", ["--frames=0.5: need a whole number >= 1"]),
        ("--frames=0", ["--frames=0: need a whole number >= 1"]),
        ("--frames=1e20", ["--frames=1e+20: need a whole number >= 1 (at most 1e+15)"]),
        ("--eval_episodes=0", ["--eval_episodes=0: need a whole number >= 1"]),
        ("--seeds=0", ["--seeds=0", "not a positive integer"]),
        ("--jobs=0", ["--jobs=0", "not a positive integer"]),
        ("--extend --fresh", ["--fresh retrains from the start and --extend trains on: pass one of them"]),
        ("--extend", ["--extend trains summarised runs on to a larger budget: name it with --frames"]),
        ("--summarise_only --fresh --extend", ["--fresh and --extend train: pass --summarise_only alone"]),
        (
            "--summarise_only --games=pong --variants=uniform --seed=1 --seeds=2 --jobs=2 --eval_episodes=5",
            ["present; --games, --variants, --seed, --seeds, --jobs, --eval_episodes choose or shape runs to train"],
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(flag, fragments):
    assert_one_line_usage_error(run(sys.executable, "-m", "reproduce.per.atari", *flag.split()), *fragments)


def test_the_script_offers_extend_for_a_larger_budget_and_checks_the_run_is_here_before_training():
    """Against the committed Breakout summaries: both commands stop before any training."""
    frames = "--frames=1e9"  # Larger than any committed run's budget.
    refused = run(sys.executable, "-m", "reproduce.per.atari", "--profile=full", frames)
    if (REPO / "runs" / "reproduce" / "per_atari_full").exists():
        at = "summarises this job at 3,200,000 frames, not 1,000,000,000"
        assert_one_line_usage_error(refused, at, "pass --extend to train it on to 1,000,000,000")
        pytest.skip("this checkout holds PER Atari runs: --extend would train them on")
    # Their runs are not in this checkout: the refusal says where they were, not only to pass --extend.
    on = "--extend would train it on to 1,000,000,000 frames from its last checkpoint, which was"
    assert_one_line_usage_error(refused, "summarises this job at 3,200,000 frames", "pass --fresh to retrain it", on)
    extend = run(sys.executable, "-m", "reproduce.per.atari", "--profile=full", frames, "--extend")
    assert_one_line_usage_error(extend, "holds no run to train on (no config.json): --extend resumes breakout_")


def test_a_summary_trained_with_other_settings_than_its_preset_now_gives_is_refused(tmp_path):
    """The committed Breakout runs hold today's presets; one whose step size differs is refused, not kept."""
    from reproduce import _runs

    configs = {}
    for path in sorted((REPO / "results" / "per" / "full" / "atari_runs").glob("breakout_*_s0.json")):
        summary = json.loads(path.read_text())
        flags = _atari.job_flags(summary["variant"], "breakout", summary["frames"], 0, tuple(summary["overrides"]))
        configs[path.stem] = _atari.job_config(flags)
        (tmp_path / path.name).write_text(path.read_text())
    assert set(configs) == {"breakout_uniform_s0", "breakout_proportional_s0"}
    _runs.check_settings(tmp_path, configs)
    tampered = json.loads((tmp_path / "breakout_uniform_s0.json").read_text())
    tampered["config"]["learning_rate"] = 0.1
    (tmp_path / "breakout_uniform_s0.json").write_text(json.dumps(tampered))
    with pytest.raises(UsageError, match=r"breakout_uniform_s0.json was trained with other settings than its preset "
                       r"now gives \(learning_rate 0.1 -> 0.00025\); pass --fresh"):  # fmt: skip
        _runs.check_settings(tmp_path, configs)


def test_the_full_profile_keeps_the_committed_runs():
    """`make reproduce PROFILE=full` runs the script's default command, which must keep the committed
    summaries: a profile budget other than theirs (it was 4M frames, the runs 3.2M) refused them, and the
    whole `make reproduce` failed on it."""
    committed = REPO / "results" / "per" / "full" / "atari_runs"
    kept = {}
    for game in _atari.GAMES:
        for variant in ("uniform", "proportional"):  # The script's default --variants.
            flags = _atari.job_flags(variant, game, _atari.FRAMES["full"], 0, _atari.OVERRIDES["full"])
            path = committed / f"{_runs.job_name(game, variant, 0)}.json"
            kept[path.stem] = _runs.summary_kept(path, False, flags, _atari.EVAL_EPISODES["full"], say=print)
    assert kept == {"breakout_uniform_s0": True, "breakout_proportional_s0": True}
