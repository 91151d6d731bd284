"""LASER end to end, through the CLI as a user runs it.

Learning is asserted on the return, never on the time: the toy preset (87.5%
replay, the trust region) learns Catch, and its run evaluates. Bad input is one
line, exit 2, and leaves no run directory behind; a resume that would change
the replay fraction is refused and changes nothing. A prioritized run (App. A.2)
weights its replayed unrolls below 1, moves their priorities, and resumes.
"""

import csv
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import usage_cases

REPO = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "laser.train"]
EVALUATE = [sys.executable, "-m", "laser.evaluate"]
FRAMES = 40_000  # A manual run reached a mean return of 1.0 by ~26K frames.


def run(*args, module=TRAIN, timeout=600):
    return subprocess.run([*module, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


BAD_OVERRIDES = [
    (["replay_fraction=-0.1"], "replay_fraction=-0.1: must be in [0, 1]"),
    (["replay_fraction=1.5"], "replay_fraction=1.5: must be in [0, 1]"),
    (["trust_region_threshold=-1"], "trust_region_threshold=-1"),
    (["replay_capacity=117"], "fewer than a replay batch of 14"),  # 13 unrolls of 9 steps.
    (["batch_size=8", "replay_fraction=0.96"], "rounds to 0 online and 8 replayed"),
    (["replay_fraction=0.02"], "rounds to 16 online and 0 replayed"),
    (["correction=none"], "with trust_region=True"),
    (["min_replay_size=30000"], "exceeds replay_capacity=20000"),
    (["min_replay_size=1000"], "exceed queue_size=64 unrolls"),
    (["replay_priority=rank"], "unknown replay_priority 'rank'; accepted: uniform, critic_loss"),
    (["importance_sampling_exponent=2"], "importance_sampling_exponent=2.0: must be in [0, 1]"),
    (["recompute_replay_state=true"], "recompute_replay_state=True: there is no LSTM state"),
]
# In a process of its own, as a user runs it; the others share one process (`in_one_process`).
OWN_PROCESS = {("replay_fraction=-0.1",)}


def override_flags(overrides) -> list[str]:
    return [f"--config_override={override}" for override in overrides]


@pytest.fixture(scope="module")
def in_one_process(tmp_path_factory) -> dict[tuple[str, ...], tuple[usage_cases.Outcome, pathlib.Path]]:
    """The bad-input cases not in OWN_PROCESS, through `laser.train`'s own `cli.run(main)`, in one process."""
    cases = [tuple(overrides) for overrides, _ in BAD_OVERRIDES if tuple(overrides) not in OWN_PROCESS]
    argvs = [tuple(override_flags(case)) for case in cases]
    outcomes = usage_cases.run_cases("laser.train", argvs, tmp_path_factory.mktemp("bad_input"), ["--preset=toy_laser"])
    return {case: outcomes[tuple(override_flags(case))] for case in cases}


@pytest.mark.parametrize("overrides, fragment", BAD_OVERRIDES)
def test_bad_input_is_one_line_and_exit_2(tmp_path, in_one_process, overrides, fragment):
    """One line naming the problem, exit status 2, no traceback, and no run directory.

    The OWN_PROCESS case runs `python -m laser.train`; the others run through
    the same `cli.run(main)` in one shared process (`usage_cases`), which
    spares a TensorFlow import per case.
    """
    if tuple(overrides) in OWN_PROCESS:
        run_dir = tmp_path / "run"
        result = run("--preset=toy_laser", f"--run_dir={run_dir}", *override_flags(overrides), timeout=120)
    else:
        result, run_dir = in_one_process[tuple(overrides)]
    usage_cases.assert_one_line_error(result, fragment)
    assert not run_dir.exists()  # A refused start leaves nothing behind.


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    directory = tmp_path_factory.mktemp("runs") / "toy_laser"
    result = run("--preset=toy_laser", f"--run_dir={directory}", f"--frames={FRAMES}")
    assert result.returncode == 0, result.stdout + result.stderr
    return directory


@pytest.mark.slow
def test_learns_catch_with_replay_and_the_trust_region(trained):
    config = json.loads((trained / "config.json").read_text())
    assert config["replay_fraction"] == 0.875 and config["trust_region"] is True
    final = json.loads((trained / "final.json").read_text())
    assert final["frames"] >= FRAMES
    with open(trained / "episodes.csv") as file:
        returns = [float(row["episode_return"]) for row in csv.DictReader(file)]
    assert len(returns) > 1000
    assert np.mean(returns[-100:]) >= 0.6  # Random play scores about -0.6.
    # Episodes are counted from fresh unrolls only: Catch's episodes are 9 steps, so about one per 9 frames.
    assert final["episodes"] == pytest.approx(final["frames"] / 9, rel=0.05)


@pytest.mark.slow
def test_evaluate_writes_its_result(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    result = run(str(copy), "--episodes=20", module=EVALUATE, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = copy.glob("eval_step*.json")
    saved = json.loads(path.read_text())
    assert saved["episodes"] == 20 and saved["mean_return"] >= 0.5  # Sampling from pi, as in training.
    assert path.name == f"eval_step{saved['checkpoint_step']}.json"


@pytest.mark.slow
def test_resume_refuses_a_changed_replay_fraction(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    before = usage_cases.snapshot(copy)
    result = run(f"--run_dir={copy}", "--resume", "--config_override=replay_fraction=0.5", timeout=120)
    # Not PER's learner_threads, which LASER has not.
    operational = (
        "total_frames (--frames or --config_override), num_actors (--actors or --config_override), log_every_s, "
        "checkpoint_every_s (--config_override)"
    )
    usage_cases.assert_one_line_error(result, "replay_fraction would change", f"may change only {operational}")
    assert usage_cases.snapshot(copy) == before


def scalars(directory: pathlib.Path, tag: str) -> list[float]:
    """Every value TensorBoard holds for `tag` in the run's tb/ directory."""
    values = []
    for path in sorted((directory / "tb").glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            values += [float(tf.make_ndarray(v.tensor)) for v in event.summary.value if v.tag == tag]
    return values


@pytest.mark.slow
def test_prioritized_replay_weights_moves_priorities_and_resumes(tmp_path):
    directory = tmp_path / "run"
    overrides = ["replay_priority=critic_loss", "importance_sampling_exponent=0.5", "log_every_s=0.5"]
    flags = [f"--config_override={override}" for override in overrides]
    result = run("--preset=toy_laser", f"--run_dir={directory}", "--frames=3000", *flags, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    config = json.loads((directory / "config.json").read_text())
    assert config["replay_priority"] == "critic_loss" and config["importance_sampling_exponent"] == 0.5
    weights = scalars(directory, "learner/importance_weight_min")
    mean_priorities = scalars(directory, "learner/priority_mean")
    assert weights and min(weights) < 1.0 and max(weights) <= 1.0
    assert all(0.0 < p <= 1.0 for p in mean_priorities) and len(set(mean_priorities)) > 1
    resumed = run(f"--run_dir={directory}", "--resume", "--frames=4000", timeout=300)  # The learner's state restores.
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed from" in resumed.stdout and json.loads((directory / "final.json").read_text())["frames"] >= 4000
