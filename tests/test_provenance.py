"""Provenance records: `provenance._git_state` in a throwaway git repository (commit and dirty flag), and
when a derived record is rewritten."""

import hashlib
import json
import pathlib
import subprocess

import pytest

from common import provenance


def _git(repo: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> pathlib.Path:
    """A repository with one committed source file, results/ tracked, and *.log ignored."""
    _git(tmp_path, "init", "--quiet")
    _git(tmp_path, "config", "user.email", "test@example.com")
    _git(tmp_path, "config", "user.name", "test")
    (tmp_path / "train.py").write_text("print('v1')\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "scores.csv").write_text("game,score\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "--quiet", "-m", "initial")
    return tmp_path


def test_clean_tree_reports_head_commit_and_not_dirty(repo):
    state = provenance._git_state(repo)
    assert state == {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": False}
    assert len(state["commit"]) == 40


def test_modified_tracked_file_is_dirty(repo):
    (repo / "train.py").write_text("print('v2')\n")
    assert provenance._git_state(repo)["dirty"] is True


def test_untracked_source_file_is_dirty(repo):
    (repo / "networks").mkdir()
    (repo / "networks" / "new_torso.py").write_text("pass\n")
    assert provenance._git_state(repo)["dirty"] is True


def test_ignored_file_is_not_dirty(repo):
    (repo / "run.log").write_text("step 1\n")
    assert provenance._git_state(repo)["dirty"] is False


def test_changes_under_results_are_not_dirty(repo):
    (repo / "results" / "scores.csv").write_text("game,score\npong,21\n")  # Modified, tracked.
    (repo / "results" / "impala").mkdir()
    (repo / "results" / "impala" / "provenance.json").write_text("{}\n")  # New, untracked.
    assert provenance._git_state(repo)["dirty"] is False


def test_outside_a_repository_says_unknown(tmp_path):
    assert provenance._git_state(tmp_path) == {"commit": "unknown", "dirty": "unknown"}


@pytest.mark.parametrize("start, busy", [(0.0, False), (0.49, False), (0.5, True), (2.3, True)])
def test_a_benchmark_calls_the_machine_busy_only_when_the_load_at_its_start_says_so(start, busy):
    sentence = provenance.describe_load(start, 2.5)
    assert sentence.startswith(f"Load average (1 min) at start {start:.1f}, at end 2.5, on ")
    assert ("busy at the start" in sentence) == busy
    assert ("nothing else ran at the start" in sentence) == (not busy)


def test_a_derived_record_is_rewritten_only_when_what_it_describes_changes(tmp_path, monkeypatch):
    """`--summarise_only` from a clean checkout rewrote every table's record (a new commit and date), with every
    table byte for byte the same (seen): `git status` was dirty after rebuilding unchanged tables."""
    state = {"commit": "a" * 40, "dirty": False}
    monkeypatch.setattr(provenance, "_AT_START", state)
    (tmp_path / "study.md").write_text("| game | score |\n")
    inputs = {"config": {"asterix_rank_s0": {"alpha": 0.7}}, "seeds": [0], "frames": 10, "wall_time_s": 5.0}
    path = provenance.write_derived(tmp_path, "study", scale="reduced", **inputs, extra={"assembled_in_s": 0.1})
    first = path.read_text()
    assert path.name == "study.provenance.json"
    assert json.loads(first)["outputs"] == {"study.md": hashlib.sha256(b"| game | score |\n").hexdigest()}

    def rebuilt(**changes) -> str:
        state.update(commit="b" * 40)  # A later commit: nothing it describes changed, unless `changes` say so.
        provenance.write_derived(
            tmp_path, "study", **{"scale": "reduced", **inputs, **changes}, extra={"assembled_in_s": 0.3}
        )
        return path.read_text()

    assert rebuilt() == first
    assert json.loads(rebuilt(frames=20))["commit"] == "b" * 40  # Another input.
    state.update(commit="a" * 40)
    provenance.write_derived(tmp_path, "study", scale="reduced", **inputs)
    (tmp_path / "study.md").write_text("| game | score | note |\n")  # Another table from the same inputs.
    assert json.loads(rebuilt())["commit"] == "b" * 40
    state.update(commit="a" * 40, dirty=True)
    provenance.write_derived(tmp_path, "study", scale="reduced", **{**inputs, "frames": 30})  # Another input.
    assert json.loads(path.read_text())["dirty"] is True
    state.update(dirty=False)
    # The same inputs and outputs from a clean tree: rewritten, as a record from a dirty tree names code no
    # commit holds.
    assert json.loads(rebuilt(frames=30))["dirty"] is False and json.loads(path.read_text())["commit"] == "b" * 40
