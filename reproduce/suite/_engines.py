"""Where the suite's jobs run: this machine (`local`) or an existing Ray cluster (`ray`).

Both engines run the driver's job command (`python -m reproduce.suite._job ...`)
from the repository root, its output appended to the job's log, and report its
exit status; the driver (`reproduce.suite.__main__`) keeps what they share:
skipping finished jobs, the retry, the progress lines. So a job behaves the
same wherever it runs.

The Ray engine connects to a running cluster (`ray start --head` on one
machine, `ray start --address HEAD:PORT` on the others) and submits each job as
a task that declares its CPUs, so Ray places whole jobs on nodes with room for
them. It assumes a filesystem shared by every node at the same paths: the
repository, its .venv (the task runs the driver's Python) and the suite
directory (the task writes the run directory and the log there).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import re
import signal
import socket
import subprocess
from typing import NamedTuple, Sequence

from common.errors import UsageError
from reproduce import REPO_ROOT

ENGINES = ("local", "ray")
CONNECT_TIMEOUT_S = 10.0
WAIT_POLL_S = 1.0  # The Ray task waits in slices so that a cancel (a KeyboardInterrupt) reaches it.


def spawn(command: Sequence[str], log: pathlib.Path, new_session: bool = False) -> subprocess.Popen:
    """Starts a job command from the repository root with its output appended to `log`."""
    with open(log, "a") as out:
        return subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=new_session
        )


class Local:
    """`jobs` job subprocesses at a time on this machine, each in its own session.

    The driver alone receives a Ctrl-C (or a `kill -INT` or `kill` of its pid)
    and hands a SIGINT to each job's whole process group, as a Ray task does: a
    signal sent to the driver only would otherwise leave the jobs running.
    """

    def __init__(self, jobs: int):
        self._jobs = jobs

    def slots(self) -> int:
        return self._jobs

    def start(self, command: Sequence[str], log: pathlib.Path) -> subprocess.Popen:
        return spawn(command, log, new_session=True)

    def status(self, process: subprocess.Popen) -> int | None:
        return process.poll()

    def interrupt(self, processes: Sequence[subprocess.Popen]) -> None:
        """Hands the SIGINT to each job's process group, whose run saves a checkpoint; waits for that."""
        for process in processes:
            with contextlib.suppress(ProcessLookupError):  # The job may have ended meanwhile.
                os.killpg(process.pid, signal.SIGINT)
        for process in processes:
            process.wait()


def parse_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` of a Ray head (the GCS address `ray start --head` prints) -> (host, port)."""
    match = re.fullmatch(r"([\w.\-]+):(\d{1,5})", address)
    if not match:
        raise UsageError(f"--ray_address={address!r}: expected HOST:PORT of the Ray head, as `ray start --head` prints")
    return match[1], int(match[2])


def check_reachable(address: str) -> None:
    """A one-line error, before anything is written, when no server listens at the head's address."""
    host, port = parse_address(address)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise UsageError(
            f"--ray_address={address}: no Ray cluster reachable there ({error}); start one with "
            f"`ray start --head --port={port}` and give the address it prints"
        ) from None


def run_job(command: Sequence[str], log: str) -> int:
    """The Ray task: runs the job command on the node Ray chose and returns its exit status.

    The job runs in its own session, so that a cancelled task (the driver's
    Ctrl-C) can hand the SIGINT to the job's whole process group (the job and
    its training run) and wait while the run saves its checkpoint.
    """
    with open(log, "a") as out:
        out.write(f"== ray task on node {socket.gethostname()}\n")
    # Ray workers block SIGINT, and a child inherits the mask: unblocked, the run can save on a Ctrl-C.
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        process = spawn(command, pathlib.Path(log), new_session=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    while True:
        try:
            return process.wait(timeout=WAIT_POLL_S)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:
            with contextlib.suppress(ProcessLookupError):  # The job may have ended meanwhile.
                os.killpg(process.pid, signal.SIGINT)
            return process.wait()


class _Task(NamedTuple):
    ref: object  # ray.ObjectRef of `run_job`'s exit status.
    log: pathlib.Path


class Ray:
    """Jobs as tasks on an existing Ray cluster, each declaring `cpus_per_job` CPUs."""

    def __init__(self, address: str, cpus_per_job: int, asked: str):
        """`asked`: what set `cpus_per_job`, for the error when no node holds it (the flag, or the preset)."""
        import ray  # Only this engine needs Ray, and it takes seconds to import.

        self._ray, self._cpus = ray, cpus_per_job
        try:
            ray.init(
                address=address,
                logging_level=logging.WARNING,
                log_to_driver=False,  # The job's output is in its log.
                job_config=ray.job_config.JobConfig(code_search_path=[str(REPO_ROOT)]),
            )
        except (ConnectionError, RuntimeError) as error:
            raise UsageError(f"--ray_address={address}: cannot join the Ray cluster there ({error})") from None
        largest = max(self._node_cpus(), default=0)
        if largest < cpus_per_job:
            ray.shutdown()
            raise UsageError(
                f"{asked}: no node of the Ray cluster at {address} has {cpus_per_job} CPUs "
                f"(the largest has {largest:g}); give a smaller --cpus_per_job or a larger node"
            )
        # No retries by Ray: the driver retries a failed job once, whatever the engine.
        self._task = ray.remote(run_job).options(num_cpus=cpus_per_job, max_retries=0)

    def _node_cpus(self) -> list[float]:
        return [node["Resources"].get("CPU", 0.0) for node in self._ray.nodes() if node["Alive"]]

    def slots(self) -> int:
        """Jobs the cluster holds at once, node by node, so that every submitted job starts (and the ETA
        counts the nodes that joined since)."""
        return max(1, sum(int(cpus // self._cpus) for cpus in self._node_cpus()))

    def start(self, command: Sequence[str], log: pathlib.Path) -> _Task:
        return _Task(self._task.remote(list(command), str(log)), log)

    def status(self, task: _Task) -> int | None:
        """The job's exit status; 1, with the reason in its log, when Ray lost the task (e.g. its node)."""
        ready, _ = self._ray.wait([task.ref], timeout=0)
        if not ready:
            return None
        try:
            return self._ray.get(task.ref)
        except self._ray.exceptions.RayError as error:
            with open(task.log, "a") as out:
                out.write(f"== ray lost the task: {type(error).__name__}: {' '.join(str(error).split())}\n")
            return 1

    def interrupt(self, tasks: Sequence[_Task]) -> None:
        """Cancels the tasks (each hands a SIGINT to its job, whose run saves a checkpoint) and waits."""
        refs = [task.ref for task in tasks]
        for ref in refs:
            self._ray.cancel(ref)
        if refs:
            self._ray.wait(refs, num_returns=len(refs))
