"""IMPALA stopping and resuming as a user meets it: real Reverb server, actor processes and learner.

A killed learner resumes from its checkpoint, Ctrl-C saves and exits cleanly
(also from a reproduce script, and from a learner waiting on an empty queue),
a non-finite loss stops the run while the last good checkpoint stays, and the
server, learner and actor roles run as separate processes. Split from
test_impala_system.py so that `--dist loadfile` can run the two files on
different workers.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from processes import alive, checkpoint_steps, committed_checkpoint_step, episodes_logged, wait_for
from test_impala_system import REPO, start, train


@pytest.mark.slow
def test_killed_learner_resumes_from_its_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    process = start(f"--run_dir={run_dir}", "--frames=20000", "--config_override=checkpoint_every_s=1")
    wait_for(lambda: (committed_checkpoint_step(run_dir) or 0) > 0, what="a checkpoint after step 0")
    os.killpg(process.pid, signal.SIGKILL)  # The learner, its server and anything in its session.
    process.wait(timeout=30)
    # The killed run's actors outlive it until their server has been gone for ACTOR_PATIENCE_S; the
    # resumed run starts its own server and actors meanwhile, and the orphans must have exited by its end.
    orphans = list(map(int, (run_dir / "actor_pids").read_text().split()))
    saved = committed_checkpoint_step(run_dir)  # Not the newest files: the kill may have cut their commit.
    refused = train(f"--run_dir={run_dir}", "--frames=20000")
    assert refused.returncode == 2 and "already exists; pass --resume" in refused.stderr
    resumed = train(f"--run_dir={run_dir}", "--frames=20000", "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"step {saved}," in resumed.stdout  # "resumed from ...: step N, frames F"
    final = json.loads((run_dir / "final.json").read_text())
    # Frames continue from the checkpoint: the LR schedule (a function of frames) does too.
    assert final["frames"] >= 20_000 and final["learner_steps"] > saved
    wait_for(lambda: not any(alive(pid) for pid in orphans), timeout=120, what="orphaned actors to exit")


@pytest.mark.slow
def test_ctrl_c_saves_a_final_checkpoint_and_exits_130(tmp_path):
    run_dir = tmp_path / "run"
    process = start(f"--run_dir={run_dir}", "--frames=10000000")
    wait_for(lambda: episodes_logged(run_dir), what="first episodes")
    time.sleep(2)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output  # 128 + SIGINT: interrupted, not finished.
    saved = max(checkpoint_steps(run_dir))
    resume = f"continue with python -m impala.train --run_dir {run_dir} --resume"
    assert f"interrupted: saved checkpoint at step {saved}; {resume}" in output
    assert saved > 0
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
    assert "interrupted: saved checkpoint at step" in output and "run this same command again to resume" in output
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
        config = f"--config {run_dir / 'config.json'} --actors 1"  # --actors: a resume's may differ from the file's.
        how = f"--role actor --replay_address {address} {config} --actor_id I (I from 0 to"
        assert how in output, output  # The learner says how to start the actors it waits for.
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
        assert learner.returncode == 130 and "interrupted: saved checkpoint at step 0" in output, output
    finally:
        for process in (server, learner):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_learner_is_refused_a_server_that_another_runs_learner_uses(tmp_path):
    """A resumed learner given another run's server (the same config, so its tables passed) trained on that
    run's unrolls and published its parameters to that run's actors; a new run's learner took one whose
    learner had not yet received anything."""
    port = 17000 + os.getpid() % 1000
    server = start("--role=server", f"--port={port}")
    mine, other, copy = tmp_path / "mine", tmp_path / "other", tmp_path / "copy"
    learner = start("--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={mine}")
    try:
        wait_for(lambda: len(checkpoint_steps(mine)) > 0, what="the learner to start")
        learner.send_signal(signal.SIGINT)
        output, _ = learner.communicate(timeout=60)
        assert learner.returncode == 130, output
        run_id = json.loads((mine / "provenance.json").read_text())["run_id"]
        shutil.copytree(mine, copy)  # A run of its own: another id in its record.
        record = json.loads((copy / "provenance.json").read_text())
        (copy / "provenance.json").write_text(json.dumps({**record, "run_id": "0" * 32}))
        claimed = f"error: the Reverb server at localhost:{port} serves the run in {mine} (its learner's); "
        for run_dir, resume in ((other, []), (copy, ["--resume"])):
            refused = train("--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={run_dir}", *resume)
            assert refused.returncode == 2 and claimed in refused.stderr, refused.stderr
            assert len(refused.stderr.splitlines()) == 1
        assert not other.exists() and json.loads((copy / "provenance.json").read_text())["run_id"] == "0" * 32
        learner = start("--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={mine}", "--resume")
        wait_for(lambda: len(json.loads((mine / "provenance.json").read_text())["segments"]) == 2, what="a resume")
        learner.send_signal(signal.SIGINT)
        output, _ = learner.communicate(timeout=60)
        assert learner.returncode == 130 and "resumed from" in output, output
        assert json.loads((mine / "provenance.json").read_text())["run_id"] == run_id
    finally:
        for process in (server, learner):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("role, stop", [("actor", "SIGINT"), ("learner", "SIGINT"), ("learner", "SIGTERM")])
def test_a_stop_ends_a_role_waiting_for_its_server(tmp_path, role, stop):
    """A new user's trial: a hand-started actor ignored Ctrl-C and waited out its timeout for the server; a
    learner stopped only when its timeout ended. Another's: `kill` ended a waiting learner with no word."""
    process = subprocess.Popen(
        [sys.executable, "-m", "impala.train", f"--role={role}", "--preset=toy", "--replay_address=localhost:1",
         "--connect_timeout_s=120", *([f"--run_dir={tmp_path / 'run'}"] if role == "learner" else [])],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout.readline() == "waiting for the Reverb server at localhost:1 (up to 120s)\n"
    signalled = time.monotonic()
    process.send_signal(signal.Signals[stop])
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.Signals[stop], stderr
    assert time.monotonic() - signalled < 20, "the stop waited for the connection's timeout"
    said = f"actor 0: stopped by {stop}" if role == "actor" else "python -m impala.train: interrupted; run the same"
    assert stderr.splitlines()[-1].startswith(said), stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_sigterm_stops_a_server_as_ctrl_c_does(tmp_path):
    """A new user's trial: `kill` ended a hand-started server with no word, where Ctrl-C says what became of its
    tables (PER's, saved in --tables_dir: `test_per_system`'s server, stopped by Ctrl-C)."""
    port = 24000 + os.getpid() % 1000
    process = subprocess.Popen(
        [sys.executable, "-m", "impala.train", "--role=server", "--preset=toy", f"--port={port}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout.readline().startswith(f"Reverb server listening on port {port}")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    said = "interrupted: the server stopped, and its tables with it (impala saves none); the same command serves new"
    assert f"{said} ones" in stderr.splitlines(), stderr  # Before Reverb's own last line, "Shutting down ...".
