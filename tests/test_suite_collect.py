"""Assembling a suite from jobs finished in different places (`reproduce.suite.collect`)."""

from __future__ import annotations

import csv
import json
import pathlib
import shutil

import pytest

from common.errors import UsageError
from common.results import REPO_ROOT
from reproduce.suite import _plan, collect
from tests.test_suite import _finish, _suite, _suite_config


def _done(run_dir: pathlib.Path, steps: int, mean_return: float) -> None:
    """A finished, evaluated run with its records and 4 training episodes at frames 500..2000."""
    _finish(run_dir, steps, mean_return)
    for name in ("config.json", "provenance.json"):
        (run_dir / name).write_text(json.dumps({"file": name, "run": run_dir.name}))
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "ckpt-1.index").write_text("large")
    episodes = [(500, 1.0), (1000, 3.0), (1500, 5.0), (2000, 7.0)]
    rows = "".join(f"{frames},{episode_return}\n" for frames, episode_return in episodes)
    (run_dir / "episodes.csv").write_text("frames,episode_return\n" + rows)


@pytest.fixture
def source(tmp_path: pathlib.Path) -> pathlib.Path:
    """A suite of 2 games x 2 seeds with catch_s0 and breakout_s1 done, catch_s1 started, breakout_s0 not."""
    suite_dir = tmp_path / "source"
    _plan.save_suite(_suite_config(), suite_dir)
    _done(suite_dir / "catch_s0", steps=7, mean_return=0.5)
    _done(suite_dir / "breakout_s1", steps=9, mean_return=2.0)
    _finish(suite_dir / "catch_s1", steps=3, mean_return=None)
    return suite_dir


def test_collects_the_done_jobs_records_and_curve_without_checkpoints(source, tmp_path):
    dest = tmp_path / "dest"
    collected, kept, not_done = collect.collect(_plan.load_suite(source), source, dest)
    assert collected == ["catch_s0", "breakout_s1"] and kept == [] and not_done == ["breakout_s0", "catch_s1"]
    assert _plan.load_suite(dest) == _plan.load_suite(source)
    assert sorted(p.name for p in (dest / "catch_s0").iterdir()) == [
        "config.json", "curve.csv", "eval_step7.json", "final.json", "provenance.json",
    ]  # fmt: skip
    assert json.loads((dest / "breakout_s1" / "provenance.json").read_text()) == {
        "file": "provenance.json", "run": "breakout_s1",
    }  # fmt: skip
    # The suite driver and the aggregate see the collected jobs as done, with the same evaluation.
    assert [_plan.state(dest / job.name) for job in _plan.jobs(_plan.load_suite(dest))] == [
        "done", "todo", "todo", "done",
    ]  # fmt: skip
    assert _plan.evaluation(dest / "catch_s0") == {"mean_return": 0.5, "episodes": 5}
    # 1% bins of the 3,000-frame budget (30 frames): one episode per bin here, its own return.
    with open(dest / "catch_s0" / "curve.csv", newline="") as f:
        curve = [(int(row["frames"]), float(row["mean_return"])) for row in csv.DictReader(f)]
    assert curve == [(480, 1.0), (990, 3.0), (1500, 5.0), (1980, 7.0)]


def test_collecting_again_keeps_what_dest_has_done(source, tmp_path):
    dest = tmp_path / "dest"
    collect.collect(_plan.load_suite(source), source, dest)
    (dest / "catch_s0" / "final.json").write_text((dest / "catch_s0" / "final.json").read_text() + " ")
    before = (dest / "catch_s0" / "final.json").read_text()
    collected, kept, _ = collect.collect(_plan.load_suite(source), source, dest)
    assert collected == [] and kept == ["catch_s0", "breakout_s1"]
    assert (dest / "catch_s0" / "final.json").read_text() == before


def test_an_unfinished_run_in_dest_is_an_error_and_nothing_is_copied(source, tmp_path):
    dest = tmp_path / "dest"
    _plan.save_suite(_suite_config(), dest)
    (dest / "catch_s0").mkdir()
    with pytest.raises(UsageError, match="unfinished runs of catch_s0"):
        collect.collect(_plan.load_suite(source), source, dest)
    assert not (dest / "breakout_s1").exists() and list((dest / "catch_s0").iterdir()) == []


def test_a_dest_of_another_preset_is_an_error(source, tmp_path):
    dest = tmp_path / "dest"
    _plan.save_suite(_suite_config(preset="minatar"), dest)
    with pytest.raises(UsageError, match="preset=minatar, not toy"):
        collect.collect(_plan.load_suite(source), source, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["suite.json"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["only_one"], "expected two suite directories"),
        (["/nonexistent/suite", "/tmp/dest"], "has no suite.json: not a suite directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = _suite(*args, module="reproduce.suite.collect")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr and "Traceback" not in result.stderr


def test_collecting_keeps_the_games_and_seeds_dest_already_lists(tmp_path: pathlib.Path):
    """Collecting a shard of seeds 0-1 into a suite of seeds 0-2 must not drop seed 2 from its suite.json."""
    source, dest = tmp_path / "source", tmp_path / "dest"
    _plan.save_suite(_suite_config(), source)
    _done(source / "catch_s0", steps=7, mean_return=0.5)
    _plan.save_suite(_suite_config(seeds=(0, 1, 2)), dest)
    collect.collect(_plan.load_suite(source), source, dest)
    assert _plan.load_suite(dest).seeds == (0, 1, 2)


def test_collecting_again_reports_kept_jobs_as_done(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture):
    """A job dest already has is kept, not "not done in source"; the first collection keeps none."""
    source, dest = tmp_path / "source", tmp_path / "dest"
    _plan.save_suite(_suite_config(), source)
    _done(source / "catch_s0", steps=7, mean_return=0.5)
    collect.main(["collect", str(source), str(dest)])
    assert "already done there" not in capsys.readouterr().out
    collected, kept, not_done = collect.collect(_plan.load_suite(source), source, dest)
    assert (collected, kept) == ([], ["catch_s0"]) and not_done == ["breakout_s0", "catch_s1", "breakout_s1"]


def test_collecting_a_run_without_provenance_copies_the_rest(tmp_path: pathlib.Path):
    """Runs from before provenance was recorded have no provenance.json: collected without it, not a crash."""
    source, dest = tmp_path / "source", tmp_path / "dest"
    _plan.save_suite(_suite_config(), source)
    _done(source / "catch_s0", steps=7, mean_return=0.5)
    (source / "catch_s0" / "provenance.json").unlink()
    collected, _, _ = collect.collect(_plan.load_suite(source), source, dest)
    assert collected == ["catch_s0"]
    assert sorted(p.name for p in (dest / "catch_s0").iterdir()) == [
        "config.json", "curve.csv", "eval_step7.json", "final.json",
    ]  # fmt: skip


def test_the_committed_suite_collects_back_into_runs_as_the_readme_says(tmp_path: pathlib.Path):
    """The README's first command: results/suites/impala_minatar (collected jobs: curve.csv, no episodes.csv)
    into a working directory. It once failed on the first job, leaving it half copied and counted as done."""
    source = REPO_ROOT / "results" / "suites" / "impala_minatar"
    dest = tmp_path / "runs" / "impala_minatar_minatar"
    collected, kept, not_done = collect.collect(_plan.load_suite(source), source, dest)
    assert collected and not kept and not not_done
    for name in collected:
        assert (dest / name / "curve.csv").read_bytes() == (source / name / "curve.csv").read_bytes()
        assert _plan.evaluation(dest / name) == _plan.evaluation(source / name)


def test_a_job_without_a_curve_is_one_line_and_leaves_no_half_copied_job(source, tmp_path):
    (source / "breakout_s1" / "episodes.csv").unlink()
    dest = tmp_path / "dest"
    with pytest.raises(UsageError, match="breakout_s1 has neither episodes.csv nor curve.csv"):
        collect.collect(_plan.load_suite(source), source, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["catch_s0", "suite.json"]
    assert _plan.state(dest / "breakout_s1") == "todo"


@pytest.mark.parametrize("where", ["a_file/dest", "another_preset"])
def test_a_destination_that_cannot_take_the_suite_is_one_line_and_exit_2(source, tmp_path, where):
    (tmp_path / "a_file").write_text("mine\n")
    _plan.save_suite(_suite_config(preset="minatar"), tmp_path / "another_preset")
    result = _suite(str(source), str(tmp_path / where), module="reproduce.suite.collect")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    remedy = "a_file is a file, not a directory" if where == "a_file/dest" else "give another destination"
    assert remedy in result.stderr and "--suite_dir" not in result.stderr
    assert (tmp_path / "a_file").read_text() == "mine\n"


def test_the_aggregate_refuses_a_job_evaluated_over_other_episodes(tmp_path: pathlib.Path):
    """A job re-evaluated by hand (`impala.evaluate RUN --episodes 5`) was averaged in beside the suite's
    200-episode evaluations without a word."""
    suite_dir = tmp_path / "suite"
    shutil.copytree(REPO_ROOT / "results" / "suites" / "impala_minatar", suite_dir)
    evaluation = _plan.evaluation_path(suite_dir / "breakout_s0")
    evaluation.write_text(json.dumps({**json.loads(evaluation.read_text()), "episodes": 5}))
    before = (suite_dir / "aggregate.csv").read_text()
    result = _suite(str(suite_dir), "--reps=10", module="reproduce.suite.aggregate")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "breakout_s0: its final evaluation has 5 episode(s), the suite's 200" in result.stderr
    assert (suite_dir / "aggregate.csv").read_text() == before


def test_an_aggregate_made_again_keeps_a_clean_record_of_unchanged_outputs(tmp_path: pathlib.Path):
    """It rewrote aggregate.provenance.json with a new commit and date: `git status` dirty after a command that
    changed nothing."""
    suite_dir = tmp_path / "suite"
    shutil.copytree(REPO_ROOT / "results" / "suites" / "impala_minatar", suite_dir)
    assert _suite(str(suite_dir), module="reproduce.suite.aggregate").returncode == 0
    path = suite_dir / "aggregate.provenance.json"
    # As if an earlier clean commit had written it: only that commit's code made these bytes.
    earlier = {**json.loads(path.read_text()), "commit": "a" * 40, "dirty": False, "date_utc": "2026-01-01"}
    path.write_text(json.dumps(earlier, indent=2) + "\n")
    assert set(earlier["outputs"]) == {"aggregate.csv", "aggregate.md", "aggregate.png", "per_game.csv", "per_game.png"}
    assert _suite(str(suite_dir), module="reproduce.suite.aggregate").returncode == 0
    assert json.loads(path.read_text()) == earlier


def test_the_aggregate_names_every_job_where_no_evaluation_count_is_the_majority(tmp_path: pathlib.Path):
    """Two jobs, 5 and 200 episodes: either may be the odd one, so neither is blamed alone."""
    from reproduce.suite import aggregate

    episodes = {"breakout_s0": ("minatar", {5}), "asterix_s0": ("minatar", {200})}
    with pytest.raises(
        UsageError, match=r"minatar jobs' final evaluations differ in episodes \(breakout_s0: 5; asterix_s0: 200\)"
    ):
        aggregate.check_one_protocol(_suite_config(), episodes, tmp_path)
    aggregate.check_one_protocol(_suite_config(eval_episodes=5), {"breakout_s0": ("minatar", {5})}, tmp_path)
