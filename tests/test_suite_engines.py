"""The suite driver's engines (`reproduce.suite._engines`), in-process: a local job's session, log and interrupt;
Ray's address, slots and task status against a stand-in `ray` module (the real cluster is test_suite_ray.py's).
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import time
import types

import pytest

from common.errors import UsageError
from reproduce.suite import _engines


def test_a_ray_head_named_with_a_dash_is_an_address():
    """Hostnames like `ray-head` are common: `--ray_address=ray-head.local:6379` must parse."""
    assert _engines.parse_address("ray-head.local:6379") == ("ray-head.local", 6379)


def test_a_job_log_is_appended_to_so_a_retry_keeps_the_first_attempt(tmp_path: pathlib.Path):
    """The retry's output goes after the failed attempt's, which says why it failed."""
    log = tmp_path / "job.log"
    log.write_text("first attempt\n")
    _engines.spawn([sys.executable, "-c", "print('retry')"], log).wait()
    assert log.read_text() == "first attempt\nretry\n"


def test_a_local_job_leads_its_own_process_group(tmp_path: pathlib.Path):
    """The driver hands a Ctrl-C to each job's group: a job in the driver's own group would get it twice or never."""
    log = tmp_path / "job.log"
    script = "import os; print(os.getpgid(0) == os.getpid())"
    _engines.Local(1).start([sys.executable, "-c", script], log).wait()
    assert log.read_text() == "True\n"


def test_a_local_interrupt_reaches_the_jobs_training_process(tmp_path: pathlib.Path):
    """The job command runs training in a child process: the SIGINT must reach it so that its run checkpoints."""
    marker, ready = tmp_path / "child_interrupted", tmp_path / "child_ready"
    child = (
        f"import signal, time, pathlib; "
        f"signal.signal(signal.SIGINT, lambda *_: (pathlib.Path({str(marker)!r}).touch(), exit(0))); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(30)"
    )
    job = f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {child!r}]); p.wait()"
    engine = _engines.Local(1)
    process = engine.start([sys.executable, "-c", job], tmp_path / "job.log")
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        engine.interrupt([process])
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # This test's own job group, whatever is left of it.
        except ProcessLookupError:
            pass


class _FakeRay:
    """What `_engines.Ray` calls of the `ray` module, with a given cluster."""

    class RayError(Exception):
        pass

    def __init__(self, nodes: list[dict]):
        self._nodes = nodes
        self.exceptions = types.SimpleNamespace(RayError=self.RayError)
        self.job_config = types.SimpleNamespace(JobConfig=lambda **kwargs: kwargs)

    def init(self, **kwargs) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def nodes(self) -> list[dict]:
        return self._nodes

    def remote(self, function):
        return types.SimpleNamespace(options=lambda **kwargs: function)

    def wait(self, refs, timeout=None, num_returns=1):
        return refs, []

    def get(self, ref):
        raise self.RayError("node died")


def _ray_engine(
    monkeypatch: pytest.MonkeyPatch, nodes: list[dict], cpus_per_job: int, asked: str = "--cpus_per_job"
) -> _engines.Ray:
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(nodes))
    return _engines.Ray("head:6379", cpus_per_job, asked)


def _node(cpus: float, alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"CPU": cpus}}


def test_ray_slots_count_whole_jobs_per_node(monkeypatch: pytest.MonkeyPatch):
    """Two live 3-CPU nodes hold two 2-CPU jobs, not three; a dead node holds none."""
    engine = _ray_engine(monkeypatch, [_node(3), _node(3), _node(16, alive=False)], cpus_per_job=2)
    assert engine.slots() == 2


def test_ray_accepts_a_node_with_exactly_the_cpus_a_job_needs(monkeypatch: pytest.MonkeyPatch):
    """`--cpus_per_job=2` on 2-CPU nodes fits: refusing it would refuse every full-node job."""
    assert _ray_engine(monkeypatch, [_node(2)], cpus_per_job=2).slots() == 1


def test_a_job_no_node_holds_names_what_set_its_cpus(monkeypatch: pytest.MonkeyPatch):
    """It said `--cpus_per_job=3` to a user who never gave the flag: the preset's learner and actors had."""
    asked = "a job of preset minatar (its learner and 2 actor(s), one CPU each)"
    with pytest.raises(
        UsageError, match=r"^a job of preset minatar .*: no node of the Ray cluster at head:6379 has 3 CPUs"
    ):
        _ray_engine(monkeypatch, [_node(2)], cpus_per_job=3, asked=asked)


def test_a_lost_ray_task_is_a_failed_job(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path):
    """A task Ray lost (its node died) is exit status 1, so the driver retries it, with the reason in its log."""
    engine = _ray_engine(monkeypatch, [_node(2)], cpus_per_job=1)
    log = tmp_path / "job.log"
    assert engine.status(_engines._Task(ref=object(), log=log)) == 1
    assert "ray lost the task: RayError: node died" in log.read_text()
