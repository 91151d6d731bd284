"""The suite driver's Ray engine (`python -m reproduce.suite --engine ray`) on a one-node Ray cluster.

The cluster is started here as a user starts one (`ray start --head`), on a
free port, with 2 CPUs, its processes in their own session so that teardown
stops exactly this cluster. Ray binds to this machine's reachable address
unless told that it runs no multi-machine cluster; the tests keep it on
loopback that way. Entry points run as subprocesses, as in test_suite.py.
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from reproduce import REPO_ROOT
from reproduce.suite import _plan

TOY = ["--agent=impala", "--preset=toy", "--suite=toy:catch,minatar:breakout", "--frames=3000"]
TIMEOUT_S = 600
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 10  # SIGTERM first; `ray start` takes about 30 s to stop everything on a busy machine.
# Ray binds to the loopback address only when it runs no multi-machine cluster.
LOOPBACK_ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _suite(*args: str, module: str = "reproduce.suite") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env=LOOPBACK_ENV)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop(head: subprocess.Popen) -> None:
    """Stops this cluster's processes (its session), not any other Ray on the machine: SIGTERM lets `ray start`
    stop its services; SIGKILL then ends what is left (workers, agents)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def ray_head(tmp_path):
    """`HOST:PORT` of a running one-node Ray cluster with 2 CPUs, stopped after the test."""
    port = _free_port()
    # Ray's sockets live under its temp dir, and a Unix socket path must stay under 108 bytes: tmp_path is too
    # deep for that, so a short directory of its own.
    temp_dir = pathlib.Path(tempfile.mkdtemp(prefix="ray-"))
    log = tmp_path / "ray_head.log"
    command = [
        str(pathlib.Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}",
        "--num-cpus=2", f"--temp-dir={temp_dir}", "--include-dashboard=false", "--disable-usage-stats",
        f"--ray-client-server-port={_free_port()}",
    ]  # fmt: skip
    with open(log, "w") as out:
        head = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=LOOPBACK_ENV)
    try:
        _wait_until_started(head, log)
        yield f"127.0.0.1:{port}"
    finally:
        _stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_until_started(head: subprocess.Popen, log: pathlib.Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while "block forever" not in log.read_text():
        assert head.poll() is None, f"ray start exited with {head.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"ray start took over {START_TIMEOUT_S} s:\n{log.read_text()}"
        time.sleep(0.5)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--engine=ray"], "--engine=ray needs --ray_address=HEAD:PORT"),
        (["--engine=mpi"], "unknown engine 'mpi'; accepted: local, ray"),
        (["--engine=ray", "--ray_address=head"], "expected HOST:PORT"),
        (["--engine=ray", f"--ray_address=127.0.0.1:{_free_port()}"], "no Ray cluster reachable there"),
        (["--ray_address=127.0.0.1:6379"], "--ray_address is for --engine=ray; leave it out"),
    ],
)
def test_bad_engine_input_is_one_line_and_creates_nothing(tmp_path, args, message):
    result = _suite(*TOY, *args, f"--suite_dir={tmp_path / 'suite'}")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert not (tmp_path / "suite").exists()


@pytest.mark.slow
def test_toy_suite_runs_on_ray_and_aggregates(tmp_path, ray_head):
    suite_dir = tmp_path / "suite"
    args = [*TOY, "--eval_episodes=5", "--engine=ray", f"--ray_address={ray_head}", f"--suite_dir={suite_dir}"]
    too_big = _suite(*args, "--cpus_per_job=3")
    assert too_big.returncode == 2 and len(too_big.stderr.strip().splitlines()) == 1, too_big.stderr
    assert "no node of the Ray cluster" in too_big.stderr and not suite_dir.exists()
    # Toy IMPALA: a learner and 1 actor, 2 CPUs a job, so the 2-CPU node holds one job at a time.
    dry = _suite(*args, "--dry_run")
    assert dry.returncode == 0 and "2 to run" in dry.stdout and "with 1 at a time (ray engine)" in dry.stdout, dry
    assert not suite_dir.exists()

    args.append("--cpus_per_job=1")  # Both jobs at once.
    first = _suite(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "catch_s0: done" in first.stdout and "breakout_s0: done" in first.stdout
    assert "jobs 2/2 done | 0 running | 0 failed" in first.stdout
    for name in ("catch_s0", "breakout_s0"):
        assert _plan.state(suite_dir / name) == "done"
        log = (suite_dir / "logs" / f"{name}.log").read_text()
        assert log.count("== attempt") == 1 and "== ray task on node" in log and "impala.evaluate" in log
    again = _suite(*args)
    assert again.returncode == 0 and again.stdout.count("done earlier, kept") == 2 and "started" not in again.stdout

    aggregate = _suite(str(suite_dir), "--reps=100", module="reproduce.suite.aggregate")
    assert aggregate.returncode == 0, aggregate.stderr
    with open(suite_dir / "per_game.csv", newline="") as f:
        rows = {row["game"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == ["breakout", "catch"]
    for game, row in rows.items():
        final = json.loads((suite_dir / f"{game}_s0" / "final.json").read_text())
        evaluated = json.loads((suite_dir / f"{game}_s0" / f"eval_step{final['learner_steps']}.json").read_text())
        assert float(row["score"]) == evaluated["mean_return"] and int(row["frames"]) == final["frames"] >= 3000
        assert int(row["episodes"]) == evaluated["episodes"] == 5
