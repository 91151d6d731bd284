"""Provenance records: `provenance._git_state` in a throwaway git repository (commit and dirty flag), and
when a derived record is rewritten."""

import functools
import hashlib
import json
import pathlib
import re
import subprocess
import sys
import types

import pytest

from common import provenance
from tests.test_cli import run


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
    assert rebuilt(wall_time_s=7.5) == first  # How long the inputs or a computation took is a circumstance.
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


def test_the_command_is_the_one_typed_with_every_argument(monkeypatch):
    """`python -m reproduce.per.minatar --profile full --games breakout`: every argument, the first one too."""
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="reproduce.suite.__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", ["/x/reproduce/suite/__main__.py", "--profile=full", "--games", "breakout x"])
    assert provenance.command() == "python -m reproduce.suite --profile=full --games 'breakout x'"
    monkeypatch.setattr(main, "__spec__", None)
    monkeypatch.setattr(sys, "argv", ["scripts/run.py", "--seed=3"])
    assert provenance.command() == "python scripts/run.py --seed=3"


def test_records_and_stamps_name_the_code_at_the_start_not_at_the_end(monkeypatch):
    """An evaluation's stamp and a run's record describe the tree the process started from: an edit made while it
    ran (a dirty tree now, another HEAD) must not be credited to, or blamed on, its result."""
    monkeypatch.setattr(provenance, "_AT_START", {"commit": "a" * 40, "dirty": False})
    monkeypatch.setattr(provenance, "_git_state", lambda *args, **kwargs: {"commit": "b" * 40, "dirty": True})
    assert {k: provenance.stamp()[k] for k in ("commit", "dirty")} == {"commit": "a" * 40, "dirty": False}
    record = provenance.record(config={}, seeds=[0], frames=1, wall_time_s=1.0, scale="reduced")
    assert (record["commit"], record["dirty"]) == ("a" * 40, False)


def test_a_record_from_outside_git_is_rewritten_from_a_clean_checkout(tmp_path, monkeypatch):
    """`dirty: "unknown"` (no git at the time) names no commit: a clean rebuild replaces it, as a dirty one's."""
    state = {"commit": "unknown", "dirty": "unknown"}
    monkeypatch.setattr(provenance, "_AT_START", state)
    (tmp_path / "study.md").write_text("x\n")
    inputs = {"config": {}, "seeds": [0], "frames": 10, "wall_time_s": 5.0, "scale": "reduced"}
    path = provenance.write_derived(tmp_path, "study", **inputs)
    state.update(commit="c" * 40, dirty=False)
    provenance.write_derived(tmp_path, "study", **inputs)
    assert json.loads(path.read_text())["commit"] == "c" * 40 and json.loads(path.read_text())["dirty"] is False


def test_a_derived_record_is_rewritten_when_only_its_runs_configs_change(tmp_path, monkeypatch):
    """The same table bytes from runs of another config (a summary retrained under a fixed preset, same score):
    the record must name the config its inputs now have."""
    state = {"commit": "a" * 40, "dirty": False}
    monkeypatch.setattr(provenance, "_AT_START", state)
    (tmp_path / "study.md").write_text("x\n")
    inputs = {"seeds": [0], "frames": 10, "wall_time_s": 5.0, "scale": "reduced"}
    path = provenance.write_derived(tmp_path, "study", config={"job": {"lr": 1}}, **inputs)
    state.update(commit="b" * 40)
    provenance.write_derived(tmp_path, "study", config={"job": {"lr": 2}}, **inputs)
    assert json.loads(path.read_text())["config"] == {"job": {"lr": 2}}


def test_a_modified_file_in_any_source_package_is_dirty(tmp_path):
    """Only results/ is exempt: an edit to a study script, a shared helper or a preset is an edit to the code."""

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "--quiet")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    for path in ("reproduce/per/minatar.py", "common/provenance.py", "per/config.py", "results/per/full/minatar.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("v1\n")
    git("add", ".")
    git("commit", "--quiet", "-m", "initial")
    for path in ("reproduce/per/minatar.py", "common/provenance.py", "per/config.py"):
        (tmp_path / path).write_text("v2\n")
        assert provenance._git_state(tmp_path)["dirty"] is True, path
        git("checkout", "--", path)
    assert provenance._git_state(tmp_path)["dirty"] is False


EXACT_STUDY = """
import pathlib, sys
import common.results
from common import cli, provenance
common.results.RESULTS = pathlib.Path(sys.argv.pop(1))
provenance._AT_START = {"commit": sys.argv.pop(1), "dirty": False}
module = sys.argv.pop(1)
if module == "propositions":
    from reproduce.laser import propositions as m
    m.PROFILES["quick"] = m.Study(num_mdps=1, steps=300, sweep=9)
else:
    from reproduce.impala import vtrace_operator as m
    m.PROFILES["quick"] = m.Study(num_mdps=2, num_states=4, num_actions=2)
cli.run(m.main)
"""


@pytest.mark.parametrize(
    "module, paper, figures",
    [
        ("propositions", "laser", ["propositions_prop1.png", "propositions_prop2.png", "propositions_prop3.png"]),
        ("vtrace_operator", "impala", ["vtrace_operator.png"]),
    ],
)
def test_an_exact_study_regenerated_unchanged_keeps_its_record(tmp_path, module, paper, figures):
    """`reproduce.laser.propositions --profile full` from a clean checkout rewrote its record (a new commit, date
    and wall time) with every output byte for byte the same: git was dirty after regenerating. The record
    hashes every output, the figures too."""

    def regenerated(commit: str) -> str:
        result = run(sys.executable, "-c", EXACT_STUDY, str(tmp_path), commit, module, "--profile=quick")
        assert result.returncode == 0, result.stderr
        return (tmp_path / paper / "quick" / f"{module}.provenance.json").read_text()

    first = regenerated("a" * 40)
    outputs = json.loads(first)["outputs"]
    assert sorted(outputs) == sorted([f"{module}.csv", f"{module}.md", *figures])
    assert regenerated("b" * 40) == first


def test_every_committed_benchmark_report_names_the_command_its_provenance_records():
    """The command a benchmark's report names, to run it again, is the one its provenance recorded, flags and all."""
    root = pathlib.Path(provenance.__file__).resolve().parents[1]
    checked = 0
    for record in sorted(root.glob("results/**/benchmarks/*.provenance.json")):
        report = record.with_name(record.name.removesuffix(".provenance.json") + ".md")
        command = json.loads(record.read_text())["command"]
        module = command.split()[2]  # "python -m MODULE ..."
        text = report.read_text() if report.exists() else ""
        named = re.findall(rf"`(python -m {re.escape(module)}(?: [^`]*)?)`", text)
        assert all(n == command for n in named), f"{report.name} names {named}, its provenance {command!r}"
        checked += bool(named)
    assert checked >= 8  # The benchmarks' reports (PER's six, IMPALA's two, LASER's): none found would check nothing.


@functools.cache  # A run directory's summaries are read once, not once per record beside them.
def _json(path: pathlib.Path) -> object:
    return json.loads(path.read_text())


def _undescribed(results: pathlib.Path) -> list[str]:
    """Files under `results` that no provenance record describes. A record describes:
    - every file in its run directory and below (`provenance.json`, a training run's);
    - `STEM.*` and the companions `STEM_*` beside `STEM.provenance.json` (`minatar_curves.csv`, `agent_runs.csv`,
      `cliffwalk_fig1.png`), the files its `outputs` name, and a JSON file beside it that holds its `config` (a
      suite's `suite.json`).
    A README documents and `published/` holds the papers' numbers, each with its source in its README."""
    records = sorted(results.rglob("*provenance.json"))
    run_dirs = {record.parent for record in records if record.name == "provenance.json"}
    described = set(records)
    for record in records:
        if record.name == "provenance.json":
            continue
        stem = record.name.removesuffix(".provenance.json")
        described |= {p for p in record.parent.iterdir() if p.name.startswith((f"{stem}.", f"{stem}_"))}
        fields = _json(record)
        described |= {record.parent / name for name in fields.get("outputs", {})}
        if "config" in fields:
            described |= {p for p in record.parent.glob("*.json") if _json(p) == fields["config"]}
    return [
        str(path.relative_to(results))
        for path in sorted(results.rglob("*"))
        if path.is_file()
        and path not in described
        and path.name != "README.md"
        and "published" not in path.relative_to(results).parts
        and not run_dirs & set(path.parents)
    ]


def test_every_committed_result_file_is_described_by_a_provenance_record(tmp_path):
    """results/ holds only measured numbers with their provenance: a file no record describes has none."""
    root = pathlib.Path(provenance.__file__).resolve().parents[1]
    assert _undescribed(root / "results") == []
    (tmp_path / "study.provenance.json").write_text(json.dumps({"config": {"a": 1}, "outputs": {"extra.png": "0"}}))
    for name in ("study.csv", "study_curves.csv", "extra.png", "other.csv", "README.md"):
        (tmp_path / name).write_text("")
    (tmp_path / "suite.json").write_text('{"a": 1}')
    (tmp_path / "other.json").write_text('{"a": 2}')
    (tmp_path / "run" / "sub").mkdir(parents=True)
    (tmp_path / "run" / "provenance.json").write_text("{}")
    (tmp_path / "run" / "sub" / "curve.csv").write_text("")
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "curve.csv").write_text("")
    assert _undescribed(tmp_path) == ["loose/curve.csv", "other.csv", "other.json"]
