"""The peers benchmark (`python -m reproduce.benchmarks.peers`) without installing a peer.

Run order, the window's rate, the CSV/MD and the ratio line are checked on
made-up numbers; the run loop on a stand-in process printing a frame counter;
the install path with a stand-in Python whose pip fails.
"""

from __future__ import annotations

import csv
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from common.results import REPO_ROOT
from reproduce.benchmarks.peers import measure, report, venv

PEERS = ["-m", "reproduce.benchmarks.peers"]


def _system(name: str, config: str, command=lambda scratch: ["true"]) -> measure.System:
    return measure.System(name, config, command, r"^frames (\d+)", "config.json")


def _measurement(fps: float | None, note: str = "") -> measure.Measurement:
    return measure.Measurement(fps, 90.0 if fps else None, 1.5, 2.25, 0.4, "2026-11-22T08:00:00+00:00", note, None)


def _rows(rates: dict[tuple[str, str], list[float | None]]) -> list[dict]:
    return [
        report.row(system, config, run, _measurement(fps, "" if fps else "no frames"))
        for (system, config), runs in rates.items()
        for run, fps in enumerate(runs, 1)
    ]


def test_runs_alternate_one_of_each_system_per_round():
    systems = [_system("ours", "a"), _system("sample_factory", "envpool_2x32"), _system("sample_factory", "gym_2x32")]
    order = [(run, s.config) for run, s in measure.schedule(systems, 3)]
    assert order == [(r, c) for r in (1, 2, 3) for c in ("a", "envpool_2x32", "gym_2x32")]


def test_rate_is_the_counters_slope_over_the_window_after_warm_up():
    # A counter at 1,000 frames/s from t = 10 s, reported every 5 s; start-up reports 0 before.
    reports = [(t, 0) for t in (0.0, 5.0)] + [(10.0 + 5 * i, 1000 * 5 * i + 100) for i in range(20)]
    window = measure.Window(warmup_s=10.0, seconds=30.0, startup_timeout_s=60.0)
    assert measure.rate(reports, window) == pytest.approx((1000.0, 30.0))
    assert measure.rate(reports[:8], window) is None  # The window has not closed yet.
    assert measure.rate([(t, 0) for t in range(100)], window) is None  # Never trained.


def test_steal_is_the_stolen_share_of_cpu_time(tmp_path):
    stat_file = tmp_path / "stat"
    stat_file.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3\n")
    start = measure.cpu_times(stat_file)
    stat_file.write_text("cpu  200 0 100 1600 20 0 0 80 0 0\n")
    assert start == (40, 1000)
    assert measure.steal_pct(start, measure.cpu_times(stat_file)) == pytest.approx(4.0)
    assert measure.cpu_times(tmp_path / "missing") is None


def test_csv_has_one_row_per_run_with_the_required_columns(tmp_path):
    rows = _rows({("ours", "atari_shallow_2x16"): [7800.4, 7900.0], ("sample_factory", "gym_2x32"): [4700.0, None]})
    report.write(tmp_path, rows, "sample_factory", "python -m reproduce.benchmarks.peers", notes=[])
    with open(tmp_path / "peers.csv") as f:
        table = list(csv.DictReader(f))
    assert {"system", "config", "run", "frames_per_s"} <= set(table[0])
    assert [(r["system"], r["run"], r["frames_per_s"]) for r in table] == [
        ("ours", "1", "7800"), ("ours", "2", "7900"), ("sample_factory", "1", "4700"), ("sample_factory", "2", ""),
    ]  # fmt: skip
    assert table[3]["note"] == "no frames" and table[0]["load_1min_start"] == "1.5"
    md = (tmp_path / "peers.md").read_text()
    assert "| sample_factory | gym_2x32 | 2 | - | - | 1.50 -> 2.25 |" in md  # A failed run stays in the table.
    assert "| ours | atari_shallow_2x16 | 2 | 7,850 | 7,800 | 7,900 |" in md  # Summary: runs, mean, min, max.
    assert "**ours / sample_factory (best configuration, gym_2x32): 1.67x**" in md


def test_ratio_is_ours_over_the_peers_best_configuration():
    rows = _rows({
        ("ours", "atari_shallow_2x16"): [7900.0, 7700.0],
        ("sample_factory", "envpool_2x32"): [6000.0, 5000.0],  # Best, by mean.
        ("sample_factory", "gym_2x32"): [4800.0, 4600.0],
    })  # fmt: skip
    line = report.ratio_line(rows, "sample_factory")
    assert line.startswith("**ours / sample_factory (best configuration, envpool_2x32): 1.42x**")
    assert "ours 7,800 vs 5,500 frames/s" in line and "misses the 1.6x target" in line
    assert "meets the 1.4x target" in report.ratio_line(rows, "sample_factory", target=1.4)


def test_no_ratio_without_a_measured_run_of_both():
    rows = _rows({("ours", "atari_shallow_2x16"): [7900.0], ("sample_factory", "gym_2x32"): [None]})
    assert report.ratio_line(rows, "sample_factory") == "**No ratio: sample_factory has no measured run.**"


def _counter_command(frames_per_s: int, prelude: str = "") -> list[str]:
    """A stand-in system: a frame counter growing with the clock, printed every 0.05 s until it is stopped;
    `prelude` runs first."""
    code = prelude + textwrap.dedent(f"""
        import time
        print("starting up")
        start = time.monotonic()
        while True:
            print(f"frames {{int({frames_per_s} * (time.monotonic() - start))}}/10000000 | ...", flush=True)
            time.sleep(0.05)
    """)
    return [sys.executable, "-c", code]


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (a killed orphan waits for init to reap it)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_run_measures_its_window_then_stops_the_system_and_the_processes_it_started(tmp_path):
    """As sample-factory's workers: a child of the system, which its Ctrl-C alone would leave running."""
    pid_file = tmp_path / "worker.pid"
    worker = f"import subprocess; open({str(pid_file)!r}, 'w').write(str(subprocess.Popen(['sleep', '600']).pid))\n"
    system = _system("ours", "stand_in", lambda scratch: _counter_command(1000, prelude=worker))
    result = measure.measure(system, measure.Window(warmup_s=0.2, seconds=1.0, startup_timeout_s=30.0))
    assert result.note == "" and result.window_s >= 1.0
    # The counter's slope, give or take when its lines arrive on a busy machine.
    assert 500 < result.frames_per_s < 2000
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)


def test_measuring_from_a_process_that_ignores_ctrl_c_still_gives_the_system_a_clean_stop(tmp_path):
    """A caller started in the background (a CI job's test runner) ignores SIGINT: its system must not."""
    stopped = tmp_path / "stopped"
    clean_stop = f"import atexit; atexit.register(lambda: open({str(stopped)!r}, 'w').close())\n"
    system = _system("ours", "stand_in", lambda scratch: _counter_command(1000, prelude=clean_stop))
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        began = time.monotonic()
        result = measure.measure(system, measure.Window(warmup_s=0.2, seconds=1.0, startup_timeout_s=30.0))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.note == "" and stopped.exists()  # Python's own exit ran: Ctrl-C, not the SIGKILL after grace.
    assert time.monotonic() - began < 30


def test_a_system_that_exits_early_is_a_run_without_a_rate():
    code = "print('\\x1b[36mValueError: boom | x\\x1b[0m'); print('warnings.warn(...)')"
    system = _system("ours", "stand_in", lambda scratch: [sys.executable, "-c", code])
    result = measure.measure(system, measure.Window(warmup_s=0.0, seconds=1.0, startup_timeout_s=30.0))
    assert result.frames_per_s is None and result.note.endswith("last error: ValueError: boom | x")


def _fake_python(tmp_path: pathlib.Path) -> pathlib.Path:
    """Stands in for `python3.11`: `-m venv DIR` makes a venv whose pip fails as pip does offline."""
    fake = tmp_path / "python3.11"
    pip_fails = "#!/bin/sh\\necho 'ERROR: No matching distribution found for torch==2.13.0' >&2\\nexit 1\\n"
    fake.write_text(f'#!/bin/sh\nmkdir -p "$3/bin"\nprintf "{pip_fails}" > "$3/bin/python"\nchmod +x "$3/bin/python"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake


def _peers(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *PEERS, *flags], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_a_peer_that_cannot_be_installed_is_one_line_and_exit_2(tmp_path):
    result = _peers(
        f"--base_python={_fake_python(tmp_path)}", f"--peer_dir={tmp_path / 'peers'}", f"--out={tmp_path / 'out'}"
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    reason = "sample_factory cannot be installed: ERROR: No matching distribution found for torch==2.13.0"
    assert reason in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flag", "fragments"),
    [
        ("--peer=rllib", ["rllib", "sample_factory"]),
        ("--peer_configs=gym_2x32,seed_rl", ["seed_rl", "envpool_2x32, gym_2x32"]),
        ("--runs=0", ["--runs must be >= 1"]),
        ("--seconds=0", ["--seconds and --startup_timeout > 0"]),
        ("--warmup=-1", ["--warmup >= 0"]),
    ],
)
def test_an_unknown_peer_or_configuration_is_one_line_naming_the_accepted(flag, fragments, tmp_path):
    result = _peers(flag, f"--peer_dir={tmp_path}", f"--out={tmp_path / 'out'}")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert all(fragment in result.stderr for fragment in fragments) and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_base_python_beside_an_existing_venv_is_refused_as_unused(tmp_path):
    """It creates the venv only: once one exists it was accepted and did nothing."""
    (tmp_path / "sample_factory" / "bin").mkdir(parents=True)
    (tmp_path / "sample_factory" / "bin" / "python").touch()
    result = _peers(f"--base_python={sys.executable}", f"--peer_dir={tmp_path}", f"--out={tmp_path / 'out'}")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--base_python: " in result.stderr and "leave --base_python out" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_an_edited_pin_file_reinstalls_the_peers_venv(tmp_path):
    """A stamp from other pins is not reused: pip runs (here with a base python that does not exist)."""
    directory = tmp_path / "sample_factory"
    directory.mkdir()
    requirements = venv.REQUIREMENTS / "sample_factory.txt"
    (directory / f".installed-{requirements.name}").write_text(requirements.read_text() + "torch==0.0.1\n")
    with pytest.raises(venv.PeerUnavailableError):
        venv.ensure("sample_factory", directory, base_python=str(tmp_path / "no_python"))


def test_a_stamped_venv_is_reused_without_running_pip(tmp_path):
    directory = tmp_path / "sample_factory"
    directory.mkdir()
    requirements = venv.REQUIREMENTS / "sample_factory.txt"
    (directory / f".installed-{requirements.name}").write_text(requirements.read_text())
    assert venv.ensure("sample_factory", directory, base_python=str(tmp_path / "no_python")) == directory / "bin/python"
