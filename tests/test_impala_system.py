"""IMPALA end to end: real Reverb server, actor processes and learner, as a user runs it.

Learning is asserted on the return, never on the time. Reliability: an actor
killed with SIGKILL is restarted, a killed learner resumes from its checkpoint,
Ctrl-C saves and exits cleanly, and a non-finite loss stops the run while the
last good checkpoint stays.
"""

import ast
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "impala.train", "--preset=toy"]


# Training runs get a generous bound: these tests assert behaviour (learning,
# resuming), not speed, and a loaded 2-core CI machine can run 4x slower.
def train(*args, timeout=900):
    return subprocess.run([*TRAIN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def start(*args):
    return subprocess.Popen(
        [*TRAIN, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def wait_for(predicate, timeout=180, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def checkpoint_steps(run_dir):
    return sorted(int(p.name.split("-")[1].split(".")[0]) for p in (run_dir / "checkpoints").glob("ckpt-*.index"))


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def episodes_logged(run_dir):
    path = run_dir / "episodes.csv"
    return path.exists() and len(path.read_text().splitlines()) > 1


@pytest.mark.slow
def test_learns_catch_to_near_perfect_return(tmp_path):
    result = train(f"--run_dir={tmp_path / 'run'}", "--seed=3")
    assert result.returncode == 0, result.stdout + result.stderr
    final = json.loads((tmp_path / "run" / "final.json").read_text())
    assert final["frames"] >= 120_000
    assert final["mean_return_last_100"] >= 0.8  # Random play scores about -0.6.
    header, *rows = (tmp_path / "run" / "episodes.csv").read_text().splitlines()
    assert header == "frames,episode_return,episode_length,wall_time" and len(rows) > 1000
    assert (tmp_path / "run" / "config.json").exists() and list((tmp_path / "run" / "tb").iterdir())


@pytest.mark.slow
def test_killed_actor_is_restarted_and_training_finishes(tmp_path):
    run_dir = tmp_path / "run"
    process = start(f"--run_dir={run_dir}", "--frames=60000")
    wait_for(lambda: episodes_logged(run_dir), what="first episodes")
    victim = int((run_dir / "actor_pids").read_text().split()[0])
    os.kill(victim, signal.SIGKILL)
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output
    assert f"actor 0 (pid {victim}) exited with -9; restarting" in output
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 60_000 and final["actor_restarts"] >= 1


@pytest.mark.slow
def test_killed_learner_resumes_from_its_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    process = start(f"--run_dir={run_dir}", "--frames=60000", "--config_override=checkpoint_every_s=1")
    wait_for(lambda: any(s > 0 for s in checkpoint_steps(run_dir)), what="a checkpoint after step 0")
    os.killpg(process.pid, signal.SIGKILL)  # The learner, its server and anything in its session.
    process.wait(timeout=30)
    orphans = list(map(int, (run_dir / "actor_pids").read_text().split()))
    wait_for(lambda: not any(alive(pid) for pid in orphans), timeout=120, what="orphaned actors to exit")
    saved = max(checkpoint_steps(run_dir))
    refused = train(f"--run_dir={run_dir}", "--frames=60000")
    assert refused.returncode == 2 and "already exists; pass --resume" in refused.stderr
    resumed = train(f"--run_dir={run_dir}", "--frames=60000", "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"step {saved}," in resumed.stdout  # "resumed from ...: step N, frames F"
    final = json.loads((run_dir / "final.json").read_text())
    # Frames continue from the checkpoint: the LR schedule (a function of frames) does too.
    assert final["frames"] >= 60_000 and final["learner_steps"] > saved


@pytest.mark.slow
def test_ctrl_c_saves_a_final_checkpoint_and_exits_cleanly(tmp_path):
    run_dir = tmp_path / "run"
    process = start(f"--run_dir={run_dir}", "--frames=10000000")
    wait_for(lambda: episodes_logged(run_dir), what="first episodes")
    time.sleep(2)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output
    assert "interrupted: saved checkpoint at step" in output
    assert max(checkpoint_steps(run_dir)) > 0
    for pid in map(int, (run_dir / "actor_pids").read_text().split()):
        with pytest.raises(ProcessLookupError):  # The actors were stopped too.
            os.kill(pid, 0)


def test_ctrl_c_on_a_reproduce_script_keeps_the_run_resumable(tmp_path):
    """A terminal's Ctrl-C reaches the study script and its training run alike."""
    run_dir = tmp_path / "run"
    script = (
        "import pathlib; from reproduce import _runs; "
        f"_runs.train('impala.train', pathlib.Path({str(run_dir)!r}), ['--preset=toy', '--frames=1e7'])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    wait_for(lambda: episodes_logged(run_dir), what="first episodes")
    os.killpg(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    assert "interrupted: saved checkpoint at step" in output and "run the same command to resume" in output
    assert "Traceback" not in output
    assert max(checkpoint_steps(run_dir)) > 0 and not (run_dir / "final.json").exists()


@pytest.mark.slow
def test_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    result = train(f"--run_dir={run_dir}", "--config_override=learning_rate=1e30")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "non-finite loss" in errors[0] and "last good checkpoint" in errors[0]
    assert checkpoint_steps(run_dir) == [0]
    assert not (run_dir / "final.json").exists()


@pytest.mark.parametrize(
    "args, options",
    [
        (["--env=atari:breakout"], {"terminal_on_life_loss": True}),  # App. G's option holds for every game.
        (["--env=atari:breakout", "--env_option=sticky_action_prob=0.25"],
         {"terminal_on_life_loss": True, "sticky_action_prob": 0.25}),
        (["--env=minatar:breakout"], {}),  # Another family: the Atari option means nothing there.
    ],
)  # fmt: skip
def test_a_presets_env_options_follow_its_env_family(args, options):
    script = (
        "import sys; from common import config, launch; from impala import train; train.FLAGS(sys.argv); "
        "request, _ = launch.from_flags(train.FLAGS); "
        "print(dict(config.resolve(train.PRESETS, 'toy', request, 'c').env_options))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "--preset=atari_shallow", *args], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert ast.literal_eval(result.stdout.strip().splitlines()[-1]) == options


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--preset=atari_huge"], "preset"),
        (["--env=atari:pongg"], "unknown atari name 'pongg'"),
        (["--config_override=batch_size=many"], "expected an integer"),
        (["--config_override=colour=1"], "unknown option 'colour'"),
        (["--config_override=env_options=x"], "unknown option 'env_options'"),  # --env_option sets those.
        (["--config_override=batch_size=100"], "queue_size=64 must exceed batch_size=100"),
        (["--config_override=unroll_length=0"], "unroll_length=0: must be >= 1"),
        (["--actors=-1"], "num_actors=-1: must be >= 1"),
        (["--actors=0"], "num_actors=0: must be >= 1"),  # 0 is a value, not "unset".
        (["--frames=0.5"], "--frames=0.5: must be a whole number of frames"),
        (["--env_option=sticky_action_prob=2", "--env=atari:pong"], "sticky_action_prob"),
        (["--role=learner", "--replay_address=localhost:1", "--connect_timeout_s=2"], "no Reverb server answered"),
        (["--role=actor"], "needs --replay_address"),
        (["--role=learner", "--replay_address=nowhere", "--connect_timeout_s=1"], "expected HOST:PORT"),
        (["--config=/no/such/config.json"], "no such file"),
        (["--config=impala/config.py"], "is not valid JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    result = train(f"--run_dir={tmp_path / 'run'}", *args, timeout=120)
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert not (tmp_path / "run").exists()  # A refused start leaves nothing behind.


@pytest.mark.slow
def test_separate_server_learner_and_actor_roles(tmp_path):
    """The multi-machine recipe of the README, on one machine's loopback."""
    port = 18000 + os.getpid() % 1000
    address = f"localhost:{port}"
    server = start("--role=server", f"--port={port}")
    run_dir = tmp_path / "run"
    learner = start("--role=learner", f"--replay_address={address}", f"--run_dir={run_dir}", "--frames=20000")
    actor = None
    try:
        wait_for(lambda: (run_dir / "config.json").exists(), what="the learner's config.json")
        actor = subprocess.Popen(  # As the README's recipe: the actor takes the learner's saved config.
            [sys.executable, "-m", "impala.train", "--role=actor", f"--replay_address={address}",
             f"--config={run_dir / 'config.json'}"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        output, _ = learner.communicate(timeout=240)
        assert learner.returncode == 0, output
        assert json.loads((run_dir / "final.json").read_text())["frames"] >= 20_000
    finally:
        for process in (actor, server, learner):
            if process and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_ctrl_c_reaches_a_learner_waiting_on_an_empty_queue(tmp_path):
    port = 19000 + os.getpid() % 1000
    server = start("--role=server", f"--port={port}")
    run_dir = tmp_path / "run"
    learner = start("--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={run_dir}")
    try:
        wait_for(lambda: len(checkpoint_steps(run_dir)) > 0, what="the learner to start")
        time.sleep(3)  # Now blocked waiting for unrolls that never come.
        learner.send_signal(signal.SIGINT)
        output, _ = learner.communicate(timeout=60)
        assert learner.returncode == 0 and "interrupted: saved checkpoint at step 0" in output, output
    finally:
        for process in (server, learner):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
