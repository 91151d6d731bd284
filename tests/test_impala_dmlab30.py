"""Multi-task IMPALA on DMLab-30 (IMPALA §5.3), against the fake `deepmind_lab` (tests/fakes).

One agent trains on all 30 levels, each env of each actor playing one level
round-robin; episodes are logged with their level; evaluation plays every
level as scored (`rooms_*_train` as `rooms_*_test`, App. B) and reports the
median human-normalised score over the 30 levels (Table 4's statistic).
"""

import csv
import json
import pathlib
import statistics
import subprocess
import sys

import numpy as np
import pytest

from common import envs, evaluation
from common.envs import dmlab
from common.errors import UsageError
from impala import trajectories
from impala.config import PRESETS, ImpalaConfig
from laser.config import LaserConfig
from per.config import PerConfig

REPO = pathlib.Path(__file__).resolve().parent.parent
SUITE = "dmlab:dmlab30"
TINY = ("width", 8), ("height", 6)  # Fake frames small enough for the toy MLP.


def fake_return(fake_lab, level: str) -> float:
    """The fake's return of one episode of `level`: `reward(level)` for each of its agent steps."""
    return fake_lab.reward(f"contributed/dmlab30/{level}") * fake_lab.EPISODE_FRAMES / 4  # Action repeat 4.


def human_table() -> dict[str, tuple[float, float]]:
    """common/data/dmlab30.csv read directly: {level: (random, human)} (IMPALA App. B)."""
    with open(REPO / "common" / "data" / "dmlab30.csv", newline="") as f:
        return {row["level"]: (float(row["random"]), float(row["human"])) for row in csv.DictReader(f)}


def test_preset_trains_all_30_levels_with_the_releases_multi_task_values():
    config = PRESETS["dmlab30"]
    assert envs.tasks(config.env) == dmlab.DMLAB30 and config.num_actors * config.envs_per_actor == 30
    # scalable_agent README, "Distributed Training on DMLab-30" (App. D's ranges: test_impala_presets).
    assert config.entropy_cost == 0.0033391318945337044 and config.learning_rate == 0.00031866995608948655
    assert config.total_frames == 10_000_000_000


def test_round_robin_gives_every_level_one_env_of_the_preset():
    config = PRESETS["dmlab30"]
    assigned = [
        i
        for actor in range(config.num_actors)
        for i in envs.task_indices(config.env, config.envs_per_actor, actor * config.envs_per_actor)
    ]
    assert sorted(assigned) == list(range(30))
    assert envs.task_indices(SUITE, 4, first_env=28) == [28, 29, 0, 1]  # Env g plays level g mod 30.


def test_each_env_of_an_actors_batch_plays_its_level(fake_lab):
    batch = envs.make_batched(SUITE, 15, seed=0, first_env=15, **dict(TINY))
    assert [lab.level for lab in fake_lab.Lab.created] == [f"contributed/dmlab30/{n}" for n in dmlab.DMLAB30[15:]]
    batch.reset()
    _, reward, *_ = batch.step(np.zeros(15, int))
    assert list(reward) == [fake_lab.reward(lab.level) for lab in fake_lab.Lab.created]


def test_a_suite_needs_an_env_per_level():
    with pytest.raises(UsageError, match="30 levels but num_actors x envs_per_actor = 2 x 4"):
        ImpalaConfig(env=SUITE, num_actors=2, envs_per_actor=4)


@pytest.mark.parametrize("config_class", [PerConfig, LaserConfig])
def test_other_agents_refuse_the_suite(config_class):
    with pytest.raises(UsageError, match="multi-task suite .* only IMPALA trains on one"):
        config_class(env=SUITE)


@pytest.mark.parametrize(
    "command, message",
    [
        (["per.train", f"--env={SUITE}"], "only IMPALA trains on one"),
        (["impala.train", "--preset=dmlab30", "--env=dmlab:dmlab31"], "unknown dmlab name 'dmlab31'"),
    ],
)
def test_bad_suite_input_is_one_line_and_exit_2(command, message, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", *command, f"--run_dir={tmp_path / 'run'}"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_finished_episodes_carry_their_level():
    batch = {  # Two unrolls of T + 1 = 3 steps; step T is the next unroll's step 0 and is skipped.
        "episode_return": np.array([[np.nan, 2.0, 9.0], [5.0, np.nan, np.nan]], np.float32),
        "episode_length": np.array([[0, 3, 4], [7, 0, 0]], np.int32),
        "task": np.array([[4, 4, 4], [29, 29, 29]], np.int32),
    }
    assert trajectories.finished_episodes(batch, dmlab.DMLAB30) == [
        (2.0, 3, dmlab.DMLAB30[4]), (5.0, 7, dmlab.DMLAB30[29])
    ]  # fmt: skip
    assert trajectories.finished_episodes(batch) == [(2.0, 3), (5.0, 7)]  # A single-task run's.


def test_train_levels_are_played_and_scored_as_test_levels(fake_lab):
    assert envs.scored("dmlab:rooms_exploit_deferred_effects_train") == "dmlab:rooms_exploit_deferred_effects_test"
    assert envs.scored("dmlab:rooms_watermaze") == "dmlab:rooms_watermaze"
    config = ImpalaConfig(env=SUITE, num_actors=2, envs_per_actor=15, env_options=TINY)
    evaluation.evaluation_env(config, seed=0, task="rooms_collect_good_objects_train")
    assert fake_lab.Lab.created[-1].level == "contributed/dmlab30/rooms_collect_good_objects_test"


def test_suite_score_is_the_median_over_levels_of_the_app_b_table():
    config = ImpalaConfig(env=SUITE, num_actors=2, envs_per_actor=15)
    returns = {level: [float(i), float(3 * i)] for i, level in enumerate(dmlab.DMLAB30)}
    result = evaluation.suite_result(config, returns)
    table = human_table()
    by_hand = {}
    for i, level in enumerate(dmlab.DMLAB30):
        scored = level.replace("_train", "_test")
        random, human = table[scored]
        by_hand[scored] = (2.0 * i - random) / abs(human - random)  # Mean return 2i.
    assert result["levels"].keys() == by_hand.keys() and len(by_hand) == 30
    for level, score in by_hand.items():
        assert result["levels"][level]["human_normalized"] == pytest.approx(score)
    assert result["human_normalized_median"] == pytest.approx(statistics.median(by_hand.values()))
    capped = [min(score, 1.0) for score in by_hand.values()]
    assert result["human_normalized_mean_capped"] == pytest.approx(sum(capped) / 30)
    assert result["levels"]["rooms_collect_good_objects_test"]["trained_as"] == "rooms_collect_good_objects_train"


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_train_then_evaluate_on_all_30_levels(fake_lab, tmp_path):
    run = tmp_path / "run"
    small = {"network": "toy", "lstm_size": 8, "unroll_length": 3, "batch_size": 8, "queue_size": 32}
    trained = run_module(
        "impala.train", "--preset=dmlab30", "--frames=2400", f"--run_dir={run}",
        *(f"--env_option={k}={v}" for k, v in TINY), *(f"--config_override={k}={v}" for k, v in small.items()),
        "--config_override=log_every_s=1",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    with open(run / "episodes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # Every level was trained, and each episode's return is its own level's.
    assert {row["task"] for row in rows} == set(dmlab.DMLAB30)
    assert all(float(row["episode_return"]) == fake_return(fake_lab, row["task"]) for row in rows)
    tasks = json.loads((run / "final.json").read_text())["tasks"]
    assert tasks == json.loads((run / "tasks.json").read_text()) and tasks.keys() == set(dmlab.DMLAB30)
    assert sum(task["episodes"] for task in tasks.values()) == len(rows)
    level = "rooms_watermaze"
    assert tasks[level]["mean_return"] == pytest.approx(fake_return(fake_lab, level))

    evaluated = run_module("impala.evaluate", str(run), "--episodes=2")
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    (path,) = run.glob("eval_step*.json")
    result = json.loads(path.read_text())
    assert result["env"] == SUITE and result["episodes"] == 2 and len(result["levels"]) == 30
    test_level = result["levels"]["rooms_collect_good_objects_test"]
    assert test_level["mean_return"] == fake_return(fake_lab, "rooms_collect_good_objects_test")
    assert test_level["mean_return"] != fake_return(fake_lab, "rooms_collect_good_objects_train")
    assert "rooms_collect_good_objects_test" in evaluated.stdout and "median" in evaluated.stdout
