"""IMPALA's study drivers (`reproduce.impala.atari`, `reproduce.impala.minatar`): their tables from their runs.

Each `main` runs in a subprocess against a repository root in a temporary directory, its training and
evaluation stubbed: nothing trains.
"""

import csv
import json
import shutil
import sys

import pytest

from common import scores
from common.errors import UsageError
from reproduce import _runs
from tests.test_cli import AGAINST_ROOT, REPO, _files, assert_one_line_usage_error, run

# Training writes a finished run's files; evaluation prints its seed.
ATARI = (
    AGAINST_ROOT
    + """
from reproduce.impala import atari
def train(module, run_dir, flags, fresh=False):
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = ["frames,episode_return"] + [f"{1000 * (k + 1)},{k % 3}" for k in range(150)]
    (run_dir / "episodes.csv").write_text("\\n".join(lines) + "\\n")
    (run_dir / "config.json").write_text(json.dumps({"flags": flags}))
    return {"frames": 150_000, "wall_time_s": 1.0}
def evaluate(module, run_dir, episodes, seed):
    print(f"evaluates {run_dir.name} with seed {seed}", flush=True)
    return {"episodes": episodes, "mean_return": 3.0, "human_normalized": 0.1}
atari._runs.train, atari._runs.evaluate = train, evaluate
cli.run(atari.main)
"""
)

# Training writes a finished run whose 150 episodes return argv[2] each after 50 of return 0, and its
# provenance with uncommitted edits.
MINATAR = (
    AGAINST_ROOT
    + """
score = float(sys.argv.pop(1))
from reproduce.impala import minatar
def train(module, run_dir, flags, fresh=False):
    run_dir.mkdir(parents=True, exist_ok=True)
    returns = [0.0] * 50 + [score] * 100
    lines = ["frames,episode_return"] + [f"{500 * (k + 1)},{r}" for k, r in enumerate(returns)]
    (run_dir / "episodes.csv").write_text("\\n".join(lines) + "\\n")
    (run_dir / "config.json").write_text(json.dumps({"flags": flags}))
    (run_dir / "provenance.json").write_text(json.dumps({"commit": "0123456789abcdef", "dirty": True}))
    return {"frames": 100_000, "wall_time_s": 1.0}
minatar._runs.train = train
cli.run(minatar.main)
"""
)


def _root_with(tmp_path_factory, published: str):
    root = tmp_path_factory.mktemp("root")
    (root / "results" / "published").mkdir(parents=True)
    shutil.copy(REPO / "results" / "published" / published, root / "results" / "published")
    return root


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def atari_study(tmp_path_factory):
    root = _root_with(tmp_path_factory, "impala_table_c1.csv")
    result = run(sys.executable, "-c", ATARI, str(root), "--profile=quick", "--games=pong", "--seed=4")
    assert result.returncode == 0, result.stderr
    return result.stdout, _rows(root / "results" / "impala" / "quick" / "atari.csv")


def test_atari_evaluation_seed_differs_from_the_training_seed(atari_study):
    """Reusing it would repeat training's no-op starts."""
    stdout, _ = atari_study
    assert "evaluates pong with seed 5" in stdout


def test_atari_paper_column_is_table_c1s_shallow_experts_normalised_with_no_op_starts(atari_study):
    """Beside our shallow no-op run: not the deep experts' column, nor human starts' reference scores."""
    _, (row,) = atari_study
    assert float(row["impala_shallow_200M"]) == 20.40  # Table C.1, Pong, shallow (deep: 20.98).
    expected = scores.normalized("pong", 20.40, "atari_noop")
    assert float(row["impala_shallow_200M_normalized"]) == pytest.approx(expected, abs=1e-4)


@pytest.fixture(scope="module")
def minatar_study(tmp_path_factory):
    root, score = _root_with(tmp_path_factory, "minatar_young2019_5M.csv"), 17.3  # Breakout: AC(λ) 17.3, DQN 10.3.
    result = run(sys.executable, "-c", MINATAR, str(root), str(score), "--profile=quick", "--games=breakout")
    assert result.returncode == 0, result.stderr
    out = root / "results" / "impala" / "quick"
    (row,) = _rows(out / "minatar.csv")
    return row, (out / "minatar.md").read_text()


def test_minatar_row_is_the_last_100_episodes_beside_young_and_tians_numbers(minatar_study):
    """Not ours over every episode, nor the DQN column filled with AC(λ)'s number."""
    row, _ = minatar_study
    assert float(row["impala_last100"]) == 17.3
    assert (float(row["ac_lambda_0.8"]), float(row["dqn"])) == (17.3, 10.3)


def test_minatar_score_equal_to_ac_lambda_counts_as_at_or_above_it(minatar_study):
    row, text = minatar_study
    assert row["at_or_above_ac"] == "True"
    assert "At or above AC(λ=0.8) on 1 of 1 games." in text


def test_minatar_code_list_says_when_a_run_trained_with_uncommitted_edits(minatar_study):
    _, text = minatar_study
    assert "- breakout: commit 01234567 (uncommitted edits)" in text


def test_a_study_is_not_replaced_by_a_command_asking_for_less_or_other_runs(tmp_path_factory):
    """A trial: `--profile full --games breakout` replaced the committed 5-game table with a 1-game one, and
    `--seed 1` or another `--frames` replaced its runs, without a word. Its tables hold only one command's runs."""
    root = _root_with(tmp_path_factory, "minatar_young2019_5M.csv")
    first = run(sys.executable, "-c", MINATAR, str(root), "5", "--profile=quick", "--games=breakout,asterix")
    assert first.returncode == 0, first.stderr
    out = root / "results" / "impala" / "quick"
    before = _files(out)
    cases = {
        "--games=breakout": "minatar.* hold asterix, which --games=breakout leaves out",
        "--seed=1": "minatar.* hold seed 0, not --seed=1",
    }
    for flag, fragment in cases.items():
        args = [flag, "--games=breakout,asterix"] if flag.startswith("--seed") else [flag]
        result = run(sys.executable, "-c", MINATAR, str(root), "5", "--profile=quick", *args)
        assert_one_line_usage_error(result, fragment, "move")
        assert _files(out) == before
    more = run(sys.executable, "-c", MINATAR, str(root), "5", "--profile=quick", "--games=breakout,asterix,freeway")
    assert more.returncode == 0, more.stderr
    assert [r["game"] for r in _rows(out / "minatar.csv")] == ["breakout", "asterix", "freeway"]


def test_an_atari_study_is_not_replaced_by_another_budget_or_evaluation(tmp_path_factory):
    root = _root_with(tmp_path_factory, "impala_table_c1.csv")
    first = run(sys.executable, "-c", ATARI, str(root), "--profile=quick", "--games=pong")
    assert first.returncode == 0, first.stderr
    out = root / "results" / "impala" / "quick"
    before = _files(out)
    for flag, fragment in (("--frames=1000", "150,000 frames a game, not 1,000"), ("--eval_episodes=3", "2 eval")):
        result = run(sys.executable, "-c", ATARI, str(root), "--profile=quick", "--games=pong", flag)
        assert_one_line_usage_error(result, f"atari.* hold {fragment}")
        assert _files(out) == before


def test_a_study_of_one_evaluation_episode_says_episode(tmp_path):
    (tmp_path / "atari.provenance.json").write_text(json.dumps({"config": {"pong": {}}, "eval_episodes": 1}))
    with pytest.raises(UsageError, match=r"atari\.\* hold 1 evaluation episode, not 3: "):
        _runs.check_keeps_study(tmp_path, "atari", ["pong"], 0, 1000, eval_episodes=3)
