"""`reproduce._runs.train_jobs`: a study's runs trained several at a time (`--jobs`).

The runs here are stand-in commands (a few lines of Python each), so the tests
check the orchestration: runs in parallel up to the limit, prefixed output,
a failure or a stop signal reaching every run, and nothing started after.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reproduce import _runs

REPO = pathlib.Path(__file__).resolve().parents[1]

# A stand-in training run: argv = run_dir, behaviour. It marks itself running in
# the run's parent directory, and on SIGINT (or SIGTERM) exits 130 as a run that
# saved a checkpoint does.
RUN = textwrap.dedent("""
    import json, pathlib, signal, sys, time
    run_dir, behaviour = pathlib.Path(sys.argv[1]), sys.argv[2]
    runs = run_dir.parent
    def stopped(signum, frame):
        (runs / f"{run_dir.name}.stopped").write_text(str(signum))
        sys.exit(128 + signum)
    signal.signal(signal.SIGINT, stopped)
    signal.signal(signal.SIGTERM, stopped)
    # A run makes its directory once TensorFlow has loaded; before it marks itself running here,
    # so that a test which waits for the marks stops runs that have their directories.
    if behaviour != "starting":
        run_dir.mkdir(exist_ok=True)
    marker = runs / f"{run_dir.name}.running"
    marker.write_text("")
    (runs / f"{run_dir.name}.most").write_text(str(len(list(runs.glob("*.running")))))
    print(f"training {run_dir.name}", flush=True)
    if behaviour == "fail":
        sys.exit(3)
    if behaviour == "starting":  # No handler yet, as a run still importing TensorFlow: the signal ends it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        behaviour = "forever"
    if behaviour == "forever":  # Until stopped; a minute at most, so a test fails rather than hangs.
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.05)
        sys.exit(5)
    if behaviour == "wait_for_all":  # Ends once every run of the study has started.
        deadline = time.time() + 60
        while len(list(runs.glob("*.most"))) < int(sys.argv[3]):
            if time.time() > deadline:
                sys.exit(4)
            time.sleep(0.05)
    time.sleep(0.3)
    run_dir.mkdir(exist_ok=True)
    (run_dir / "final.json").write_text(json.dumps({"frames": 9}))
    marker.unlink()
""")


def stand_in(behaviours: dict[str, list[str]]):
    def training_command(module, run_dir, flags, fresh=False, extend=None):
        return [sys.executable, "-c", RUN, str(run_dir), *behaviours[run_dir.name]]

    return training_command


def jobs_in(tmp_path: pathlib.Path, names: list[str]) -> dict[str, tuple[pathlib.Path, list[str]]]:
    return {name: (tmp_path / name, ["--frames=9"]) for name in names}


def test_runs_train_together_up_to_the_limit_each_line_named_and_each_summarised(tmp_path, monkeypatch, capsys):
    names = ["a", "b", "c", "d"]
    monkeypatch.setattr(_runs, "training_command", stand_in({name: ["finish"] for name in names}))
    done = []
    _runs.train_jobs("per.train", jobs_in(tmp_path, names), lambda name, final: done.append((name, final)), parallel=2)
    assert sorted(done) == [(name, {"frames": 9}) for name in names]
    most = [int((tmp_path / f"{name}.most").read_text()) for name in names]
    assert max(most) == 2  # Two at once, never three.
    out = capsys.readouterr().out
    for name in names:
        assert f"{name}: training {name}\n" in out


def test_runs_that_need_each_other_running_finish_only_when_trained_together(tmp_path, monkeypatch):
    names = ["a", "b"]
    monkeypatch.setattr(_runs, "training_command", stand_in({n: ["wait_for_all", "2"] for n in names}))
    done = []
    _runs.train_jobs("per.train", jobs_in(tmp_path, names), lambda name, final: done.append(name), parallel=2)
    assert sorted(done) == names


def test_a_failed_run_stops_the_others_which_keep_their_checkpoints_and_starts_no_more(tmp_path, monkeypatch, capsys):
    behaviours = {"a": ["forever"], "b": ["fail"], "c": ["finish"]}
    monkeypatch.setattr(_runs, "training_command", stand_in(behaviours))
    with pytest.raises(SystemExit) as exited:
        _runs.train_jobs("per.train", jobs_in(tmp_path, list(behaviours)), lambda *_: None, parallel=2)
    assert exited.value.code == 3
    assert (tmp_path / "a.stopped").read_text() == str(int(signal.SIGINT))
    assert not (tmp_path / "c.most").exists()  # Never started.
    assert f"error: training {tmp_path / 'b'} failed with exit status 3" in capsys.readouterr().err


def test_a_finished_run_is_summarised_without_training(tmp_path, monkeypatch):
    jobs = jobs_in(tmp_path, ["a", "b"])
    monkeypatch.setattr(
        _runs, "training_command",
        lambda module, run_dir, *_: None if run_dir.name == "a" else stand_in({"b": ["finish"]})(module, run_dir, []),
    )  # fmt: skip
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "final.json").write_text(json.dumps({"frames": 9}))
    done = []
    _runs.train_jobs("per.train", jobs, lambda name, final: done.append(name), parallel=2)
    assert done == ["a", "b"] and not (tmp_path / "a.most").exists()


def test_a_parallel_study_whose_runs_stopped_unfinished_exits_130_not_0(tmp_path, monkeypatch):
    """Runs that stop unfinished (interrupted, exit 130) leave the study unfinished: a caller's `&&` must not go on."""
    monkeypatch.setattr(
        _runs, "training_command", lambda module, run_dir, *_: [sys.executable, "-c", "import sys; sys.exit(130)"]
    )
    with pytest.raises(SystemExit) as exited:
        _runs.train_jobs("per.train", jobs_in(tmp_path, ["a", "b"]), lambda *_: None, parallel=2)
    assert exited.value.code == 130


def stopped_study(
    tmp_path, behaviours: dict[str, list[str]], parallel: int, started: tuple[str, ...], signum, fresh: bool = False
):
    """A study of stand-in runs, in its own process, given `signum` once the runs `started` have; its output."""
    script = textwrap.dedent(f"""
        import pathlib, sys
        from reproduce import _runs
        from tests import test_study_jobs as t
        _runs.training_command = t.stand_in({behaviours!r})
        tmp = pathlib.Path({str(tmp_path)!r})
        jobs = t.jobs_in(tmp, {list(behaviours)!r})
        _runs.train_jobs("per.train", jobs, lambda *_: None, parallel={parallel}, fresh={fresh})
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.time() + 60
    while not all((tmp_path / f"{name}.most").exists() for name in started):
        assert time.time() < deadline and process.poll() is None, "the runs did not start"
        time.sleep(0.05)
    process.send_signal(signum)  # To the study alone, not its process group.
    output, _ = process.communicate(timeout=60)
    return process, output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_to_the_study_reaches_every_run_and_says_how_to_resume(tmp_path, signum):
    behaviours = {"a": ["forever"], "b": ["forever"], "c": ["finish"]}
    process, output = stopped_study(tmp_path, behaviours, 2, ("a", "b"), signum)
    assert process.returncode == 128 + signum, output
    assert all((tmp_path / f"{name}.stopped").read_text() == str(int(signum)) for name in ("a", "b"))
    assert not (tmp_path / "c.most").exists()
    (interrupted,) = [line for line in output.splitlines() if line.startswith("interrupted:")]
    assert interrupted == (
        f"interrupted: {tmp_path / 'a'}, {tmp_path / 'b'} keep their checkpoints, and c did not start; "
        "run this same command again to resume (it passes --resume to each run itself); a run's own "
        "'continue with' line trains it alone, without the study's summary"
    )
    assert "Traceback" not in output


def test_a_study_stopped_under_fresh_says_to_resume_without_it_which_retrains_the_rest(tmp_path):
    """Run again with --fresh, the started runs would be set aside and start anew; without it, they resume,
    and the runs that did not start retrain anew, not keeping their old summaries: `--fresh` is remembered."""
    behaviours = {"a": ["forever"], "b": ["forever"], "c": ["finish"]}
    process, output = stopped_study(tmp_path, behaviours, 2, ("a", "b"), signal.SIGINT, fresh=True)
    assert process.returncode == 130, output
    (interrupted,) = [line for line in output.splitlines() if line.startswith("interrupted:")]
    assert interrupted == (
        f"interrupted: {tmp_path / 'a'}, {tmp_path / 'b'} keep their checkpoints, and c did not start; "
        "run this command again without --fresh to resume (it passes --resume to each run; --fresh starts anew); "
        "a run's own 'continue with' line trains it alone, without the study's summary; "
        "it retrains c anew too, as --fresh asked"
    )
    assert all(_runs.fresh_asked(tmp_path / name) for name in ("a", "b", "c"))


@pytest.mark.parametrize("signum, parallel", [(signal.SIGINT, 1), (signal.SIGTERM, 2)])
def test_a_run_the_signal_ends_before_it_can_save_was_stopped_not_failed(tmp_path, signum, parallel):
    """A run still starting has no handler yet, and dies of the signal (subprocess's status -N): the study
    says it was interrupted and exits 128 + N, as for a run that saved. It said "failed with exit status -N".
    Such a run has no directory, so nothing is said to keep a checkpoint."""
    behaviours = {"a": ["starting"], "b": ["forever"]}
    process, output = stopped_study(tmp_path, behaviours, parallel, ("a", "b")[:parallel], signum)
    assert process.returncode == 128 + signum, output
    assert "error" not in output and "failed" not in output, output
    (interrupted,) = [line for line in output.splitlines() if line.startswith("interrupted:")]
    said = (
        f"{tmp_path / 'b'} keeps its checkpoint, and a did not start"
        if parallel == 2
        else f"{tmp_path / 'a'} did not start"
    )
    assert interrupted.startswith(f"interrupted: {said}; run this same command again"), interrupted  # a kept nothing.


def test_a_stop_handled_while_a_run_starts_reaches_that_run(tmp_path, monkeypatch):
    """The handler may run between a run's start and its registration, where `stop` could not see it."""
    (run,) = jobs_in(tmp_path, ["a"]).values()
    together = _runs._Together({"a": stand_in({"a": ["forever"]})("per.train", run[0], run[1])}, parallel=1)
    popen = subprocess.Popen

    def start_then_stop(*args, **kwargs):
        process = popen(*args, **kwargs)
        together.stop(signal.SIGTERM)
        return process

    monkeypatch.setattr(_runs.subprocess, "Popen", start_then_stop)
    started = time.monotonic()
    assert list(together.run()) == []
    assert together.failure is None and together.status == 128 + signal.SIGTERM
    assert time.monotonic() - started < 30  # Not the stand-in's minute: it was stopped.


def test_print_written_names_only_the_files_this_command_wrote(tmp_path, capsys):
    old, new = tmp_path / "old.csv", tmp_path / "new.md"
    old.write_text("kept")
    os.utime(old, (time.time() - 60, time.time() - 60))
    since = time.time() - 1
    new.write_text("written")
    (tmp_path / "runs").mkdir()
    _runs.print_written(tmp_path, since)
    assert capsys.readouterr().out == f"wrote {tmp_path.resolve()}/: new.md\n"
    _runs.print_written(tmp_path, time.time() + 60)
    assert capsys.readouterr().out.endswith("/: nothing\n")
