"""`reproduce._runs`: the decisions a study takes from its runs' files and commands.

Which run a job is, its budget, whether a run stopped short or was started since a date,
and the curves and totals its summary records. No training: each test writes the files
a run would leave and asks the decision.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from common import config as config_lib
from common.errors import UsageError
from reproduce import _runs

JOB = ["--preset=per_minatar_rank", "--env=minatar:breakout", "--seed=0"]


def provenance(run_dir: pathlib.Path, segments: list[dict]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "provenance.json").write_text(json.dumps({"segments": segments}))


def command(frames: int, *extra: str) -> str:
    return " ".join(["python", "-m", "per.train", *JOB, f"--frames={frames}", *extra])


def test_whole_budget_accepts_its_bounds():
    """`--frames=1` is the smallest whole number the refusal asks for ("need a whole number >= 1"): it is accepted."""
    assert _runs.whole_budget(1.0) == 1
    assert _runs.whole_budget(float(config_lib.MAX_FRAMES)) == config_lib.MAX_FRAMES
    with pytest.raises(UsageError, match="--frames=0"):
        _runs.whole_budget(0.0)


def test_a_started_run_is_resumed_only_if_it_was_started_with_these_flags(tmp_path):
    """A run with config.json but no final.json (stopped part-way) is resumed only for the flags that started it.

    Without the check a study would resume another job's run (here another seed) as this one's, silently.
    """
    run_dir = tmp_path / "job"
    provenance(run_dir, [{"command": command(1000), "total_frames": 1000}])
    (run_dir / "config.json").write_text("{}")
    made = _runs.training_command("per.train", run_dir, [*JOB, "--frames=1000"])
    assert made is not None and made[-2:] == [f"--run_dir={run_dir}", "--resume"]
    with pytest.raises(UsageError, match="trained with other flags"):
        _runs.training_command("per.train", run_dir, [*JOB[:2], "--seed=1", "--frames=1000"])


def test_a_commands_budget_is_its_last_frames_flag():
    """absl takes the last of a repeated `--frames`: so must the budget read from a recorded (hand-typed) command."""
    assert _runs.budget(["--frames=1000", "--frames=2e3"]) == 2000


def test_a_run_that_reached_its_budget_exactly_did_not_stop_short(tmp_path):
    """A finished run asked a smaller budget is refused with --fresh only, not told to "finish" what it finished."""
    run_dir = tmp_path / "job"
    run_dir.mkdir()
    (run_dir / "final.json").write_text(json.dumps({"frames": 1000}))
    assert not _runs.stopped_short(run_dir, [*JOB, "--frames=1000"], [*JOB, "--frames=500"])
    (run_dir / "final.json").write_text(json.dumps({"frames": 999}))
    assert _runs.stopped_short(run_dir, [*JOB, "--frames=1000"], [*JOB, "--frames=500"])


def test_the_seed_names_the_job():
    """Two seeds of one arm are two jobs: a summary of seed 0 must never stand for seed 1."""
    assert _runs.job_of([*JOB, "--frames=1e3", "--config_override=x=1"]) == sorted([*JOB, "--frames=1000"])


def test_started_since_a_date_is_strict_unless_at_or_after(tmp_path):
    """A run started in the second `--fresh` was asked is that retraining; one started with a summary is not newer."""
    run_dir = tmp_path / "job"
    provenance(run_dir, [{"date_utc": "2026-01-01T00:00:00+00:00"}])
    assert _runs.started_since(run_dir, ["2026-01-01T00:00:00+00:00"], at_or_after=True)
    assert not _runs.started_since(run_dir, ["2026-01-01T00:00:00+00:00"])


def test_episode_scores_curve_starts_at_the_100th_episode_and_keeps_a_lone_episode():
    """The curve's first point is the first full 100-episode mean; last100 is the mean of exactly 100 returns."""
    returns = np.arange(1.0, 201.0)
    scores = _runs.episode_scores(returns * 10, returns, curve_points=3)
    assert scores["curve"]["frames"][0] == 1000  # Episode 100 (index 99), ending at frame 1000.
    assert scores["curve"]["trailing100"][0] == 50.5
    assert scores["last100"] == 150.5  # mean(101..200).
    one = _runs.episode_scores(np.array([7.0]), np.array([3.0]))
    assert one["curve"] == {"frames": [7], "trailing100": [3.0]} and one["last100"] == 3.0


def test_run_curve_keeps_the_point_at_its_limit_and_the_first_curves_value():
    """A point at exactly `up_to` frames belongs to that budget's curve, and a frame held twice keeps `first`'s."""
    summary = {
        "frames": 2000, "curve": {"frames": [1000, 2000], "trailing100": [1.0, 2.0]},
        "earlier_budgets": [{"curve": {"frames": [500, 1000], "trailing100": [0.5, 9.0]}}],
    }  # fmt: skip
    first = summary["earlier_budgets"][0]["curve"]
    assert _runs.run_curve(summary, up_to=1000, first=first) == {"frames": [500, 1000], "trailing100": [0.5, 9.0]}
    assert _runs.run_curve(summary) == {"frames": [500, 1000, 2000], "trailing100": [0.5, 1.0, 2.0]}


def test_a_study_record_sums_its_jobs_frames_and_wall_times(tmp_path):
    """A study's frames and wall time are its jobs' totals (a job without a wall time adds none)."""
    jobs = {}
    for name, frames, wall in (("a", 1000, 10.0), ("b", 3000, None)):
        (tmp_path / f"{name}.json").write_text("{}")
        jobs[name] = {"config": {}, "seed": 0, "frames": frames, "wall_time_s": wall, "run_provenance": {}}
    record = _runs.study_record(jobs, "full", 0.0, tmp_path)
    assert record["frames"] == 4000 and record["wall_time_s"] == 10.0


def test_binned_curve_puts_episodes_past_the_budget_in_the_last_bin():
    """An episode logged at or past the budget joins the last bin, not a bin of its own."""
    rows = _runs.binned_curve("r", np.array([10.0, 60.0, 100.0, 101.0]), np.array([1.0, 2.0, 4.0, 6.0]), 100, 50)
    assert rows == [
        {"run": "r", "frames": 0, "mean_return": 1.0},
        {"run": "r", "frames": 50, "mean_return": 4.0},  # 60, 100 and 101: mean(2, 4, 6).
    ]


def test_summarise_only_refuses_any_frames_given(tmp_path):
    """`--summarise_only --frames=0` would be silently ignored too: any --frames given is refused."""
    with pytest.raises(UsageError, match="--frames=0"):
        _runs.check_summarise_only(False, False, 0.0)


def test_a_finished_runs_evaluation_is_reused_only_for_the_same_step_episodes_and_seed(tmp_path, monkeypatch):
    """Running a study again to rebuild its tables once evaluated the run again each time, and set the earlier
    result aside as eval_step<N>.json.1, .2, ...: now the final step's evaluation is reused when it matches."""
    calls = []

    def evaluated(command, **kwargs):
        calls.append(command)
        (tmp_path / "eval_step40.json").write_text(json.dumps({"episodes": 3, "seed": 9, "mean_return": 2.0}))
        return 0, 0

    monkeypatch.setattr(_runs, "call_handing_on", evaluated)
    (tmp_path / "final.json").write_text(json.dumps({"learner_steps": 40}))
    (tmp_path / "eval_step40.json").write_text(json.dumps({"episodes": 3, "seed": 5, "mean_return": 1.0}))
    assert _runs.evaluate("per.evaluate", tmp_path, 3, 5)["mean_return"] == 1.0
    assert not calls
    assert _runs.evaluate("per.evaluate", tmp_path, 3, 9)["mean_return"] == 2.0  # Another seed: evaluated.
    assert _runs.evaluate("per.evaluate", tmp_path, 4, 9)["mean_return"] == 2.0  # Other episodes: evaluated.
    (tmp_path / "final.json").write_text(json.dumps({"learner_steps": 80}))  # Extended: its new final step.
    _runs.evaluate("per.evaluate", tmp_path, 3, 9)
    assert len(calls) == 3
