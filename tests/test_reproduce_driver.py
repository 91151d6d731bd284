"""`python -m reproduce` (what `make reproduce` runs) stopped by Ctrl-C or SIGTERM.

A trial found `kill` of `make reproduce` (make hands SIGTERM to the driver) or of
the driver end it and leave its study and the study's training run going on,
orphaned; and a SIGINT to the driver alone stop the study at once (Python's
`subprocess.call` kills its child after a Ctrl-C), its training run orphaned.
Here two stand-in studies take the real ones' place: each records the signals
that reach it, then saves (a second) and exits 128 + the signal.
"""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent

STUDY = """
import os, pathlib, signal, sys, time
log = pathlib.Path(sys.argv[0]).parent / "signals.log"
def save_then_exit(signum, _):
    with open(log, "a") as f:
        f.write(f"{os.getpid()} {signal.Signals(signum).name}\\n")
    time.sleep(1.0)  # Its training run saving a checkpoint.
    sys.exit(0 if "ends_anyway" in os.environ else 128 + signum)  # Or it was ending as the stop came.
for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, save_then_exit)
(pathlib.Path(sys.argv[0]).parent / f"{__spec__.name}.started").write_text(str(os.getpid()))
time.sleep(120)
"""

# The driver with the two stand-ins as its scripts.
DRIVER = """
import runpy, sys
import reproduce._scripts
reproduce._scripts.discover = lambda: ["stand_in_a", "stand_in_b"]
sys.argv = ["reproduce", "--profile=quick"]
runpy.run_module("reproduce", run_name="__main__", alter_sys=True)
"""


def start(tmp_path: pathlib.Path, **env_vars: str) -> subprocess.Popen:
    for name in ("stand_in_a", "stand_in_b"):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(STUDY))
    env = {**os.environ, **env_vars, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,  # Its own group, as a terminal's foreground job.
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (tmp_path / "stand_in_a.started").exists():
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        time.sleep(0.1)
    return driver


@pytest.mark.parametrize(
    "signum, to_group, ends_anyway",
    [
        (signal.SIGTERM, False, False),  # `kill` of the driver, or of make, which hands SIGTERM on.
        (signal.SIGINT, False, False),  # A SIGINT to the driver alone.
        (signal.SIGINT, True, False),  # A terminal's Ctrl-C, to the whole foreground group.
        (signal.SIGHUP, False, False),  # The terminal closed: handed on as SIGTERM.
        (signal.SIGINT, False, True),  # The study ends 0 as the stop comes: the driver stops all the same.
    ],
)
def test_a_stop_reaches_the_study_once_and_the_driver_waits_and_runs_no_other(tmp_path, signum, to_group, ends_anyway):
    driver = start(tmp_path, **({"ends_anyway": "1"} if ends_anyway else {}))
    study = int((tmp_path / "stand_in_a.started").read_text())
    handed = signal.SIGTERM if signum == signal.SIGHUP else signum
    try:
        (os.killpg if to_group else os.kill)(driver.pid, signum)
        out, err = driver.communicate(timeout=60)
        assert driver.returncode == 128 + handed, err
        # Once, from the driver: the study runs in a session of its own, which a terminal's Ctrl-C misses.
        assert (tmp_path / "signals.log").read_text() == f"{study} {signal.Signals(handed).name}\n"
        with pytest.raises(ProcessLookupError):
            os.kill(study, 0)  # It ended (and was reaped) before the driver did.
        assert not (tmp_path / "stand_in_b.started").exists()
        assert f"== stand_in_a: {'ok' if ends_anyway else f'stopped ({128 + handed})'} in " in out
        assert err.strip().splitlines()[-1] == (
            "python -m reproduce: stopped in stand_in_a; run the same command again to go on"
        )
        assert "Traceback" not in err
    finally:
        if driver.poll() is None:  # Only then may the study be unreaped, its pid not yet anyone else's.
            os.killpg(driver.pid, signal.SIGKILL)
            os.killpg(study, signal.SIGKILL)


EVALUATION = """
import os, pathlib, signal, sys, time
log = pathlib.Path(sys.argv[1]) / "signals.log"
def stop(signum, _):
    log.write_text(f"{os.getpid()} {signal.Signals(signum).name}\\n")
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
(pathlib.Path(sys.argv[1]) / "started").write_text(str(os.getpid()))
time.sleep(120)
"""


def test_a_study_stopped_while_it_evaluates_hands_the_stop_to_the_evaluation(tmp_path):
    """A study's evaluation (`_runs.evaluate`) once ran on, orphaned, after SIGTERM ended the study: now that the
    driver's stop reaches only the study, the study hands it on and waits."""
    (tmp_path / "stand_in_evaluate.py").write_text(textwrap.dedent(EVALUATION))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    script = (
        "import pathlib; from reproduce import _runs; "
        f"_runs.evaluate('stand_in_evaluate', pathlib.Path({str(tmp_path)!r}), 1, 0)"
    )
    study = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert study.poll() is None and time.monotonic() < deadline, study.communicate()
            time.sleep(0.1)
        evaluation = int((tmp_path / "started").read_text())
        study.send_signal(signal.SIGTERM)
        out, err = study.communicate(timeout=60)
        assert study.returncode == 143, err
        assert (tmp_path / "signals.log").read_text() == f"{evaluation} SIGTERM\n"
        assert f"interrupted: evaluating {tmp_path} stopped; run this same command again" in out
    finally:
        if study.poll() is None:
            os.killpg(study.pid, signal.SIGKILL)
