"""The benchmark-suite driver (`python -m reproduce.suite`) and its aggregation.

Entry points run as subprocesses (their absl flags would collide in-process);
the pure helpers (`_plan`, `_stats`) are tested directly.
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.stats
from processes import alive, checkpoint_steps, episodes_logged, ignore_sigint, kill_processes_mentioning, wait_for

from common.errors import UsageError
from reproduce import REPO_ROOT
from reproduce.suite import _job, _plan, _stats

TOY = ["--agent=impala", "--preset=toy", "--suite=toy:catch,minatar:breakout", "--frames=3000"]
TIMEOUT_S = 850


def _suite(*args: str, module: str = "reproduce.suite") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)


def _suite_config(**changes) -> _plan.Suite:
    fields = dict(agent="impala", preset="toy", suite="x", games=("toy:catch", "minatar:breakout"), seeds=(0, 1))
    return _plan.Suite(**{**fields, "frames": 3000, "eval_episodes": 0, **changes})


def _finish(run_dir: pathlib.Path, steps: int, mean_return: float | None, frames: int = 3000, wall: float = 10.0):
    """A run directory as training and evaluation leave it (only the files the suite reads)."""
    run_dir.mkdir(parents=True)
    final = {"frames": frames, "learner_steps": steps, "wall_time_s": wall}
    (run_dir / "final.json").write_text(json.dumps(final))
    if mean_return is not None:
        (run_dir / f"eval_step{steps}.json").write_text(json.dumps({"mean_return": mean_return, "episodes": 5}))


@pytest.mark.parametrize("text", ["1", "1/1", "-1/2", "a/b", "2/1", "0/0", " 0/2"])
def test_malformed_shards_are_usage_errors(text):
    with pytest.raises(UsageError, match="--shard"):
        _plan.parse_shard(text)


def test_shards_partition_the_jobs():
    suite = _suite_config(seeds=(0, 1, 2))
    every = _plan.jobs(suite)
    assert len(every) == 6 and every[:2] == [_plan.Job("toy:catch", 0), _plan.Job("minatar:breakout", 0)]
    shards = [_plan.jobs(suite, _plan.parse_shard(f"{i}/4")) for i in range(4)]
    assert sorted(job for shard in shards for job in shard) == sorted(every)
    assert [len(shard) for shard in shards] == [2, 2, 1, 1]


def test_state_needs_the_evaluation_of_the_final_checkpoint(tmp_path):
    assert _plan.state(tmp_path / "never") == "todo"
    (tmp_path / "started").mkdir()
    assert _plan.state(tmp_path / "started") == "partial"
    _finish(tmp_path / "trained", steps=7, mean_return=None)
    (tmp_path / "trained" / "eval_step3.json").write_text("{}")  # An older checkpoint's evaluation.
    assert _plan.state(tmp_path / "trained") == "partial"
    _finish(tmp_path / "done", steps=7, mean_return=0.5)
    assert _plan.state(tmp_path / "done") == "done" and _plan.evaluation(tmp_path / "done")["mean_return"] == 0.5


def test_frame_rate_is_measured_from_finished_runs_else_a_default(tmp_path):
    suite = _suite_config()
    assert _plan.frame_rate(suite, tmp_path) == _plan.TOY_RATE  # The slowest family (toy: start-up bound) sets it.
    _finish(tmp_path / "catch_s0", steps=1, mean_return=1.0, frames=3000, wall=10.0)
    _finish(tmp_path / "breakout_s1", steps=1, mean_return=1.0, frames=1000, wall=30.0)
    rate, source = _plan.frame_rate(suite, tmp_path)
    assert rate == pytest.approx(4000 / 40) and "measured" in source
    assert _plan.estimate_s(pending=3, frames=1000, rate=100.0, parallel=2) == 20.0  # 2 rounds of 10 s.


def test_the_eta_counts_a_resumed_job_only_until_a_fresh_one_finishes():
    assert _plan.remaining_s([], remaining=3, parallel=1) is None
    resumed = (60.0, False)  # A job that only had its evaluation left.
    assert _plan.remaining_s([resumed], remaining=3, parallel=1) == 180.0
    assert _plan.remaining_s([resumed, (600.0, True), (400.0, True)], remaining=3, parallel=2) == 750.0


def test_a_suite_directory_keeps_its_agent_preset_and_budget(tmp_path):
    saved = _suite_config(seeds=(0,))
    with pytest.raises(UsageError, match="preset=toy, not minatar"):
        _plan.check_same(saved, _suite_config(preset="minatar"), tmp_path)
    with pytest.raises(UsageError, match="frames"):
        _plan.check_same(saved, _suite_config(frames=10), tmp_path)
    merged = _plan.merge(saved, _suite_config(games=("toy:catch",), seeds=(2, 0)))
    assert merged.games == saved.games and merged.seeds == (0, 2)


def test_a_suite_directory_takes_more_games_of_its_families_but_no_other_family(tmp_path):
    saved = _suite_config(suite="minatar:breakout", games=("minatar:breakout",))
    _plan.check_same(saved, _suite_config(suite="minatar", games=("minatar:breakout", "minatar:asterix")), tmp_path)
    dmlab = _suite_config(suite="dmlab30", games=("dmlab:dmlab30",))
    with pytest.raises(UsageError, match=r"holds a suite of minatar games \(minatar:breakout\), not dmlab \(dmlab30\)"):
        _plan.check_same(saved, dmlab, tmp_path)


def test_normalisation_per_family():
    assert _stats.normalized("impala", "minatar:breakout", 20.6) == pytest.approx(2.0)  # Young & Tian DQN: 10.3.
    assert _stats.normalized("impala", "toy:catch", -0.5) == -0.5
    # Pong: random -20.7, human 14.6 in the no-op table.
    assert _stats.normalized("impala", "atari:pong", 14.6) == pytest.approx(1.0)


def test_aggregates_match_their_definitions():
    """Agarwal et al. 2021: median over games of the per-game mean over runs; IQM = 25%-trimmed mean of all
    runs; CIs from a stratified bootstrap over runs, which collapse when every run of a game agrees."""
    matrix = np.array([[0.1, 2.0, 0.5, 0.3], [0.3, 4.0, 0.7, 0.1]])  # [seeds, games]
    rows = {row["statistic"]: row for row in _stats.aggregates(matrix, reps=100)}
    assert rows["median"]["value"] == pytest.approx(np.median(matrix.mean(axis=0)))
    assert rows["mean"]["value"] == pytest.approx(matrix.mean())
    assert rows["iqm"]["value"] == pytest.approx(scipy.stats.trim_mean(matrix.ravel(), 0.25))
    assert rows["mean_capped"]["value"] == pytest.approx(np.minimum(matrix, 1.0).mean())
    for row in rows.values():
        assert row["ci_low"] <= row["value"] <= row["ci_high"]
    constant = {row["statistic"]: row for row in _stats.aggregates(np.tile(matrix[:1], (3, 1)), reps=50)}
    assert constant["mean"]["ci_low"] == pytest.approx(constant["mean"]["ci_high"])
    # Where the definitions part: the per-game means (0, 1, 6) have median 1, all nine runs' median is 0.6;
    # each run capped at human (1), then averaged, gives 5.1 / 9, each game's mean capped would give 2 / 3,
    # and a floor at 0 (the run below random) 0.6.
    apart = np.array([[0.0, 0.5, 5.0], [-0.3, 1.9, 6.0], [0.3, 0.6, 7.0]])
    rows = {row["statistic"]: row for row in _stats.aggregates(apart, reps=20)}
    assert rows["median"]["value"] == pytest.approx(1.0)
    assert rows["mean_capped"]["value"] == pytest.approx((0.0 + 0.5 + 1 - 0.3 + 1 + 1 + 0.3 + 0.6 + 1) / 9)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--agent=dqn", *TOY[1:]], "agent"),
        # absl's "flag --frames=None: Flag --frames must have a value other than None." said nothing of a value.
        (TOY[:3], "missing required flag: --frames (Frame budget of every run, e.g. 2e6)"),
        (TOY[3:], "missing required flags: --agent (<impala|ddqn|laser>: Agent: "),
        ([*TOY[:2], "--suite=nope", TOY[3]], "unknown suite 'nope'"),
        (["--agent=ddqn", "--preset=toy", "--suite=dmlab30", TOY[3]], "only impala does; use --agent impala"),
        ([*TOY[:2], "--suite=toy:catch,toy:nope", TOY[3]], "unknown toy name 'nope'"),
        ([*TOY, "--shard=2/2"], "--shard"),
        ([*TOY, "--seeds=0"], "--seeds=0: must be >= 1"),
        ([*TOY[:3], "--frames=0"], "--frames=0: must be a whole number of frames in [1, 1e+15], e.g. 2e6"),
        # Each job refused these, failed twice, and suite.json then held the directory to the bad suite.
        ([*TOY[:3], "--frames=1e16"], "--frames=1e16: must be a whole number of frames in [1, 1e+15]"),
        (
            ["--agent=ddqn", "--preset=minatar_ddqn", "--suite=atari:pong", TOY[3]],
            "--preset=minatar_ddqn: its "
            "network 'minatar' does not fit atari:pong's observations; a suite takes one preset, so give one made for "
            "atari (atari_ddqn, atari_ddqn_rank, atari_ddqn_prop), a suite per env family",
        ),
        ([*TOY, "--jobs=0"], "--jobs=0: must be >= 1"),
        ([*TOY, "--eval_episodes=-1"], "--eval_episodes=-1: must be >= 0"),
        ([*TOY, "--cpus_per_job=2"], "--cpus_per_job is for --engine=ray; leave it out with --engine=local"),
        ([*TOY, "--engine=ray", "--ray_address=127.0.0.1:6379", "--jobs=2"], "--jobs is for --engine=local (Ray"),
        (["--agent=impala", "--preset=toy_laser", *TOY[2:]], "unknown impala preset 'toy_laser'"),
        # Each job failed twice, the reason in its log; suite.json recorded a suite the fix could not resume.
        (["--agent=impala", "--preset=dmlab30", "--suite=dmlab30", TOY[3]], "DeepMind Lab is not installed"),
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(tmp_path, args, message):
    result = _suite(*args, f"--suite_dir={tmp_path / 'suite'}")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert not (tmp_path / "suite").exists()


def test_dmlab30_is_planned_where_deepmind_lab_is_installed(tmp_path, fake_lab):
    result = _suite("--agent=impala", "--preset=dmlab30", "--suite=dmlab30", "--frames=1e4", "--dry_run",
                    f"--suite_dir={tmp_path}")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "dmlab30_s0" in result.stdout


def test_a_dry_run_plans_a_dmlab_suite_without_deepmind_lab_and_writes_nothing(tmp_path):
    """It only plans (for a cluster, say, whose machines have the lab): the lab's check is for a start."""
    suite_dir = tmp_path / "suite"
    result = _suite("--agent=impala", "--preset=dmlab30", "--suite=dmlab30", "--frames=1e4", "--dry_run",
                    f"--suite_dir={suite_dir}")  # fmt: skip
    assert result.returncode == 0 and "dmlab30_s0" in result.stdout, result.stderr
    assert not suite_dir.exists()


def test_a_suite_directory_that_is_a_file_is_refused_and_kept(tmp_path):
    """A FileExistsError traceback before (seen in a new user's trial)."""
    path = tmp_path / "notes.txt"
    path.write_text("mine\n")
    result = _suite(*TOY, f"--suite_dir={path}")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f"{path} is a file, not a suite directory" in result.stderr and path.read_text() == "mine\n"


def test_a_suite_directory_of_another_preset_is_refused(tmp_path):
    _plan.save_suite(_suite_config(preset="minatar"), tmp_path)
    before = (tmp_path / "suite.json").read_text()
    result = _suite(*TOY, f"--suite_dir={tmp_path}")
    assert result.returncode == 2 and "preset=minatar, not toy" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (tmp_path / "suite.json").read_text() == before and sorted(tmp_path.iterdir()) == [tmp_path / "suite.json"]


@pytest.mark.slow
def test_toy_suite_runs_skips_retries_and_aggregates(tmp_path):
    suite_dir = tmp_path / "suite"
    args = [*TOY, "--eval_episodes=5", "--jobs=2", f"--suite_dir={suite_dir}"]
    # A job whose run directory holds a corrupt config.json is resumed, fails, is retried once and fails
    # again; the other job finishes. (One seed: the aggregates' maths over seeds is tested above.)
    broken = suite_dir / "breakout_s0"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{not json")
    first = _suite(*args)
    assert first.returncode == 1, first.stdout + first.stderr
    log = suite_dir / "logs" / "breakout_s0.log"
    assert f"breakout_s0: failed with exit status 2 (attempt 1), log {log}; retrying once" in first.stderr
    assert "breakout_s0: failed with exit status 2 (attempt 2)" in first.stderr
    assert "failed twice: breakout_s0" in first.stderr
    assert log.read_text().count("== attempt") == 2 and "--resume" in log.read_text()
    assert _plan.state(suite_dir / "catch_s0") == "done"

    saved = (suite_dir / "suite.json").read_text()
    dry = _suite(*args, "--dry_run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count(" done ") == 1 and " partial " in dry.stdout and "1 to run" in dry.stdout
    assert "measured from this suite's finished runs" in dry.stdout
    assert (suite_dir / "suite.json").read_text() == saved

    shutil.rmtree(broken)
    second = _suite(*args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("done earlier, kept") == 1 and "breakout_s0: done" in second.stdout
    third = _suite(*args)
    assert third.returncode == 0 and third.stdout.count("done earlier, kept") == 2 and "started" not in third.stdout

    aggregate = _suite(str(suite_dir), "--reps=100", module="reproduce.suite.aggregate")
    assert aggregate.returncode == 0, aggregate.stderr
    with open(suite_dir / "per_game.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["game"], r["seed"]) for r in rows) == [("breakout", "0"), ("catch", "0")]
    for row in rows:
        run_dir = suite_dir / f"{row['game']}_s{row['seed']}"
        final = json.loads((run_dir / "final.json").read_text())
        evaluated = json.loads((run_dir / f"eval_step{final['learner_steps']}.json").read_text())
        assert float(row["score"]) == evaluated["mean_return"] and int(row["frames"]) == final["frames"] >= 3000
        reference = 10.3 if row["game"] == "breakout" else 1.0  # Young & Tian's DQN; Catch's maximum.
        assert float(row["normalized"]) == pytest.approx(evaluated["mean_return"] / reference)
    with open(suite_dir / "aggregate.csv", newline="") as f:
        summary = {r["statistic"]: r for r in csv.DictReader(f)}
    assert {"median", "mean", "iqm"} <= set(summary) and set(next(iter(summary.values()))) == {
        "statistic", "value", "ci_low", "ci_high"
    }  # fmt: skip
    assert float(summary["mean"]["value"]) == pytest.approx(np.mean([float(r["normalized"]) for r in rows]))
    assert "Young & Tian" in (suite_dir / "aggregate.md").read_text()
    assert (suite_dir / "per_game.png").stat().st_size and (suite_dir / "aggregate.png").stat().st_size


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_driver_alone_checkpoints_the_running_job(tmp_path, signum):
    """`kill -INT DRIVER` or `kill DRIVER` (not a terminal's Ctrl-C to the whole group) stops the job with a
    checkpoint, also when the driver started with SIGINT ignored."""
    suite_dir = tmp_path / "suite"
    args = ["--agent=impala", "--preset=toy", "--suite=toy:catch", "--frames=1e7", f"--suite_dir={suite_dir}"]
    driver = subprocess.Popen(
        [sys.executable, "-m", "reproduce.suite", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=ignore_sigint,
    )  # fmt: skip
    run_dir = suite_dir / "catch_s0"
    try:
        wait_for(lambda: episodes_logged(run_dir), what="the job's first episodes")
        driver.send_signal(signum)
        output, _ = driver.communicate(timeout=120)
        assert driver.returncode == 128 + signum and "interrupted: run the same command to resume" in output, output
        assert "interrupted: saved checkpoint at step" in (suite_dir / "logs" / "catch_s0.log").read_text()
        assert max(checkpoint_steps(run_dir)) > 0 and not (run_dir / "final.json").exists()
        actors = [int(pid) for pid in (run_dir / "actor_pids").read_text().split()]
        wait_for(lambda: not any(alive(pid) for pid in actors), timeout=30, what="the job's actors to exit")
    finally:  # After a failure, nothing of the suite may outlive the test.
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        kill_processes_mentioning(str(suite_dir))


def test_the_suite_package_is_not_a_reproduce_study():
    result = _suite("--only=suite", module="reproduce")
    assert result.returncode == 2 and "no reproduce script matches --only='suite'" in result.stderr


def test_a_suite_directory_keeps_its_evaluation_protocol(tmp_path):
    """Runs evaluated over 5 episodes and over the paper's protocol would be aggregated as one suite."""
    with pytest.raises(UsageError, match="eval_episodes=0, not 5"):
        _plan.check_same(_suite_config(), _suite_config(eval_episodes=5), tmp_path)


def test_a_game_named_twice_is_refused_as_its_runs_would_share_a_directory():
    with pytest.raises(UsageError, match="a game appears twice"):
        _plan.resolve_suite("toy:catch,toy:catch")


DRIVER = textwrap.dedent(
    """
    import json, os, pathlib, signal, sys
    from absl import flags
    from reproduce.suite import __main__ as driver

    statuses, slots, stop = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "stop"
    started, running, most, interrupted, fresh = [], set(), [0], [], []

    class Fake:
        def slots(self):
            return slots
        def start(self, command, log):  # [python, -m, reproduce.suite._job, agent, RUN_DIR, episodes, *train_flags]
            run_dir = pathlib.Path(command[4])
            attempt = sum(s["job"] == run_dir.name for s in started) + 1
            started.append({"job": run_dir.name, "flags": command[6:]})
            handle = [f"{run_dir.name}#{attempt}", run_dir, 0]
            running.add(handle[0])
            most[0] = max(most[0], len(running))
            return handle
        def status(self, handle):  # Running at the first poll, then ended with the job's status for its attempt.
            if stop and len(running) == slots:
                os.kill(os.getpid(), signal.SIGTERM)
            name, attempt = handle[0].split("#")
            handle[2] += 1
            if handle[2] < 2:
                return None
            status = statuses.get(name, [0, 0])[int(attempt) - 1]
            if status == 0:
                handle[1].mkdir(parents=True, exist_ok=True)
                final = {"frames": 3000, "learner_steps": 5, "wall_time_s": 1.0}
                (handle[1] / "final.json").write_text(json.dumps(final))
                (handle[1] / "eval_step5.json").write_text(json.dumps({"mean_return": 1.0, "episodes": 1}))
            running.discard(handle[0])
            return status
        def interrupt(self, handles):
            interrupted.extend(h[0] for h in handles)

    def remaining_s(durations, remaining, parallel):
        fresh.append([f for _, f in durations])
        return None

    driver.POLL_S = 0.0
    driver._engine = lambda suite: Fake()
    driver._plan.remaining_s = remaining_s
    argv = flags.FLAGS(["reproduce.suite", *sys.argv[4:]])
    try:
        driver.main(argv)
        code = 0
    except SystemExit as exit:
        code = exit.code
    print("RESULT " + json.dumps({"code": code, "started": started, "most": most[0], "interrupted": interrupted,
                                  "fresh": fresh}))
    """
)
FAKE_ENGINE_FLAGS = ["--agent=impala", "--preset=toy", "--frames=3e3"]


def drive(suite_dir: pathlib.Path, *args: str, statuses=None, slots=2, stop=False) -> tuple[dict, str]:
    """`reproduce.suite`'s main with an engine of `slots` whose jobs end with `statuses` ({job: [attempt 1's,
    attempt 2's]}, default 0) after one poll reporting them running; `stop` sends SIGTERM once every slot is busy.

    Returns the driver's exit code, the jobs it started (with their flags), the most running at once, the handles
    it interrupted and the fresh flags of the durations it gave the ETA; and its output.
    """
    command = [sys.executable, "-c", DRIVER, json.dumps(statuses or {}), str(slots), "stop" if stop else "go"]
    command += [*FAKE_ENGINE_FLAGS, f"--suite_dir={suite_dir}", *args]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, result.stdout + result.stderr
    return json.loads(lines[0].removeprefix("RESULT ")), result.stdout + result.stderr


def _jobs(result: dict) -> list[str]:
    return [s["job"] for s in result["started"]]


def test_each_job_trains_its_own_seed_at_the_suites_budget_and_a_job_failing_twice_exits_1(tmp_path):
    suite = tmp_path / "suite"
    result, out = drive(suite, "--suite=toy:catch,minatar:breakout", "--seeds=2", statuses={"catch_s1": [1, 1]})
    assert result["code"] == 1, out
    assert "1 job(s) failed twice: catch_s1" in out
    assert sorted(_jobs(result)) == ["breakout_s0", "breakout_s1", "catch_s0", "catch_s1", "catch_s1"]  # Retried.
    for s in result["started"]:
        assert f"--seed={s['job'][-1]}" in s["flags"] and "--frames=3000" in s["flags"], s


def test_a_job_killed_by_a_signal_is_a_failure_not_done(tmp_path):
    """Catches `status <= 0` taken for success: a job the OOM killer ends (status -9) must be retried, then fail."""
    result, out = drive(tmp_path, "--suite=toy:catch", statuses={"catch_s0": [-9, -9]})
    assert result["code"] == 1 and _jobs(result) == ["catch_s0", "catch_s0"], out
    assert "failed with exit status -9 (attempt 1)" in out and "1 job(s) failed twice: catch_s0" in out


def test_the_progress_line_counts_failed_jobs_apart_from_done_ones(tmp_path):
    """Catches a job that failed twice counted among those done."""
    result, out = drive(tmp_path, "--suite=toy:catch,minatar:breakout", statuses={"catch_s0": [1, 1]})
    assert result["code"] == 1, out
    progress = [line for line in out.splitlines() if line.startswith("jobs ")]
    assert progress[-1].startswith("jobs 1/2 done | 0 running | 1 failed |"), out


def test_no_more_jobs_run_at_once_than_the_engine_has_slots(tmp_path):
    """Catches `len(running) <= slots`, which starts one job more than the engine holds."""
    result, out = drive(tmp_path, "--suite=toy:catch,minatar:breakout", "--seeds=2", slots=1)
    assert result["code"] == 0 and len(result["started"]) == 4, out
    assert result["most"] == 1


def test_a_done_job_is_kept_and_a_started_one_resumed(tmp_path):
    suite = tmp_path / "suite"
    result, out = drive(suite, "--suite=toy:catch,minatar:breakout")
    assert result["code"] == 0 and sorted(_jobs(result)) == ["breakout_s0", "catch_s0"], out
    (suite / "breakout_s0" / "eval_step5.json").unlink()  # Trained but not evaluated: partial, not done.
    result, out = drive(suite, "--suite=toy:catch,minatar:breakout")
    assert result["code"] == 0 and _jobs(result) == ["breakout_s0"], out
    assert "catch_s0: done earlier, kept" in out


def test_the_eta_knows_which_jobs_started_from_nothing(tmp_path):
    """Catches every job counted as fresh: a resumed job's short time would shorten the ETA."""
    (tmp_path / "breakout_s0").mkdir()  # Started earlier: partial.
    result, out = drive(tmp_path, "--suite=toy:catch,minatar:breakout", slots=1)
    assert result["code"] == 0, out
    assert result["fresh"][-1] == [True, False]  # catch_s0 (from nothing), then breakout_s0 (resumed).


def test_a_smaller_command_keeps_the_suites_earlier_games_and_seeds(tmp_path):
    """suite.json lists every game and seed the directory holds: the aggregate reads it."""
    suite = tmp_path / "suite"
    drive(suite, "--suite=toy:catch,minatar:breakout", "--seeds=2")
    result, out = drive(suite, "--suite=toy:catch", "--seeds=1")
    assert result["code"] == 0 and result["started"] == [], out
    saved = _plan.load_suite(suite)
    assert saved.games == ("toy:catch", "minatar:breakout") and saved.seeds == (0, 1)


def test_a_stopped_suite_interrupts_every_running_job_and_exits_128_plus_the_signal(tmp_path):
    """Catches the stop leaving the running jobs uninterrupted (their runs would save no checkpoint)."""
    result, out = drive(tmp_path / "suite", "--suite=toy:catch,minatar:breakout", stop=True)
    assert result["code"] == 128 + 15, out
    assert sorted(result["interrupted"]) == ["breakout_s0#1", "catch_s0#1"]
    assert "interrupted: run the same command to resume" in out


def test_a_dry_run_starts_nothing(tmp_path):
    """Catches `--dry_run` listing the jobs and then running them."""
    result, out = drive(tmp_path / "suite", "--suite=toy:catch,minatar:breakout", "--dry_run")
    assert result["code"] == 0 and result["started"] == [], out
    assert "2 job(s): 0 done, 2 to run" in out and not (tmp_path / "suite" / "suite.json").exists()


def test_a_ray_job_declares_a_cpu_for_its_learner_and_one_per_actor():
    """Catches the learner's CPU left out of what a Ray task declares (nodes then take one job too many)."""
    script = textwrap.dedent(
        """
        from absl import flags
        from impala.config import PRESETS
        from reproduce.suite import __main__ as driver

        flags.FLAGS(["reproduce.suite", "--agent=impala", "--preset=toy", "--suite=toy:catch", "--frames=3e3",
                     "--engine=ray", "--ray_address=head:6379"])
        driver._engines.Ray = lambda address, cpus, asked: print(f"RESULT {cpus} {PRESETS['toy'].num_actors}")
        driver._engine(driver._plan.Suite("impala", "toy", "toy:catch", ("toy:catch",), (0,), 3000, 0))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    cpus, actors = map(int, line.split()[1:])
    assert cpus == 1 + actors


@pytest.fixture
def job(monkeypatch, tmp_path):
    """`_job.main` for catch_s0 asking `episodes`, its training, evaluation and evaluation's result stubbed;
    returns the calls made: training's (module, flags), evaluation's (command, finished at the start)."""
    calls, evaluation = {"train": [], "evaluate": []}, {"value": None}
    monkeypatch.setattr(_job._runs, "train", lambda module, run_dir, flags: calls["train"].append((module, flags)))
    monkeypatch.setattr(_job._plan, "evaluation", lambda run_dir: evaluation["value"])

    def run_to_completion(command, run_dir, finished):
        calls["evaluate"].append((command, finished()))

    monkeypatch.setattr(_job._runs, "run_to_completion", run_to_completion)

    def main(episodes: int, evaluated: dict | None = None) -> dict:
        evaluation["value"] = evaluated
        _job.main(["_job", "impala", str(tmp_path / "catch_s0"), str(episodes), "--preset=toy", "--seed=1"])
        return calls

    return main


def test_a_job_trains_with_its_flags_then_evaluates_by_the_papers_protocol(job):
    """EPISODES 0 is the protocol's default (no --episodes flag); it is not a training flag, and the evaluation
    is not finished before its result exists."""
    calls = job(0)
    assert calls["train"] == [("impala.train", ["--preset=toy", "--seed=1"])]
    ((command, finished),) = calls["evaluate"]
    assert command[1:] == ["-m", "impala.evaluate", command[-1]] and command[-1].endswith("catch_s0")
    assert finished is False


def test_a_job_evaluates_the_episodes_asked(job):
    ((command, _),) = job(5)["evaluate"]
    assert command[-1] == "--episodes=5"


def test_an_evaluated_job_is_kept(job, capsys):
    assert job(0, evaluated={"mean_return": 1.0})["evaluate"] == []
    assert "catch_s0: evaluated earlier, kept" in capsys.readouterr().out
