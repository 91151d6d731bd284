"""Prioritized Double DQN end to end, through the CLI as a user runs it.

Learning is asserted on the return, never on the time. A resumed run starts
from the replay it saved (Reverb's checkpoint in RUN_DIR/replay); an
overwritten run does not. With an actor process (Ape-X style) frames are the
transitions the table received, the rate limiter holds the preset's replay
ratio, finished games reach episodes.csv, a killed actor is restarted, and a
run resumes after a clean stop. Bad input is one line, exit 2, and leaves no
run directory behind.
"""

import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import time

import pytest
import reverb
import usage_cases
from processes import summary_steps, wait_for

from common import config as config_lib
from common import tables_dir
from common.reverb import server as reverb_server
from per import agent
from per.config import PerConfig

REPO = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "per.train"]


def run(*args, module=TRAIN, timeout=300, env=None):
    return subprocess.run([*module, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def replay_sizes(output):
    """The replay sizes the progress lines report."""
    return [int(size) for size in re.findall(r"\| replay (\d+) \|", output)]


@pytest.mark.slow
def test_learns_catch_and_evaluates_at_eval_epsilon(tmp_path):
    run_dir = tmp_path / "run"
    result = run("--preset=toy", f"--run_dir={run_dir}", "--seed=3")
    assert result.returncode == 0, result.stdout + result.stderr
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 10_000
    # Random play scores about -0.6; epsilon ends at 0.05. Reverb's sampler takes no seed, and the learner
    # draws its next batch while it learns, so runs differ: 0.78-0.92 in 9 runs of this seed (session 22).
    assert final["mean_return_last_100"] >= 0.7
    header, *rows = (run_dir / "episodes.csv").read_text().splitlines()
    assert header == "frames,episode_return,episode_length,wall_time" and len(rows) > 1000
    assert list((run_dir / "tb").iterdir()) and list((run_dir / "replay").iterdir())
    assert json.loads((run_dir / "config.json").read_text())["replay"] == "proportional"

    evaluated = run(str(run_dir), "--episodes=30", module=[sys.executable, "-m", "per.evaluate"])
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    result = json.loads((run_dir / f"eval_step{final['learner_steps']}.json").read_text())
    assert result["epsilon"] == 0.001 and result["episodes"] == 30 and result["mean_return"] >= 0.8
    assert result["start_protocol"] == "the env's own starts"  # Not Atari's no-op starts: catch has none.


@pytest.mark.slow
def test_a_minatar_preset_trains_through_the_cli_on_its_one_learner_thread(tmp_path):
    """The preset's `learner_threads` is set before TF's first op (set after it, TF raised and the run died)."""
    run_dir = tmp_path / "run"
    result = run("--preset=minatar_ddqn", "--env=minatar:breakout", "--frames=5400", f"--run_dir={run_dir}")
    assert result.returncode == 0, result.stdout + result.stderr
    final = json.loads((run_dir / "final.json").read_text())
    assert final["learner_steps"] >= 90  # After the 5,000-frame fill.
    assert json.loads((run_dir / "config.json").read_text())["learner_threads"] == 1
    # The run ends within the preset's 10 s between lines, and its last line and TensorBoard point are its end.
    lines = [line for line in result.stdout.splitlines() if line.startswith("frames ")]
    assert lines[-1].startswith(f"frames {final['frames']:,}/5,400 ")
    assert max(summary_steps(run_dir, "learner/loss")) == final["frames"]


def returns(run_dir, frames_from=0):
    """Episode returns in episodes.csv, of the episodes logged at or after `frames_from`."""
    _, *rows = (run_dir / "episodes.csv").read_text().splitlines()
    return [float(r.split(",")[1]) for r in rows if int(r.split(",")[0]) >= frames_from]


@pytest.mark.slow
def test_a_resumed_run_does_not_replay_its_first_games(tmp_path):
    """At epsilon 1 the games are the env's and the actor's draws alone: a resume must draw anew."""
    run_dir, explore = tmp_path / "run", ["--config_override=epsilon_start=1", "--config_override=epsilon_end=1"]
    first = run("--preset=toy", f"--run_dir={run_dir}", "--frames=600", *explore)
    assert first.returncode == 0, first.stdout + first.stderr
    opening = returns(run_dir)
    resumed = run(f"--run_dir={run_dir}", "--resume", "--frames=1200")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = returns(run_dir, frames_from=601)
    assert len(opening) >= 40 and len(after) >= 40
    assert after[:40] != opening[:40]  # Catch's returns are +-1: 40 equal by chance has odds 2^-40.
    seeds = [s["seed"] for s in json.loads((run_dir / "provenance.json").read_text())["segments"]]
    assert seeds[0] == 0 and seeds[1] != 0 and json.loads((run_dir / "config.json").read_text())["seed"] == 0


@pytest.mark.slow
def test_resume_keeps_the_replay_and_overwrite_does_not(tmp_path):
    run_dir = tmp_path / "run"
    fast_log = "--config_override=log_every_s=0.5"
    first = run("--preset=toy", f"--run_dir={run_dir}", "--frames=3000", fast_log)
    assert first.returncode == 0, first.stdout + first.stderr
    steps = json.loads((run_dir / "final.json").read_text())["learner_steps"]

    resumed = run(f"--run_dir={run_dir}", "--resume", "--frames=4000", fast_log)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"step {steps}, frames 3,000" in resumed.stdout  # "resumed from ...: step N, frames F"
    assert "Table replay and 3000 items have been successfully loaded" in (run_dir / "replay_server.log").read_text()
    sizes = replay_sizes(resumed.stdout)
    assert sizes and min(sizes) > 3000, resumed.stdout  # Grows from the saved 3000, never from empty.
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 4000 and final["learner_steps"] > steps and final["segments"] == 2

    (run_dir / "replay").rename(tmp_path / "replay_saved")  # Lost (or older than the checkpoint): refill, no hang.
    refilled = run(f"--run_dir={run_dir}", "--resume", "--frames=5000", fast_log)
    assert refilled.returncode == 0, refilled.stdout + refilled.stderr
    assert "warning: the replay holds 0 transitions, the checkpoint 4000" in refilled.stderr
    assert json.loads((run_dir / "final.json").read_text())["learner_steps"] > final["learner_steps"]

    overwritten = run("--preset=toy", f"--run_dir={run_dir}", "--overwrite", "--frames=1500", fast_log)
    assert overwritten.returncode == 0, overwritten.stdout + overwritten.stderr
    assert max(replay_sizes(overwritten.stdout), default=0) <= 1500, overwritten.stdout
    assert json.loads((run_dir / "final.json").read_text())["segments"] == 1


def episode_rows(run_dir):
    path = run_dir / "episodes.csv"
    return len(path.read_text().splitlines()) - 1 if path.exists() else 0


def saved_replay_counts(run_dir):
    """(inserts, samples) of the replay's rate limiter in the run's Reverb checkpoint, and its config."""
    config = config_lib.load(PerConfig, run_dir / "config.json")
    server = reverb_server.make_server(agent.agent_tables(config), checkpoint_dir=run_dir / "replay")
    info = reverb.Client(f"localhost:{server.port}").server_info()[agent.REPLAY_TABLE].rate_limiter_info
    server.stop()
    return info.insert_stats.completed, info.sample_stats.completed, config


@pytest.mark.slow
def test_an_actor_process_fills_the_replay_at_the_limiters_ratio_and_is_restarted_when_killed(tmp_path):
    run_dir = tmp_path / "run"
    # episodes.csv is flushed with each progress line: every 0.5 s here, so the actor's first games show
    # long before the run ends. At the toy preset's 5 s a loaded machine could show them only at the end,
    # when the actor had already gone (a CI failure: no such process).
    process = subprocess.Popen(
        [*TRAIN, "--preset=toy", "--actors=1", f"--run_dir={run_dir}", "--frames=3000",
         "--config_override=log_every_s=0.5"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    wait_for(lambda: episode_rows(run_dir) > 0, what="the actor's first games in episodes.csv")
    victim = int((run_dir / "actor_pids").read_text().split()[0])
    assert process.poll() is None, "the run ended before its actor could be killed"
    os.kill(victim, signal.SIGKILL)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output
    assert f"actor 0 (pid {victim}) exited with -9; restarting" in output
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 3000 and final["actor_restarts"] >= 1
    assert victim not in map(int, (run_dir / "actor_pids").read_text().split())  # It kept the dead actor's PID.
    assert final["episodes"] == episode_rows(run_dir) > 3000 / 12  # Catch: a game every 9 or 10 steps.

    inserts, samples, config = saved_replay_counts(run_dir)
    tolerance, ratio = agent.rate_limiter_tolerance(config), config.samples_per_insert  # Toy: 16 per insert.
    # Frames count what the table had received at the learner's last look. From there to the replay's save the
    # actor may cross the limiter's whole band (2 x tolerance: at the look a learner that waited on the restarted
    # actor had it at the band's bottom), plus the last step's batch and the one drawn ahead.
    ahead = (2 * tolerance + 2 * config.batch_size) / ratio + 1
    assert final["frames"] <= inserts <= final["frames"] + ahead
    drift = ratio * (inserts - config.min_replay_size) - samples
    assert abs(drift) <= tolerance + config.batch_size, (inserts, samples)
    # Learned from every sampled batch but the one drawn ahead and Reverb's in flight.
    assert 0 <= samples - config.batch_size * final["learner_steps"] <= 2 * config.batch_size


@pytest.mark.slow
def test_an_actor_run_resumes_after_a_clean_stop(tmp_path):
    run_dir = tmp_path / "run"
    fast_log = "--config_override=log_every_s=0.5"
    first = run("--preset=toy", "--actors=1", f"--run_dir={run_dir}", "--frames=900", fast_log)
    assert first.returncode == 0, first.stdout + first.stderr
    before = json.loads((run_dir / "final.json").read_text())

    resumed = run(f"--run_dir={run_dir}", "--resume", "--frames=1300", fast_log)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"step {before['learner_steps']}, frames {before['frames']:,}" in resumed.stdout
    log = (run_dir / "replay_server.log").read_text()
    loaded = re.search(r"Table replay and (\d+) items have been successfully loaded", log)
    assert loaded and int(loaded[1]) >= before["frames"], log
    sizes = replay_sizes(resumed.stdout)
    assert sizes and min(sizes) >= before["frames"], resumed.stdout  # Grows from the saved replay.
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 1300 and final["learner_steps"] > before["learner_steps"] and final["segments"] == 2
    assert final["episodes"] == episode_rows(run_dir) > before["episodes"]


@pytest.mark.slow
def test_a_run_that_acted_itself_resumes_with_actor_processes(tmp_path):
    """A run's config.json keeps its num_actors 0 on a resume with --actors 1: its learner's actors, started
    with that config, were refused as actors of a learner that acts itself and restarted every second.

    Neither the learner nor its actor leaves AutoGraph's files in the temporary directory: both end with
    `os._exit`, which skips the exit handler that removes them (a score per process in /tmp before).
    """
    run_dir, temporary = tmp_path / "run", tmp_path / "tmp"
    temporary.mkdir()
    environment = {**os.environ, "TMPDIR": str(temporary)}
    first = run(f"--run_dir={run_dir}", "--frames=600", env=environment)
    assert first.returncode == 0, first.stdout + first.stderr
    # The first line says what trains, the default preset too (a new user's trial: it went unsaid).
    assert first.stdout.startswith(f"per.train: preset toy, toy:catch, 600 frames, seed 0; run directory {run_dir};")
    resumed = run(f"--run_dir={run_dir}", "--resume", "--frames=1200", "--actors=1", env=environment)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.startswith(f"per.train: resumed, toy:catch, 1,200 frames, seed 0; run directory {run_dir};")
    assert json.loads((run_dir / "config.json").read_text())["num_actors"] == 0  # As saved.
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 1200 and final["segments"] == 2
    assert "restarting" not in resumed.stdout + resumed.stderr
    assert "actor 0: stopped by SIGTERM" in (run_dir / "actor_0.log").read_text()
    assert sorted(p.name for p in temporary.iterdir()) == []


@pytest.mark.slow
def test_a_separate_server_saves_the_replay_in_its_tables_dir_and_serves_it_again_on_resume(tmp_path):
    """The multi-machine roles: the learner's checkpoints save the server's tables in --tables_dir, not /tmp.

    Before --tables_dir, each checkpoint of a --role learner wrote the whole
    replay into a temporary directory of the server's that nothing read or removed.
    """
    port = 21000 + os.getpid() % 1000
    quiet = {"cwd": REPO, "capture_output": True, "text": True, "timeout": 120}
    tables, run_dir, temporary = tmp_path / "tables", tmp_path / "run", tmp_path / "tmp"
    temporary.mkdir()
    environment = {**os.environ, "TMPDIR": str(temporary)}

    def serve(*args):
        return subprocess.Popen(
            [*TRAIN, "--role=server", f"--port={port}", f"--tables_dir={tables}", *args], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment, start_new_session=True,
        )  # fmt: skip

    def learn(*args):
        learner = [*TRAIN, "--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={run_dir}"]
        result = subprocess.run(
            [*learner, *args], cwd=REPO, capture_output=True, text=True, timeout=300, env=environment
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    server = serve("--preset=toy")
    try:
        reverb_server.connect(f"localhost:{port}", 120)  # Up before the learner's 30-s wait starts, however loaded.
        learner = [*TRAIN, "--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={run_dir}"]
        other = subprocess.run([*learner, "--preset=toy", "--config_override=alpha=0.3"], **quiet, env=environment)
        usage_cases.assert_one_line_error(
            other, "built table 'replay' with sampler prioritized { priority_exponent: 0.6"
        )
        assert not run_dir.exists()  # Before: it trained, α 0.6 sampling while its config.json said 0.3.
        learn("--preset=toy", "--frames=3000")
        # A new run on the used server: before, it trained on the first run's replay and logged its episodes,
        # and its checkpoints saved the mixed replay over the first run's in --tables_dir.
        second = tmp_path / "second"
        new_run = [*TRAIN, "--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={second}"]
        refused = subprocess.run([*new_run, "--preset=toy", "--frames=3000"], **quiet, env=environment)
        usage_cases.assert_one_line_error(refused, f"serves the run in {run_dir} (its learner's); start a new server")
        assert not second.exists()
        os.killpg(server.pid, signal.SIGINT)
        stopped, _ = server.communicate(timeout=60)
        # It said "run the same command again", which is refused (below): the way on is --resume.
        assert (
            server.returncode == 130
            and f"are in {tables}: serve them again with the same command and --resume" in stopped
        )
        assert "portpicker" not in stopped, stopped  # "Returning a port that wasn't given by portpicker".
        saved = tables_dir.saved(tables)
        assert len(saved) == 1 and (saved[0] / "DONE").exists(), saved
        again = run("--role=server", "--preset=toy", f"--tables_dir={tables}", timeout=120)
        usage_cases.assert_one_line_error(again, "pass --resume to serve them, or --overwrite")
        other = run("--role=server", f"--tables_dir={tables}", "--resume", "--config_override=replay_capacity=5000")
        usage_cases.assert_one_line_error(other, "saved config: replay_capacity would change from 10000 to 5000")

        server = serve("--resume")
        reverb_server.connect(f"localhost:{port}", 120)
        resumed = learn("--resume", "--frames=4000", "--config_override=log_every_s=0.5")
        sizes = replay_sizes(resumed.stdout)
        assert sizes and min(sizes) > 3000, resumed.stdout  # Grows from the saved replay, never from empty.
        assert json.loads((run_dir / "final.json").read_text())["segments"] == 2
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    output, _ = server.communicate(timeout=60)
    # The claim of the run is saved with the replay, so its own learner may resume on it (and no other run's).
    assert f"serving the tables saved in {saved[0]}: episodes 0, params 0, replay 3000, run 1 items" in output, output
    assert [p.name for p in temporary.iterdir() if "reverb" in p.name] == []


BAD_INPUT = [
    (["--config_override=replay=sorted"], "unknown replay variant 'sorted'; accepted: proportional, rank"),
    (["--config_override=alpha=-0.5"], "alpha=-0.5: must be in [0, 1]"),
    (["--config_override=alpha=60"], "alpha=60.0: must be in [0, 1] (0 samples uniformly, 1 by priority alone)"),
    (["--config_override=beta0=0.9", "--config_override=beta_final=0.5"], "beta_final=0.5 < beta0=0.9"),
    (["--config_override=beta0=1.5"], "beta0=1.5: must be in [0, 1]"),
    (["--config_override=replay_capacity=16"], "replay_capacity=16 must hold at least batch_size=32"),
    (["--config_override=replay_capacity=400"], "and min_replay_size=500 transitions"),
    # A TypeError from Reverb's bindings before (a new user's trial).
    (["--config_override=replay_capacity=1e11"], "replay_capacity=100000000000: must be at most 2,147,483,647"),
    (["--preset=minatar_ddqn", "--env=atari:pong"], "choose a preset for atari: atari_ddqn, atari_ddqn_rank, atari"),
    (["--preset=atari_ddqn_prop", "--env=minatar:breakout"], "network 'nature_dqn' is the atari network"),
    (["--preset=minatar_ddqn", "--env=toy:catch"], "the env is toy:catch; choose a preset for toy: toy"),
    (["--config_override=network=nature_dqn"], "network 'nature_dqn' is the atari network"),
    (["--config_override=min_replay_size=10", "--config_override=update_period=16"], "raise min_replay_size"),
    (["--actors=-1"], "num_actors=-1: must be >= 0"),
    (["--config_override=learner_threads=-1"], "learner_threads=-1: must be >= 0"),
    (["--config_override=alpha=nan"], "option alpha='nan': expected a finite number"),  # NaN < 0 is false.
    (["--seed=-1"], "flag --seed=-1: -1 is not an integer in the range [0, 2147483647]"),
    (["--preset=atari_ddqn_sorted"], "value should be one of <atari_ddqn|atari_ddqn_rank"),
    (["--seed=5000000000"], "flag --seed=5000000000: 5000000000 is not an integer in the range [0, 2147483647]"),
    (["--config_override=seed=-1"], "seed=-1: must be in [0, 2147483647]"),
    (["--frames=1e20"], "--frames=1e+20: must be a whole number of frames in [1, 1e+15]"),
    (["--frames=abc"], "flag --frames=abc: 'abc' is not a number of frames; expected a whole number, e.g. 5e6"),
    (["--frames=2000", "--config_override=total_frames=3000"], "--frames and --config_override total_frames"),
    (["--config_override=checkpoint_every_s=0"], "checkpoint_every_s=0.0: must be > 0 seconds"),
    (["--config_override=log_every_s=-1"], "log_every_s=-1.0: must be > 0 seconds"),
    (["--config_override=rmsprop_decay=2"], "rmsprop_decay=2.0: must be in [0, 1)"),
    (["--config_override=rmsprop_momentum=-1"], "rmsprop_momentum=-1.0: must be in [0, 1)"),
    (["--config_override=rmsprop_epsilon=0"], "rmsprop_epsilon=0.0: must be > 0"),
    (["--preset=minatar_ddqn", "--config_override=alpha=0.5"], "alpha=0.5 with replay=uniform"),
    (["--tables_dir=tables"], "with --role all the tables are saved in RUN_DIR/replay"),
]
# Each in a process of its own, as a user runs it: a `UsageError` and the flag
# parser's error. The others share one process (`in_one_process`).
OWN_PROCESS = {("--config_override=replay=sorted",), ("--preset=atari_ddqn_sorted",)}


@pytest.mark.slow
def test_a_separate_learner_stops_when_interrupted_or_its_server_goes_and_says_how_to_continue(tmp_path):
    """A new user's trial: a learner whose server went away hung for good, deaf to Ctrl-C and SIGTERM, and an
    interrupted learner's hint (`--run_dir R --resume`) resumed it as --role all, with an empty replay."""
    port = 22000 + os.getpid() % 1000
    run_dir = tmp_path / "run"
    resume = f"continue with python -m per.train --role learner --replay_address localhost:{port} --run_dir {run_dir}"

    def start(*args):
        return subprocess.Popen(
            [*TRAIN, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip

    server = start("--role=server", f"--port={port}", "--preset=toy", f"--tables_dir={tmp_path / 'tables'}")
    learner_args = ["--role=learner", f"--replay_address=localhost:{port}", f"--run_dir={run_dir}"]
    learner = None
    try:
        reverb_server.connect(f"localhost:{port}", 120)
        learner = start(*learner_args, "--preset=toy", "--frames=1000000")
        wait_for(lambda: episode_rows(run_dir) > 0, what="the learner to play")
        learner.send_signal(signal.SIGINT)
        output, _ = learner.communicate(timeout=120)
        assert learner.returncode == 130 and resume in output, output

        played = episode_rows(run_dir)
        learner = start(*learner_args, "--resume", "--connect_timeout_s=5")
        wait_for(lambda: episode_rows(run_dir) > played, what="the resumed learner to play")
        os.killpg(server.pid, signal.SIGKILL)
        gone = time.monotonic()
        _, stderr = learner.communicate(timeout=120)
        assert learner.returncode == 1, stderr
        assert time.monotonic() - gone < 30, "the learner waited on a vanished server"
        # Its watchdog ("Reverb server unreachable for 5s") or a failed call ("lost the Reverb server") tells first.
        assert "stopping (the run keeps its last checkpoint); once the server is back, " + resume in stderr, stderr
        assert "Traceback" not in stderr, stderr
    finally:
        for process in (server, learner):
            if process and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_hand_started_actor_blocked_in_reverb_stops_on_ctrl_c_and_when_its_server_goes(tmp_path):
    """An actor waiting in a Reverb call (a learner's parameters, or a rate limiter with no learner sampling)
    never ran Python's Ctrl-C handler: a new user's SIGINT was lost until SIGTERM. One whose server has gone
    exits (its watchdog probes the server's port)."""
    port = 23000 + os.getpid() % 1000
    server = subprocess.Popen(
        [*TRAIN, "--role=server", f"--port={port}", "--preset=toy", f"--tables_dir={tmp_path / 'tables'}"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    actor = None

    def act() -> subprocess.Popen:
        process = subprocess.Popen(
            [*TRAIN, "--role=actor", f"--replay_address=localhost:{port}", "--preset=toy", "--actors=1"], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        assert select.select([process.stdout], [], [], 120)[0], "the actor said nothing"
        assert process.stdout.readline() == f"actor 0: acting into the Reverb server at localhost:{port}\n"
        time.sleep(5)  # Blocked in Reverb: on the learner's first parameters, which never come.
        return process

    try:
        reverb_server.connect(f"localhost:{port}", 120)  # Up first: else the actor's first line says it waits.
        actor = act()
        actor.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        _, stderr = actor.communicate(timeout=60)
        assert actor.returncode == 130 and "actor 0: stopped by SIGINT" in stderr, stderr
        assert time.monotonic() - signalled < 10

        actor = act()
        os.killpg(server.pid, signal.SIGKILL)
        _, stderr = actor.communicate(timeout=120)
        assert actor.returncode == 1 and "actor 0: Reverb server unreachable for 30s; exiting" in stderr, stderr
    finally:
        for process in (server, actor):
            if process and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


# The server's flags: given without the harness's --run_dir, which a server refuses.
ROLE_INPUT = [
    (["--role=server"], "per's --role server needs --tables_dir DIR"),
    # A trial: the refused --run_dir was the mistake, but the server asked for the --tables_dir it lacked.
    (["--role=server", "--run_dir=runs/new"], "--run_dir is for --role all or --role learner; --role server does"),
    (["--role=learner", "--replay_address=localhost:1", "--tables_dir=tables"], "--tables_dir is for --role server;"),
    (["--role=actor", "--replay_address=localhost:1", "--resume"], "--resume is for --role all or --role learner or"),
    (["--role=server", "--tables_dir="], "--tables_dir is empty: give a directory"),
    (["--role=server", "--tables_dir=no_tables", "--resume"], "--tables_dir no_tables does not exist"),
    (["--role=server", "--tables_dir=tables", "--segment=0"], "--segment is for --role actor; --role server does"),
    (["--role=learner", "--replay_address=localhost:1", "--actor_id=3"], "--actor_id is for --role actor;"),
    # A trial's actor for a learner that acts itself inserted beside it, unasked, until stopped.
    # And a trial's actor for a resumed learner's --actors, which config.json does not record, was told to do
    # what it had done: the way on is the learner's --actors beside the config.
    (["--role=actor", "--replay_address=localhost:1"], "give the actor the --actors N that its learner was started"),
    # A trial: a port out of range waited for a server for 30 s, a missing one was found after TF loaded.
    (
        ["--role=learner", "--replay_address=localhost:99999"],
        "--replay_address=localhost:99999: expected HOST:PORT " "with a port in 1..65535",
    ),
    (["--role=actor", "--replay_address=localhost"], "--replay_address=localhost: expected HOST:PORT"),
]


@pytest.fixture(scope="module")
def roles_in_one_process(tmp_path_factory) -> dict[tuple[str, ...], tuple[usage_cases.Outcome, pathlib.Path]]:
    cases = [tuple(args) for args, _ in ROLE_INPUT]
    return usage_cases.run_cases("per.train", cases, tmp_path_factory.mktemp("role_input"), run_dir_flag=False)


@pytest.mark.parametrize("args, fragment", ROLE_INPUT)
def test_a_role_flag_is_one_line_exit_2_and_creates_nothing(roles_in_one_process, args, fragment):
    usage_cases.assert_one_line_error(roles_in_one_process[tuple(args)][0], fragment)
    assert not (REPO / "tables").exists() and not (REPO / "no_tables").exists()


@pytest.fixture(scope="module")
def in_one_process(tmp_path_factory) -> dict[tuple[str, ...], tuple[usage_cases.Outcome, pathlib.Path]]:
    """The bad-input cases not in OWN_PROCESS, through `per.train`'s own `cli.run(main)`, in one process."""
    cases = [tuple(args) for args, _ in BAD_INPUT if tuple(args) not in OWN_PROCESS]
    return usage_cases.run_cases("per.train", cases, tmp_path_factory.mktemp("bad_input"))


@pytest.mark.parametrize("args, fragment", BAD_INPUT)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, in_one_process, args, fragment):
    """One line naming the problem, exit status 2, no traceback, and no run directory.

    The OWN_PROCESS cases run `python -m per.train` each; the others run
    through the same `cli.run(main)` in one shared process (`usage_cases`),
    which spares a TensorFlow import per case.
    """
    if tuple(args) in OWN_PROCESS:
        run_dir = tmp_path / "run"
        result = run(f"--run_dir={run_dir}", *args, timeout=120)
    else:
        result, run_dir = in_one_process[tuple(args)]
    usage_cases.assert_one_line_error(result, fragment)
    assert not run_dir.exists()
