"""The run directory's contract, through the CLI as a user meets it.

Each test asserts the exit status, the one-line message and that what the user
had is unchanged. One short toy run is trained once per module and copied.
"""

import json
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
import reverb
import tensorflow as tf
import usage_cases

from common import envs
from common import run_dir as run_dir_lib
from common.errors import UsageError
from common.reverb import server as reverb_server
from impala.config import PRESETS

REPO = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "impala.train"]
PER_TRAIN = [sys.executable, "-m", "per.train"]
FRAMES = 10_000


def run(*args, module=TRAIN, timeout=300):
    return subprocess.run([*module, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("runs") / "toy"
    result = run("--preset=toy", f"--frames={FRAMES}", f"--run_dir={directory}", "--config_override=log_every_s=1")
    assert result.returncode == 0, result.stdout + result.stderr
    return directory, result


@pytest.fixture
def copied_run(finished_run, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(finished_run[0], target)
    return target


@pytest.mark.slow
def test_progress_lines_are_clean(finished_run):
    _, result = finished_run
    lines = [line for line in result.stdout.splitlines() if line.startswith("frames ")]
    assert lines and "ETA ?" in lines[0] and all("nan" not in line for line in lines)
    assert all("ETA ?" not in line for line in lines[1:])
    for noise in ("owned by the same process", "SetPriority unimplemented"):
        assert noise not in result.stdout + result.stderr


def test_tensorboard_has_the_progress_lines_rates(finished_run):
    directory, result = finished_run
    lines = [line for line in result.stdout.splitlines() if line.startswith("frames ")]
    points = {}
    for path in (directory / "tb").glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                points.setdefault(value.tag, []).append(event.step)
    last_frames = int(lines[-1].split()[1].split("/")[0].replace(",", ""))
    for tag in ("progress/frames_per_s", "progress/learner_steps_per_s"):
        assert len(points[tag]) == len(lines) - 1 and max(points[tag]) == last_frames  # Every line's but the first.


CHANGED_EXPERIMENTS = [
    (["--env=minatar:breakout"], "env"),
    (["--config_override=learning_rate=0.1"], "learning_rate"),
    (["--preset=minatar"], "--preset=minatar's network"),  # Its maths; a preset's env is a start's.
    (["--seed=4"], "seed"),
]
OWN_PROCESS = {("--env=minatar:breakout",)}  # As a user runs it; the others share one process.


@pytest.fixture(scope="module")
def resumed_in_one_process(finished_run, tmp_path_factory):
    """The CHANGED_EXPERIMENTS not in OWN_PROCESS, each resuming a copy of the finished run, through
    `impala.train`'s own `cli.run(main)` in one process (`usage_cases`): (outcome, copy) by case."""
    cases = [tuple(args) for args, _ in CHANGED_EXPERIMENTS if tuple(args) not in OWN_PROCESS]
    return usage_cases.run_cases(
        "impala.train", [("--resume", *case) for case in cases], tmp_path_factory.mktemp("resumes"),
        prepare=lambda run_dir: shutil.copytree(finished_run[0], run_dir),
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("args, field", CHANGED_EXPERIMENTS)
def test_resume_refuses_flags_that_change_the_experiment(finished_run, resumed_in_one_process, tmp_path, args, field):
    """A one-line refusal that changes nothing; OWN_PROCESS runs `python -m impala.train`, the others run
    through the same `cli.run(main)` in one shared process, sparing a TensorFlow import per case."""
    if tuple(args) in OWN_PROCESS:
        copied_run = tmp_path / "run"
        shutil.copytree(finished_run[0], copied_run)
        result = run(f"--run_dir={copied_run}", "--resume", *args)
    else:
        result, copied_run = resumed_in_one_process[("--resume", *args)]
    # The flags that change them (a run also takes them as --config_override; a sweep does not).
    changeable = (
        "may change only total_frames (--frames or --config_override), num_actors (--actors or --config_override)"
    )
    usage_cases.assert_one_line_error(result, f"{field} would change", changeable)
    assert usage_cases.snapshot(copied_run) == usage_cases.snapshot(finished_run[0])


def checkpoint_value(run_dir: pathlib.Path, name: str):
    reader = tf.train.load_checkpoint(str(run_dir / "checkpoints"))
    return reader.get_tensor(f"learner/{name}/.ATTRIBUTES/VARIABLE_VALUE")


@pytest.mark.slow
def test_resume_with_a_larger_budget_continues_the_schedule_and_keeps_every_segment(tmp_path):
    run_dir = tmp_path / "run"
    budget = 1_000_000
    process = subprocess.Popen(
        [*TRAIN, f"--run_dir={run_dir}", f"--frames={budget}"], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    for line in process.stdout:  # Interrupt mid-budget, once learning is under way.
        if line.startswith("frames ") and "steps/s" in line:
            process.send_signal(signal.SIGINT)
            break
    process.communicate(timeout=120)
    assert process.returncode == 130
    config_before = (run_dir / "config.json").read_bytes()
    episodes_before = (run_dir / "episodes.csv").read_text().splitlines()
    frames = int(checkpoint_value(run_dir, "frames"))
    assert 0 < frames < budget and not (run_dir / "final.json").exists()
    # A budget below the frames trained is refused, not taken for a finished run.
    before = usage_cases.snapshot(run_dir)
    refused = run(f"--run_dir={run_dir}", "--resume", f"--frames={frames - 1}")
    usage_cases.assert_one_line_error(refused, f"--frames={frames - 1}: the run has trained {frames:,} frames already")
    assert usage_cases.snapshot(run_dir) == before
    result = run(f"--run_dir={run_dir}", "--resume", f"--frames={frames + 5000}")
    assert result.returncode == 0, result.stdout + result.stderr
    # Below the first budget: said, since config.json, which keeps that budget, no longer tells.
    assert f"--frames shortens the run's budget from {budget:,} to {frames + 5000:,} frames" in result.stdout
    assert f"config.json keeps the first start's {budget:,}" in result.stdout
    assert (run_dir / "config.json").read_bytes() == config_before  # Never rewritten.
    episodes = (run_dir / "episodes.csv").read_text().splitlines()
    assert episodes[: len(episodes_before)] == episodes_before and episodes.count(episodes[0]) == 1
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= frames + 5000 and final["segments"] == 2
    segments = json.loads((run_dir / "provenance.json").read_text())["segments"]
    assert [s["total_frames"] for s in segments] == [budget, frames + 5000]
    assert "--resume" in segments[1]["command"] and "--resume" not in segments[0]["command"]
    assert all(len(s["commit"]) == 40 for s in segments)
    # Each sitting's load: whether the run had the machine's cores to itself.
    assert all(0 <= s["load_1min_at_start"] <= s["load_1min_max"] for s in segments)
    assert final["wall_time_s"] == pytest.approx(sum(s["wall_time_s"] for s in segments), abs=1.0)
    # The learning rate went on from its value at the resume, to reach 0 at the new budget.
    learning_rate = json.loads(config_before)["learning_rate"]
    assert checkpoint_value(run_dir, "learning_rate_schedule/begin") == frames
    assert checkpoint_value(run_dir, "learning_rate_schedule/end") == frames + 5000
    expected = learning_rate * (1 - frames / budget)
    assert checkpoint_value(run_dir, "learning_rate_schedule/begin_value") == pytest.approx(expected, rel=1e-9)
    # Resumed again without --frames: the raised budget holds, so there is nothing left to train.
    again = run(f"--run_dir={run_dir}", "--resume")
    assert again.returncode == 0 and json.loads((run_dir / "final.json").read_text())["frames"] == final["frames"]


@pytest.mark.slow
def test_extending_a_finished_run_says_its_learning_rate_stays_at_zero(copied_run):
    result = run(f"--run_dir={copied_run}", "--resume", f"--frames={FRAMES + 3000}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "learning rate had annealed to 0" in result.stdout
    assert f"--frames extends the run's budget from {FRAMES:,} to {FRAMES + 3000:,} frames" in result.stdout


@pytest.mark.slow
def test_overwrite_starts_afresh(copied_run):
    result = run(f"--run_dir={copied_run}", "--overwrite", "--seed=3", "--frames=3000")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((copied_run / "config.json").read_text())["seed"] == 3
    assert json.loads((copied_run / "final.json").read_text())["segments"] == 1


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--preset=atari_shallow", "--env=minatar:breakout"], "network 'shallow' does not fit minatar:breakout"),
        (["--env=dmlab:rooms_watermaze"], "deepmind_lab"),
        (["--role=learner", "--replay_address=localhost:1", "--connect_timeout_s=1"], "no Reverb server answered"),
    ],
)
def test_a_failed_start_leaves_nothing_behind(tmp_path, args, fragment):
    result = run(f"--run_dir={tmp_path / 'run'}", *args)
    usage_cases.assert_one_line_error(result, fragment)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_corrupted_config_json_is_one_line_everywhere(copied_run):
    saved = json.loads((copied_run / "config.json").read_text())
    (copied_run / "config.json").write_text('{"env": "toy:catch", "colour": 1}')
    before = usage_cases.snapshot(copied_run)
    usage_cases.assert_one_line_error(run(f"--run_dir={copied_run}", "--resume"), "unknown config fields colour")
    usage_cases.assert_one_line_error(run(f"--config={copied_run / 'config.json'}", "--role=actor",
                              "--replay_address=localhost:1"), "unknown config fields colour")  # fmt: skip
    evaluate = [sys.executable, "-m", "impala.evaluate"]
    usage_cases.assert_one_line_error(run(str(copied_run), module=evaluate), "unknown config fields colour")
    (copied_run / "config.json").write_text("{not json")
    usage_cases.assert_one_line_error(run(str(copied_run), module=evaluate), "is not valid JSON")
    # A field missing: the resume ran at the field's default and recorded it (a new user's trial).
    lacking = {k: v for k, v in saved.items() if k != "learning_rate"}
    (copied_run / "config.json").write_text(json.dumps(lacking))
    usage_cases.assert_one_line_error(run(f"--run_dir={copied_run}", "--resume"), "lacks config field(s) learning_rate")
    # A value the config refuses: its line named no file and read as a flag's (a new user's trial).
    config = copied_run / "config.json"
    config.write_text(json.dumps({**saved, "unroll_length": -5}))
    refusal = f"{config}: unroll_length=-5: must be >= 1"
    usage_cases.assert_one_line_error(run(f"--run_dir={copied_run}", "--resume"), refusal)
    usage_cases.assert_one_line_error(run(str(copied_run), module=evaluate), refusal)
    (copied_run / "config.json").write_text("{}")
    usage_cases.assert_one_line_error(run(str(copied_run), module=evaluate), "lacks config field(s) env, env_options")
    assert usage_cases.snapshot(copied_run) == {**before, "config.json": b"{}"}


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["data_truncated", "index_emptied", "other_shapes"])
def test_a_damaged_checkpoint_is_one_line_and_keeps_the_run(copied_run, damage):
    """Each was a traceback and exit 1 (a new user's trial); nothing in the run may change. A checkpoint of other
    shapes then printed the unrestored variables' warnings after the error (a review)."""
    latest = sorted(copied_run.glob("checkpoints/ckpt-*.index"), key=lambda p: int(p.stem[5:]))[-1]
    if damage == "data_truncated":
        data = next(latest.parent.glob(f"{latest.stem}.data-*"))
        data.write_bytes(data.read_bytes()[:100])
    elif damage == "index_emptied":
        latest.write_bytes(b"")
    else:  # The checkpoints of a run without an LSTM, under a config with one.
        config = json.loads((copied_run / "config.json").read_text())
        (copied_run / "config.json").write_text(json.dumps({**config, "use_lstm": True}))
    before = usage_cases.snapshot(copied_run)
    fragment = f"checkpoint {latest.with_suffix('')} cannot be restored ("
    usage_cases.assert_one_line_error(run(f"--run_dir={copied_run}", "--resume", f"--frames={4 * FRAMES}"), fragment)
    evaluate = [sys.executable, "-m", "impala.evaluate"]
    usage_cases.assert_one_line_error(run(str(copied_run), "--episodes=2", module=evaluate), fragment)
    assert usage_cases.snapshot(copied_run) == before
    remedy = "do not fit this config's network" if damage == "other_shapes" else "damaged; to go on from an earlier"
    usage_cases.assert_one_line_error(run(str(copied_run), "--episodes=2", module=evaluate), remedy)


@pytest.mark.slow
def test_another_agents_commands_refuse_the_run_by_name_and_keep_it(finished_run, tmp_path):
    """An IMPALA run given to PER's and LASER's commands: one line naming the run's own command, and nothing lost.

    Without the check, the resume and the evaluations listed the run's config fields as unknown, and
    PER's --overwrite deleted the IMPALA run.
    """
    run = finished_run[0]
    trained = usage_cases.run_cases(
        "per.train", [("--resume",), ("--overwrite", "--preset=toy")], tmp_path / "train",
        prepare=lambda run_dir: shutil.copytree(run, run_dir),
    )  # fmt: skip
    resumed, resumed_dir = trained[("--resume",)]
    usage_cases.assert_one_line_error(
        resumed, f"{resumed_dir} is a run of impala.train, not of per.train; continue it with python -m impala.train"
    )
    overwritten, overwritten_dir = trained[("--overwrite", "--preset=toy")]
    usage_cases.assert_one_line_error(overwritten, "--overwrite replaces only a run of per.train: choose another")
    for module, fragment in [("per.evaluate", "not of per.train"), ("laser.evaluate", "not of laser.train")]:
        evaluated = usage_cases.run_cases(module, [(str(run),)], tmp_path / module, run_dir_flag=False)
        usage_cases.assert_one_line_error(
            evaluated[(str(run),)][0], f"{run} is a run of impala.train, {fragment}; evaluate it with python -m impala"
        )
    for copy in (resumed_dir, overwritten_dir):
        assert usage_cases.snapshot(copy) == usage_cases.snapshot(run)


def test_a_busy_port_is_one_line(tmp_path):
    holder = reverb_server.make_server([reverb.Table.queue("q", 1)])  # gRPC would silently share this port.
    usage_cases.assert_one_line_error(run(f"--port={holder.port}", f"--run_dir={tmp_path / 'a'}"), "is already in use")
    holder.stop()
    with socket.socket() as other:
        other.bind(("0.0.0.0", 0))
        other.listen()
        port = other.getsockname()[1]
        usage_cases.assert_one_line_error(run(f"--port={port}", "--role=server"), f"--port={port} is already in use")
    assert not (tmp_path / "a").exists()


def test_a_busy_port_with_overwrite_keeps_the_run(tmp_path):
    """PER, whose server starts in the run directory, deleted the run it was to overwrite, then found its --port
    busy (seen). The port is checked first, and a start that fails puts the old run back (`run_dir.starting`)."""
    old_run = tmp_path / "run"
    old_run.mkdir()
    (old_run / "config.json").write_text("{}")
    (old_run / "episodes.csv").write_text("the old run's")
    before = usage_cases.snapshot(old_run)
    with socket.socket() as other:
        other.bind(("0.0.0.0", 0))
        other.listen()
        port = other.getsockname()[1]
        result = run("--preset=toy", f"--run_dir={old_run}", "--overwrite", f"--port={port}", module=PER_TRAIN)
    usage_cases.assert_one_line_error(result, f"--port={port} is already in use")
    assert usage_cases.snapshot(old_run) == before


@pytest.mark.slow
def test_resuming_a_run_without_its_checkpoints_is_refused(copied_run):
    """It trained from frame 0, on the old replay where PER keeps one, and dropped the episode log (seen)."""
    shutil.rmtree(copied_run / "checkpoints")
    before = usage_cases.snapshot(copied_run)
    result = run(f"--run_dir={copied_run}", "--resume")
    usage_cases.assert_one_line_error(result, "frames and holds no checkpoint to continue from", "pass --overwrite")
    assert usage_cases.snapshot(copied_run) == before


@pytest.mark.slow
def test_resuming_a_run_without_its_record_of_starts_is_refused(copied_run):
    """Without provenance.json the resume was taken for the first start: the first start's seed again, and the
    earlier starts' wall time dropped from final.json (a new user's trial)."""
    (copied_run / "provenance.json").unlink()
    before = usage_cases.snapshot(copied_run)
    result = run(f"--run_dir={copied_run}", "--resume", f"--frames={2 * FRAMES}")
    usage_cases.assert_one_line_error(result, "holds checkpoints but no provenance.json", "pass --overwrite")
    assert usage_cases.snapshot(copied_run) == before


@pytest.mark.slow
@pytest.mark.parametrize("state", [None, "junk\n"], ids=["missing", "damaged"])
def test_resuming_a_run_whose_checkpoint_state_file_is_lost_is_refused(copied_run, state):
    """TensorFlow finds the latest checkpoint through checkpoints/checkpoint: without it the run trained again
    from frame 0 and cut episodes.csv to the new start, its ckpt files still there (seen)."""
    path = copied_run / "checkpoints" / "checkpoint"
    path.unlink()
    if state is not None:
        path.write_text(state)
    before = usage_cases.snapshot(copied_run)
    result = run(f"--run_dir={copied_run}", "--resume", f"--frames={2 * FRAMES}")
    usage_cases.assert_one_line_error(result, "holds no checkpoint to continue from", "pass --overwrite")
    assert usage_cases.snapshot(copied_run) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, damage",
    [
        ("final.json", b"garbage"),
        ("provenance.json", b'{"segm'),
        ("provenance.json", b"[]"),
        ("config.json", b"\xff\xfe"),
    ],
    ids=["final", "provenance", "provenance_list", "config_bytes"],
)
def test_a_damaged_run_record_stops_a_resume_in_one_line(copied_run, name, damage):
    """Each was a traceback (the provenance one after TensorFlow and Reverb had started), not one line and 2 (seen)."""
    (copied_run / name).write_bytes(damage)
    before = usage_cases.snapshot(copied_run)
    usage_cases.assert_one_line_error(run(f"--run_dir={copied_run}", "--resume", f"--frames={2 * FRAMES}"), name)
    assert usage_cases.snapshot(copied_run) == before


@pytest.mark.slow
def test_resuming_a_finished_run_at_its_budget_changes_nothing(copied_run):
    """It started again: saved its checkpoint (PER: its replay too) and added a segment of 0 frames (seen)."""
    before = usage_cases.snapshot(copied_run)
    # Its budget given again, as --frames or as an override, is the same request (a trial: both were refused,
    # the first as below what it had trained, the second as disagreeing with a --frames nobody gave).
    for budget in ([], [f"--frames={FRAMES}"], [f"--config_override=total_frames={FRAMES}"]):
        result = run(f"--run_dir={copied_run}", "--resume", *budget)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"nothing to train: {copied_run} has trained" in result.stdout
        assert f"its budget was {FRAMES:,}; give a larger --frames" in result.stdout
        assert usage_cases.snapshot(copied_run) == before
    # Below what it trained, the override is refused as --frames is (it set a smaller budget: a review).
    result = run(f"--run_dir={copied_run}", "--resume", f"--config_override=total_frames={FRAMES // 2}")
    usage_cases.assert_one_line_error(result, f"total_frames={FRAMES // 2}: the run has trained")
    assert usage_cases.snapshot(copied_run) == before


def test_help_exits_0_and_lists_the_config_fields():
    result = run("--help")
    assert result.returncode == 0, result.stderr
    for text in ("--config_override", "learning_rate=0.0006", "unroll_length=20", "--resume", "--frames"):
        assert text in result.stdout
    assert ".;" not in result.stdout  # absl ends a repeatable flag's help with ";" (it read "log_every_s=10.0.;").


def test_evaluation_keeps_the_runs_env_options_but_the_protocols():
    trained = {"terminal_on_life_loss": True, "sticky_action_prob": 0.25, "noop_max": 0, "max_episode_frames": 100}
    assert envs.evaluation_options("atari:pong", trained) == {"sticky_action_prob": 0.25}
    assert envs.evaluation_options("minatar:breakout", {"sticky_action_prob": 0.0}) == {"sticky_action_prob": 0.0}


@pytest.mark.slow
def test_evaluating_a_run_whose_latest_checkpoint_lost_its_files_is_one_line(copied_run):
    """TensorFlow's own error line came first (a new user's trial): "Couldn't match files for checkpoint"."""
    state = (copied_run / "checkpoints" / "checkpoint").read_text()
    latest = re.search(r'^model_checkpoint_path: "(.*)"$', state, re.MULTILINE).group(1)
    for path in (copied_run / "checkpoints").glob(f"{latest}.*"):
        path.unlink()
    result = run(str(copied_run), module=[sys.executable, "-m", "impala.evaluate"])
    usage_cases.assert_one_line_error(result, f"{copied_run} has no checkpoint to evaluate")


@pytest.mark.slow
def test_evaluate_prints_progress_and_writes_its_result(copied_run):
    result = run(str(copied_run), "--episodes=20", "--log_every_s=0", module=[sys.executable, "-m", "impala.evaluate"])
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stdout.splitlines() if line.startswith("episodes ")]
    assert len(progress) == 20 and progress[-1].startswith("episodes 20/20 | mean return")
    # 16 envs: no episodes/s (nor ETA) until each has ended a game, whose first games end together.
    assert "ETA ?" in progress[0] and "ETA ?" not in progress[-1] and "ETA 0m00s" in progress[-1]
    assert f"written to {copied_run}/eval_step" in result.stdout
    saved = json.loads(next(copied_run.glob("eval_step*.json")).read_text())
    assert saved["episodes"] == 20 and np.isfinite(saved["mean_return"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert saved["provenance"]["commit"] == head and "impala.evaluate" in saved["provenance"]["command"]
    # Evaluated again: the earlier result is kept beside the new one, not overwritten.
    again = run(str(copied_run), "--episodes=2", module=[sys.executable, "-m", "impala.evaluate"])
    assert again.returncode == 0, again.stderr
    (kept,) = copied_run.glob("eval_step*.json.1")
    assert json.loads(kept.read_text()) == saved and f"kept as {kept}" in again.stdout
    assert json.loads(kept.with_suffix("").read_text())["episodes"] == 2


@pytest.mark.slow
def test_an_interrupted_evaluation_is_one_line_and_writes_nothing(copied_run):
    process = subprocess.Popen(
        [sys.executable, "-m", "impala.evaluate", str(copied_run), "--episodes=100000", "--log_every_s=0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for line in process.stdout:
        if line.startswith("episodes "):  # Under way.
            process.send_signal(signal.SIGINT)
            break
    _, stderr = process.communicate(timeout=120)
    assert (
        process.returncode == 130
        and stderr.strip() == "python -m impala.evaluate: interrupted; run the same command again"
    )
    assert not list(copied_run.glob("eval_step*"))


def recorded_run(run_dir: pathlib.Path, command: str, commits=("abc1234567890",)) -> pathlib.Path:
    """A run directory as a finished training run leaves it (its record, config and final.json)."""
    run_dir.mkdir()
    (run_dir / "final.json").write_text(json.dumps({"frames": 7}))
    (run_dir / "config.json").write_text("{}")
    segments = [
        {"commit": c, "dirty": False, "command": command + (" --resume" if i else "")} for i, c in enumerate(commits)
    ]
    (run_dir / "provenance.json").write_text(json.dumps({"commit": commits[-1], "segments": segments}))
    return run_dir


@pytest.fixture
def no_training(monkeypatch):
    import reproduce._runs  # noqa: F401  Before Popen is refused: importing it asks git for the commit.

    def refuse(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_reproduce_scripts_keep_finished_runs_and_say_which(tmp_path, no_training, capsys):
    from reproduce import _runs

    command = f"python -m impala.train --preset=toy --frames=7 --run_dir={tmp_path / 'done'}"
    finished = recorded_run(tmp_path / "done", command, commits=("abc1234567890", "def4567890123"))
    assert _runs.train("impala.train", finished, ["--frames=7", "--preset=toy"]) == {"frames": 7}
    out = capsys.readouterr().out
    assert f"reusing finished run {finished} (commit abc1234567 then def4567890, 7 frames)" in out


def test_reproduce_scripts_refuse_a_run_started_with_other_flags(tmp_path, no_training):
    from reproduce import _runs

    command = f"python -m impala.train --preset=toy --frames=7 --run_dir {tmp_path / 'done'}"
    finished = recorded_run(tmp_path / "done", command)
    with pytest.raises(UsageError, match=r"has --frames=7; this command asks --frames=9\); pass --fresh"):
        _runs.train("impala.train", finished, ["--preset=toy", "--frames=9"])
    assert (finished / "final.json").exists()


def test_a_run_stopped_short_of_its_budget_is_offered_its_own_budget_not_only_fresh(tmp_path, no_training):
    from reproduce import _runs

    command = f"python -m per.train --preset=p --frames=60 --run_dir {tmp_path / 'run'}"
    stopped = recorded_run(tmp_path / "run", command)  # final.json: 7 frames, an earlier segment's.
    # It once read "... to finish it, or un was trained past 50 frames": the stopped run had trained 7.
    finish = r"stopped short of its 60 frames: pass --frames=60 --extend to finish it, or pass --fresh to retrain it"
    with pytest.raises(UsageError, match=finish + r" \(the old run is moved aside\)$"):
        _runs.check_same_flags(stopped, ["--preset=p", "--frames=50"], extend=True)
    finished = recorded_run(tmp_path / "done", command.replace("60", "7"))
    with pytest.raises(UsageError, match=r"asks --frames=9\); pass --fresh"):  # A finished run: another job.
        _runs.check_same_flags(finished, ["--preset=p", "--frames=9"])


def test_fresh_moves_the_old_run_aside_and_trains_anew(tmp_path, monkeypatch):
    from reproduce import _runs

    finished = recorded_run(tmp_path / "done", "python -m impala.train --preset=toy")
    commands = []

    def train_now(command, run_dir, is_finished, *_):
        commands.append(command)
        run_dir.mkdir()
        (run_dir / "final.json").write_text(json.dumps({"frames": 9}))

    monkeypatch.setattr(_runs, "run_to_completion", train_now)
    assert _runs.train("impala.train", finished, ["--preset=toy", "--frames=9"], fresh=True) == {"frames": 9}
    (aside,) = tmp_path.glob("done.old-*")
    assert json.loads((aside / "final.json").read_text()) == {"frames": 7}  # Kept, not deleted.
    assert "--resume" not in commands[0] and "--frames=9" in commands[0]


def test_extend_trains_a_finished_run_on_to_a_larger_budget(tmp_path, monkeypatch):
    from reproduce import _runs

    command = f"python -m per.train --preset=p --frames=7 --run_dir={tmp_path / 'done'}"
    finished = recorded_run(tmp_path / "done", command)
    for extend, hint in ((None, r"asks --frames=9\); pass --fresh"), (False, r"pass --extend to train it on to 9 fr")):
        with pytest.raises(UsageError, match=hint):
            _runs.train("per.train", finished, ["--preset=p", "--frames=9"], extend=extend)
    with pytest.raises(UsageError, match=r"trained past 5 frames, and a run is never cut back to fewer; pass --fresh"):
        _runs.train("per.train", finished, ["--preset=p", "--frames=5"], extend=True)  # Another job.
    with pytest.raises(UsageError, match=r"trained with other flags.*pass --fresh"):  # So is another preset.
        _runs.train("per.train", finished, ["--preset=q", "--frames=9"], extend=True)
    commands = []

    def train_on(command, run_dir, is_finished, *_):
        commands.append(command)
        assert not is_finished()  # The shorter budget's final.json is not the end.
        (run_dir / "final.json").write_text(json.dumps({"frames": 9}))
        assert is_finished()

    monkeypatch.setattr(_runs, "run_to_completion", train_on)
    assert _runs.train("per.train", finished, ["--preset=p", "--frames=9"], extend=True) == {"frames": 9}
    assert "--resume" in commands[0] and "--frames=9" in commands[0]


def test_an_interrupted_extension_is_resumed_and_its_budget_is_the_last_segments(tmp_path, monkeypatch):
    from reproduce import _runs

    first = f"python -m per.train --preset=p --frames=7 --run_dir={tmp_path / 'run'}"
    run_dir = recorded_run(tmp_path / "run", first, commits=("abc1234567890", "def4567890123"))
    segments = json.loads((run_dir / "provenance.json").read_text())["segments"]
    segments[1]["command"] = first.replace("--frames=7", "--frames=9") + " --resume"
    (run_dir / "provenance.json").write_text(json.dumps({"segments": segments}))
    assert _runs.started_flags(run_dir) == ["--preset=p", "--frames=9"]
    assert _runs.budgets(json.loads((run_dir / "provenance.json").read_text())) == [7, 9]
    commands = []
    monkeypatch.setattr(_runs, "run_to_completion", lambda command, *_: commands.append(command))
    _runs.train("per.train", run_dir, ["--preset=p", "--frames=9"])  # Same flags now: no --extend needed.
    assert "--resume" in commands[0]  # final.json holds 7 frames of the 9: not finished.


def test_extend_replaces_a_smaller_budgets_summary_and_needs_the_run_here(tmp_path, capsys):
    from reproduce import _runs

    path = tmp_path / "job.json"
    command = "python -m per.train --preset=p --env=atari:pong --frames=7 --seed=0"
    path.write_text(json.dumps({"run_provenance": {"command": command}, "eval": {"episodes": 30}}))
    job = ["--preset=p", "--env=atari:pong", "--frames=9", "--seed=0"]
    with pytest.raises(UsageError, match=r"pass --extend to train it on to 9 frames, or --fresh"):
        _runs.summary_kept(path, False, job, eval_episodes=30, extend=False)
    # Its run is not in this checkout: --extend would be refused, so it is not what to pass.
    on = r"--fresh to retrain it \(the summary is replaced\); --extend would train it on to 9 frames from its last"
    elsewhere = " checkpoint, which was in the runs/ of the machine that trained it: pass --extend from the checkout"
    with pytest.raises(UsageError, match=on + elsewhere):
        _runs.summary_kept(path, False, job, eval_episodes=30, extend=False, run_dir=tmp_path / "job")
    assert not _runs.summary_kept(path, False, job, eval_episodes=30, extend=True)
    assert "job: summarised at 7 frames, extending to 9" in capsys.readouterr().out
    assert _runs.summary_kept(path, False, [*job[:2], "--frames=7", "--seed=0"], eval_episodes=30, extend=True)
    path.write_text(json.dumps({"run_provenance": {"command": f"{command} --run_dir /elsewhere/job"}}))
    with pytest.raises(UsageError, match=r"job holds no run to train on \(no config.json\): --extend resumes job "):
        _runs.check_resumable(tmp_path / "job", path)
    with pytest.raises(UsageError, match="its last checkpoint, which was in /elsewhere/job; run from the checkout"):
        _runs.check_resumable(tmp_path / "job", path)
    path.write_text(json.dumps({"run_provenance": {"command": f"{command} --run_dir {tmp_path / 'job'}"}}))
    with pytest.raises(UsageError, match="its last checkpoint, which was here and is gone; restore it there, or pass"):
        _runs.check_resumable(tmp_path / "job", path)
    with pytest.raises(UsageError, match="which was here and is gone: restore it there, then pass --extend$"):
        _runs.summary_kept(path, False, job, extend=False, run_dir=tmp_path / "job")
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "config.json").write_text("{}")
    _runs.check_resumable(tmp_path / "job", path)  # A run to train on: no error.
    with pytest.raises(UsageError, match=r"pass --extend to train it on to 9 frames, or --fresh"):
        _runs.summary_kept(path, False, job, extend=False, run_dir=tmp_path / "job")


def test_a_retraining_interrupted_before_it_replaced_the_summary_goes_on_without_fresh(tmp_path, capsys, monkeypatch):
    """`--fresh` set the summarised run aside and started anew; stopped, the same job without --fresh resumes it.

    Before, the old summary was kept and the new run was never resumed, while the stop said to run the same
    command (with --fresh) again, which sets the new run aside in turn.
    """
    from reproduce import _runs

    command = "python -m per.train --preset=p --frames=7 --seed=0"
    summarised = [{"command": command, "date_utc": "2026-01-01T10:00:00+00:00"}]
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"run_provenance": {"segments": summarised}}))
    job = ["--preset=p", "--frames=7", "--seed=0"]
    run_dir = tmp_path / "job"
    run_dir.mkdir()
    larger = command.replace("--frames=7", "--frames=9")  # A retraining toward a larger budget: not this job.
    for started, trained, kept in (
        ("2026-01-01T09:00:00+00:00", command, True),  # An older run is not the summary's successor.
        ("2026-01-02T09:00:00+00:00", larger, True),
        ("2026-01-02T09:00:00+00:00", command, False),
    ):
        segment = {"commit": "abc1234567890", "command": trained, "date_utc": started}
        (run_dir / "provenance.json").write_text(json.dumps({"segments": [segment]}))
        assert _runs.summary_kept(path, False, job, run_dir=run_dir) is kept
        assert _runs.summary_kept(path, False, job) is True  # A study that names no run directory keeps it.
        configs, flags_of = {"job": "a config its preset no longer gives"}, {"job": job}
        monkeypatch.setattr(_runs, "summary_changes", lambda summary, config: ["lr 1 -> 2"])
        if kept:
            with pytest.raises(UsageError, match="other settings than its preset now gives"):
                _runs.check_settings(tmp_path, configs, tmp_path, flags_of)
        else:  # The retraining is not refused for the summary it will replace.
            _runs.check_settings(tmp_path, configs, tmp_path, flags_of)
    said = f"job: run {run_dir} (commit abc1234567) started after the run of {path}"
    assert said in capsys.readouterr().out
    hints = []  # What a stop of the run says to do next, with and without --fresh.
    monkeypatch.setattr(_runs, "training_command", lambda *args: ["python"])
    monkeypatch.setattr(_runs, "run_to_completion", lambda command, run_dir, finished, fresh: hints.append(fresh))
    (run_dir / "final.json").write_text(json.dumps({"frames": 7}))
    for fresh in (True, False):
        _runs.train("per.train", run_dir, job, fresh=fresh)
    assert hints == [True, False]
    assert "without --fresh to resume" in _runs.resume_hint(True)
    assert _runs.resume_hint(False).startswith("run this same command again to resume")


def test_a_summary_extended_past_a_budget_keeps_that_budgets_job_and_refuses_one_it_never_scored(tmp_path, capsys):
    from reproduce import _runs

    path = tmp_path / "job.json"
    command = "python -m per.train --preset=p --frames=9 --seed=0"
    path.write_text(json.dumps({"run_provenance": {"command": command}, "earlier_budgets": [{"budget": 7}]}))
    for extend in (False, True):
        assert _runs.summary_kept(path, False, ["--preset=p", "--frames=7", "--seed=0"], extend=extend)
        assert "job: summarised at 9 frames with its 7, kept" in capsys.readouterr().out
    with pytest.raises(UsageError, match="trained past 8 frames, and a run is never cut back to fewer; pass --fr"):
        _runs.summary_kept(path, False, ["--preset=p", "--frames=8", "--seed=0"], extend=True)
    with pytest.raises(UsageError, match="summarises another job"):  # Another preset at that budget is another job.
        _runs.summary_kept(path, False, ["--preset=q", "--frames=7", "--seed=0"], extend=True)


def test_an_extended_runs_summary_gives_the_budget_it_was_trained_to(tmp_path):
    from reproduce import _runs

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"total_frames": 7, "seed": 0}))
    segments = [{"total_frames": 7, "frames_at_start": 0}, {"total_frames": 9, "frames_at_start": 7}]
    (run_dir / "provenance.json").write_text(json.dumps({"segments": segments}))
    assert _runs.run_config(run_dir) == {"total_frames": 9, "seed": 0}
    assert json.loads((run_dir / "config.json").read_text())["total_frames"] == 7  # The run's own file is kept.
    (run_dir / "provenance.json").unlink()  # No record: the config as saved.
    assert _runs.run_config(run_dir)["total_frames"] == 7


def test_a_refused_extension_is_the_only_line_and_a_passed_one_is_said(tmp_path, capsys):
    from reproduce import _runs

    command = "python -m per.train --preset=p --env=atari:pong --frames=7 --seed=0"
    (tmp_path / "job.json").write_text(json.dumps({"run_provenance": {"command": command}}))
    jobs = {"job": ["--preset=p", "--env=atari:pong", "--frames=9", "--seed=0"]}
    with pytest.raises(UsageError, match="holds no run to train on") as refused:
        _runs.jobs_to_train(jobs, tmp_path, tmp_path / "runs", fresh=False, extend=True)
    assert "refused too" not in str(refused.value)
    assert capsys.readouterr().out == ""  # Not "extending to 9" before the refusal.
    for other in ("job2", "job3"):
        (tmp_path / f"{other}.json").write_text(json.dumps({"run_provenance": {"command": command}}))
    many = {name: jobs["job"] for name in ("job", "job2", "job3")}
    with pytest.raises(UsageError, match=r"resumes job from .* \(refused too: job2, job3\)$"):
        _runs.jobs_to_train(many, tmp_path, tmp_path / "runs", fresh=False, extend=True)
    for other in ("job2", "job3"):
        (tmp_path / f"{other}.json").unlink()
    (tmp_path / "runs" / "job").mkdir(parents=True)
    (tmp_path / "runs" / "job" / "config.json").write_text("{}")
    assert _runs.jobs_to_train(jobs, tmp_path, tmp_path / "runs", fresh=False, extend=True) == ["job"]
    assert capsys.readouterr().out == "job: summarised at 7 frames, extending to 9\n"


def test_a_fresh_retrain_to_a_larger_budget_interrupted_resumes_with_extend(tmp_path, monkeypatch):
    from reproduce import _runs

    smaller = "python -m per.train --preset=p --frames=7 --seed=0"
    (tmp_path / "job.json").write_text(json.dumps({"run_provenance": {"command": smaller}}))
    job = ["--preset=p", "--frames=9", "--seed=0"]
    # `--fresh --frames=9` started the run anew, then stopped before its end: no final.json yet.
    (tmp_path / "runs").mkdir()
    run_dir = recorded_run(tmp_path / "runs" / "job", f"python -m per.train {' '.join(job)}")
    (run_dir / "final.json").unlink()
    with pytest.raises(UsageError, match="pass --extend to train it on to 9 frames"):
        _runs.jobs_to_train({"job": job}, tmp_path, tmp_path / "runs", fresh=False, extend=False)
    assert _runs.jobs_to_train({"job": job}, tmp_path, tmp_path / "runs", fresh=False, extend=True) == ["job"]
    commands = []

    def train_on(command, run_dir, is_finished, *_):
        commands.append(command)
        (run_dir / "final.json").write_text(json.dumps({"frames": 9}))

    monkeypatch.setattr(_runs, "run_to_completion", train_on)
    assert _runs.train("per.train", run_dir, job, extend=True) == {"frames": 9}
    assert "--resume" in commands[0] and "--frames=9" in commands[0]  # Resumed, not started again.
    assert [path.name for path in (tmp_path / "runs").iterdir()] == ["job"]  # Nothing moved aside.


def test_a_runs_budgets_are_its_segments_whatever_way_the_command_wrote_them():
    from reproduce import _runs

    def record(*segments):
        return {"segments": [dict(s) for s in segments]}

    command = "python -m per.train --preset=p --frames{} --run_dir /r"
    resumed = command.format("=7") + " --resume"  # An interrupted run resumed: the same budget, once.
    assert _runs.budgets(record({"command": command.format("=7")}, {"command": resumed})) == [7]
    spelled = record({"command": command.format("=7")}, {"command": command.format(" 1.2e1") + " --resume"})
    assert _runs.budgets(spelled) == [7, 12] and _runs.recorded_flags(spelled) == ["--preset=p", "--frames=12"]
    # A segment's own total_frames (every run's record has it) over its command's flag.
    assert _runs.budgets(record({"command": command.format(""), "total_frames": 5})) == [5]
    # An extension to 60 interrupted at 47, then asked to go on to 50 instead: 60 was never reached.
    changed = record(
        {"total_frames": 40, "frames_at_start": 0}, {"total_frames": 60, "frames_at_start": 40},
        {"total_frames": 50, "frames_at_start": 47},
    )  # fmt: skip
    assert _runs.budgets(changed) == [40, 50]
    assert _runs.recorded_flags(record({"command": "python -m per.train --seed -1 --preset p"})) == [
        "--preset=p", "--seed=-1",
    ]  # fmt: skip


def test_a_budget_written_another_way_is_the_same_job(tmp_path, no_training):
    from reproduce import _runs

    finished = recorded_run(tmp_path / "done", "python -m impala.train --preset=toy --frames 7")
    assert _runs.train("impala.train", finished, ["--preset=toy", "--frames=7e0"]) == {"frames": 7}


def test_a_kept_summary_names_the_commits_of_its_runs(tmp_path):
    from reproduce import _runs

    single, sweep = tmp_path / "single.json", tmp_path / "sweep.json"
    single.write_text(json.dumps({"run_provenance": {"commit": "0123456789abcdef"}}))
    agents = [{"run_provenance": {"commit": c}} for c in ("aaaaaaaaaaaa", "bbbbbbbbbbbb", "aaaaaaaaaaaa")]
    sweep.write_text(json.dumps({"agents": agents}))
    assert _runs.kept_summary(single) == f"{single} (commit 0123456789)"
    assert _runs.kept_summary(sweep) == f"{sweep} (commit aaaaaaaaaa and bbbbbbbbbb)"
    extended = tmp_path / "extended.json"
    segments = [{"commit": c} for c in ("cccccccccccc", "dddddddddddd")]
    extended.write_text(json.dumps({"run_provenance": {"commit": "dddddddddddd", "segments": segments}}))
    assert _runs.kept_summary(extended) == f"{extended} (commit cccccccccc and dddddddddd)"


def test_a_summary_is_kept_only_for_the_job_asked(tmp_path, capsys):
    from reproduce import _runs

    command = "python -m per.train --preset=p --env=minatar:breakout --frames=7 --seed=0 --config_override=a=1"
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"run_provenance": {"command": command}, "eval": {"episodes": 30}}))
    job = ["--preset=p", "--env=minatar:breakout", "--frames=7", "--seed=0"]
    assert _runs.summary_kept(path, False, [*job, "--config_override=b=2"], eval_episodes=30)
    assert "job: summarised earlier, kept" in capsys.readouterr().out
    assert not _runs.summary_kept(path, True, job)
    said = capsys.readouterr().out
    assert f"job: --fresh: it trains anew, and its summary will replace {path} (commit unknown)" in said
    with pytest.raises(UsageError, match=r"job.json summarises this job at 7 frames, not 9; pass --fresh"):
        _runs.summary_kept(path, False, [*job[:2], "--frames=9", "--seed=0"])
    with pytest.raises(UsageError, match=r"has 30 evaluation episodes; this command asks 100 evaluation episodes"):
        _runs.summary_kept(path, False, job, eval_episodes=100)
    # A run that recorded no command is the job asked, its budget however written (it said "at 7 frames, not 7").
    path.write_text(json.dumps({"run_provenance": {}}))
    assert _runs.summary_kept(path, False, [*job[:2], "--frames=7e0", "--seed=0"])


def test_a_written_summary_says_where_and_carries_its_runs_record(tmp_path, capsys):
    from reproduce import _runs

    run_dir, summaries = tmp_path / "run", tmp_path / "summaries"
    run_dir.mkdir()
    (run_dir / "provenance.json").write_text(json.dumps({"commit": "abc"}))
    _runs.write_summary(summaries, "job", {"last100": 1.5}, run_dir)
    assert capsys.readouterr().out == f"job: summarised into {(summaries / 'job.json').resolve()}\n"
    assert json.loads((summaries / "job.json").read_text()) == {"last100": 1.5}
    assert json.loads((summaries / "job.provenance.json").read_text()) == {"commit": "abc"}


def test_a_fresh_asked_is_remembered_until_the_jobs_summary_is_written(tmp_path, capsys):
    """A study stopped under `--fresh` is run again without it: each job it asked goes on retraining (a run
    started since the request resumes, an older one is set aside), and keeps no summary, until its own is written."""
    from reproduce import _runs

    job = ["--preset=p", "--env=minatar:breakout", "--frames=7", "--seed=0"]
    command = "python -m per.train " + " ".join(job)
    path, run_dir = tmp_path / "summaries" / "job.json", tmp_path / "runs" / "job"
    path.parent.mkdir()
    path.write_text(json.dumps({"run_provenance": {"command": command, "date_utc": "2026-01-01T00:00:00+00:00"}}))
    assert _runs.summary_kept(path, False, job, run_dir=run_dir) and _runs.fresh_asked(run_dir) is None
    _runs.ask_fresh([run_dir])
    asked = _runs.fresh_asked(run_dir)
    run_dir.mkdir()
    record = {"commit": "abc1234567890", "command": command.replace("--preset=p", "--preset=q")}
    for started, anew in (("2026-01-02T00:00:00+00:00", True), (asked, False)):  # The request's second counts.
        (run_dir / "provenance.json").write_text(json.dumps({**record, "date_utc": started}))
        assert _runs.retrains_anew(run_dir, False) is anew and _runs.retrains_anew(run_dir, True)
        assert not _runs.summary_kept(path, False, job, run_dir=run_dir)
        said = capsys.readouterr().out
        assert (f"it trains anew, and its summary will replace {path}" in said) is anew
        assert (f"job: run {run_dir} (commit abc1234567) retrains it as --fresh asked at {asked}" in said) is not anew
    # An old run of other flags is not refused: it is set aside. (The retraining's own flags are checked.)
    (run_dir / "provenance.json").write_text(json.dumps({**record, "date_utc": "2026-01-02T00:00:00+00:00"}))
    (run_dir / "config.json").write_text("{}")
    assert _runs.jobs_to_train({"job": job}, path.parent, run_dir.parent, False, False) == ["job"]
    _runs.summaries_to_build(path.parent, run_dir.parent)  # --summarise_only: the table's row is the old one.
    assert f"job: --fresh asked at {asked} has not retrained it yet; the tables use its old summary" in (
        capsys.readouterr().out
    )
    with pytest.raises(UsageError, match=r"job: --fresh asked at .* and --extend trains its run on: run without"):
        _runs.jobs_to_train({"job": job}, path.parent, run_dir.parent, False, True)
    # The retraining finished: the request is forgotten, and its summary (once written) kept.
    (run_dir / "provenance.json").write_text(json.dumps({"command": command, "date_utc": asked}))
    (run_dir / "final.json").write_text(json.dumps({"frames": 7}))
    assert _runs.train("per.train", run_dir, job) == {"frames": 7} and _runs.fresh_asked(run_dir) is None
    assert "job: reusing finished run" in capsys.readouterr().out
    # A sweep (LASER's) stopped before its first learner, older or newer, starts anew: no learner ran in it.
    sweep = tmp_path / "runs" / "sweep"
    for directory in (sweep / "configs", sweep / "member_0"):
        directory.mkdir(parents=True)
    _runs.ask_fresh([sweep])
    assert _runs.retrains_anew(sweep, False)
    (sweep / "member_0" / "provenance.json").write_text(json.dumps({"date_utc": _runs.fresh_asked(sweep)}))
    assert not _runs.retrains_anew(sweep, False)
    _runs.fresh_marker(sweep).write_text("")  # A request cut short is named, not a traceback.
    with pytest.raises(UsageError, match=r"sweep.fresh holds no time --fresh was asked \(''\): delete it"):
        _runs.fresh_asked(sweep)


def test_quick_profile_tables_say_smoke_scale_in_their_first_line():
    import reproduce

    assert (
        reproduce.heading("IMPALA on MinAtar", "quick")
        == "# SMOKE SCALE (quick profile), not a result: IMPALA on MinAtar"
    )
    assert reproduce.heading("IMPALA on MinAtar", "full") == "# IMPALA on MinAtar"


def test_every_reproduce_script_has_a_measured_expected_time():
    """`make reproduce` prints the profile's expected wall time before it starts (#11): no script is left out."""
    from reproduce import _scripts

    assert sorted(_scripts.EXPECTED_S) == _scripts.discover()
    # A full run not measured yet is 0, which `expected` names rather than counting as no time.
    assert all(quick > 0 and full >= 0 for quick, full in _scripts.EXPECTED_S.values())
    assert _scripts.expected(["reproduce.per.cliffwalk"], "full").startswith("about 0 h 11 min")


def test_an_expected_time_not_measured_yet_is_named_not_counted(monkeypatch):
    from reproduce import _scripts

    monkeypatch.setitem(_scripts.EXPECTED_S, "reproduce.paper.study", (600, 0))
    both = ["reproduce.per.cliffwalk", "reproduce.paper.study"]
    assert _scripts.expected(both, "quick").startswith("about 0 h 10 min")
    assert _scripts.expected(both, "full").startswith("about 0 h 11 min")
    assert _scripts.expected(both, "full").endswith("; not measured yet: reproduce.paper.study")


# One training process per run directory. ------------------------------------------

HOLD = (
    "import pathlib, sys, time; from common import run_dir; "
    "run_dir.hold(pathlib.Path(sys.argv[1])); print('held', flush=True); time.sleep(300)"
)


@pytest.fixture
def held_elsewhere():
    """Holds a run directory from another process, as a run training into it does; frees it at the end."""
    holders = []

    def hold(path: pathlib.Path) -> subprocess.Popen:
        holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], cwd=REPO, stdout=subprocess.PIPE, text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return holder

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_run_another_process_trains_is_refused_and_left_as_it_was(copied_run, held_elsewhere):
    holder = held_elsewhere(copied_run)
    before = usage_cases.snapshot(copied_run)
    for args in (["--resume"], ["--overwrite"]):
        result = run(f"--run_dir={copied_run}", *args, "--frames=20000")
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.strip() == (
            f"python -m impala.train: error: run directory {copied_run} is in use: another process is training "
            "into it; let it finish or stop it (Ctrl-C saves a checkpoint), then run this again"
        )
    assert usage_cases.snapshot(copied_run) == before
    holder.kill()
    holder.wait()
    run_dir_lib.check_not_in_use(copied_run)  # The kernel dropped the lock with its process.


def test_a_start_holds_its_run_directory_until_it_fails(tmp_path):
    path = tmp_path / "run"
    check = "import pathlib, sys; from common import run_dir; run_dir.check_not_in_use(pathlib.Path(sys.argv[1]))"
    free = [sys.executable, "-c", check, str(path)]
    with run_dir_lib.starting(path, PRESETS["toy"], resume=False, overwrite=False):
        held = subprocess.run(free, cwd=REPO, capture_output=True, text=True)
        assert held.returncode != 0 and "is in use" in held.stderr, held.stderr
        run_dir_lib.check_not_in_use(path)  # This process's own run.
    with pytest.raises(RuntimeError):
        with run_dir_lib.starting(path, PRESETS["toy"], resume=True, overwrite=False):
            raise RuntimeError("the learner could not be built")
    assert subprocess.run(free, cwd=REPO, capture_output=True).returncode == 0


def test_reproduce_scripts_neither_resume_nor_set_aside_a_run_in_use(tmp_path, held_elsewhere):
    from reproduce import _runs

    sweep = tmp_path / "sweep"
    member = recorded_run(sweep.mkdir() or sweep / "member_0", "python -m laser.train --preset=p --frames=7")
    (member / "final.json").unlink()
    held_elsewhere(member)
    with pytest.raises(UsageError, match=f"run directory {member} is in use"):
        _runs.train("laser.train", member, ["--preset=p", "--frames=7"])
    with pytest.raises(UsageError, match=f"run directory {member} is in use"):
        _runs.set_aside(sweep)
    # A refused --fresh remembers nothing: the same command without it, once the run is free, would have
    # set the run aside and retrained it from frame 0 (seen in a new user's trial).
    free = tmp_path / "free"
    with pytest.raises(UsageError, match=f"run directory {member} is in use"):
        _runs.ask_fresh([free, sweep])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep"] and (member / "config.json").exists()
