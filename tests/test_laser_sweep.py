"""LASER's shared-replay sweep: the grid, the tables, one replay fed by every member, the CLI."""

import csv
import dataclasses
import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import reverb
import tensorflow as tf
import usage_cases
from processes import (
    alive,
    checkpoint_steps,
    episodes_logged,
    ignore_sigint,
    kill_processes_mentioning,
    pids_mentioning,
    wait_for,
)

from common.errors import UsageError
from common.reverb import datasets
from common.reverb import server as reverb_server
from impala import trajectories
from laser import agent
from laser.config import PRESETS, sweep_members

REPO = pathlib.Path(__file__).resolve().parent.parent
SWEEP = [sys.executable, "-m", "laser.sweep"]


def in_own_process(script: str, *args) -> tuple[object, str]:
    """What `script` printed last, as JSON, and its stderr. In a process of its own: `laser.sweep` defines
    flags that other tests' modules define too."""
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1]), result.stderr


def test_the_atari_grid_is_the_papers():
    members = sweep_members(PRESETS["atari_laser"], 9)
    grid = {(m.learning_rate, m.entropy_cost) for m in members}
    assert grid == {(lr, e) for lr in (3e-4, 6e-4, 1.2e-3) for e in (5e-3, 1e-2, 2e-2)}  # LASER §5.1.
    assert (members[0].learning_rate, members[0].entropy_cost) == (6e-4, 1e-2)  # The centre first.
    assert [m.sweep_member for m in members] == list(range(9))
    assert len({m.seed for m in members}) == 9  # Each member starts from its own parameters.


def test_sweeps_from_other_base_seeds_share_no_members_seed():
    seeds = [
        {m.seed for m in sweep_members(dataclasses.replace(PRESETS["toy_laser"], seed=base), 9)} for base in (0, 1)
    ]
    assert seeds[0] == set(range(9)) and not seeds[0] & seeds[1]


@pytest.mark.parametrize("count", [0, 10])
def test_a_sweep_outside_the_grid_is_refused(count):
    with pytest.raises(UsageError, match="1 to 9 members"):
        sweep_members(PRESETS["toy_laser"], count)


def test_a_prioritized_sweep_is_refused():
    """§5.2: priorities from one agent's critic are ill-defined on a replay the sweep shares."""
    base = dataclasses.replace(PRESETS["toy_laser"], replay_priority="critic_loss")
    with pytest.raises(UsageError, match="replay_priority=critic_loss in a sweep"):
        sweep_members(base, 2)


def test_members_have_their_own_queue_and_parameters_and_share_the_replay():
    members = sweep_members(PRESETS["toy_laser"], 3)
    names = [t.name for t in agent.sweep_tables(members)]
    assert names == [
        "queue_0", "params_0", "run_0", "queue_1", "params_1", "run_1", "queue_2", "params_2", "run_2", "replay"
    ]  # fmt: skip
    assert agent.actor_tables(members[2]) == {"queue_2": 1.0, "replay": 1.0}
    lone = PRESETS["toy_laser"]
    assert [t.name for t in agent.agent_tables(lone)] == ["queue", "params", "run", "replay"]


def test_one_replay_holds_every_members_unrolls_and_each_queue_only_its_own():
    config = dataclasses.replace(PRESETS["toy_laser"], unroll_length=3, queue_size=32)
    members = sweep_members(config, 2)
    server = reverb_server.make_server(agent.sweep_tables(members))
    client = reverb.Client(f"localhost:{server.port}")
    spec = trajectories.step_spec((2,), tf.float32, 3)
    unrolls = 8  # 16 in the replay: more than its minimum size (a replay batch, 14).
    for member in members:
        adder = trajectories.unroll_adder(client, spec, 1, config.unroll_length, agent.actor_tables(member))
        for t in range(unrolls * config.unroll_length + 1):
            adder.append({
                "observation": np.zeros((1, 2), np.float32), "first": np.array([t == 0]),
                "action": np.zeros(1, np.int32), "behaviour_logits": np.zeros((1, 3), np.float32),
                "reward": np.zeros(1, np.float32), "terminal": np.array([False]),
                "episode_return": np.full(1, np.nan, np.float32),
                "episode_length": np.full(1, 1000 * member.sweep_member + t, np.int32),  # Who wrote it.
            })  # fmt: skip
        adder.close()
    info = client.server_info()
    assert info["queue_0"].current_size == info["queue_1"].current_size == unrolls
    assert info["replay"].current_size == 2 * unrolls  # Both members' unrolls, in one table.

    def writers(table, count):
        batch = next(iter(datasets.dataset(client.server_address, table, spec, config.unroll_length + 1, count, 2000)))
        return set((batch["episode_length"].numpy()[:, 0] // 1000).tolist())

    assert writers("queue_1", unrolls) == {1}
    assert writers("replay", 64) == {0, 1}  # 64 uniform draws of 16 items, half each: fails with p ~ 2^-63.
    server.stop()


def test_sweep_bad_input_is_one_line_and_leaves_nothing(tmp_path):
    for args, fragment in (
        (["--agents=0"], "1 to 9 members"),
        (["--config_override=replay_fraction=1.5"], "replay_fraction=1.5"),
        (["--config_override=sweep_member=3"], "sweep_member is set by laser.sweep"),
        (["--config_override=replay_priority=critic_loss"], "replay_priority=critic_loss in a sweep"),
    ):
        directory = tmp_path / "sweep"
        result = subprocess.run(
            [*SWEEP, "--preset=toy_laser", f"--sweep_dir={directory}", *args],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        usage_cases.assert_one_line_error(result, fragment)
        assert not directory.exists()


SUMMARISE = """
import dataclasses, json, pathlib, sys
from laser import sweep
configs = sweep.sweep_members(dataclasses.replace(sweep.PRESETS['toy_laser'], total_frames=1000), int(sys.argv[2]))
print(json.dumps(sweep.summarise(pathlib.Path(sys.argv[1]), configs)))
"""


def test_the_summary_of_an_interrupted_sweep_gives_each_members_frames(tmp_path):
    for member, rows in ((0, [(400, 1.0), (1000, 3.0)]), (1, [(300, 2.0), (600, 4.0)])):
        run = tmp_path / f"member_{member}"
        run.mkdir()
        lines = ["frames,episode_return,episode_length,wall_time", *(f"{f},{r},10,1.0" for f, r in rows)]
        (run / "episodes.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "member_0" / "final.json").write_text('{"frames": 1008}')
    rows, _ = in_own_process(SUMMARISE, tmp_path, 2)
    assert [(r["finished"], r["frames"], r["episodes"], r["last100"]) for r in rows] == [
        (True, 1008, 2, 2.0), (False, 600, 2, 3.0)
    ]  # fmt: skip
    with open(tmp_path / "sweep_summary.csv", newline="") as f:
        assert [r["frames"] for r in csv.DictReader(f)] == ["1008", "600"]


def test_the_summary_gives_the_last_100_games_and_a_member_at_its_budget_as_finished(tmp_path):
    run = tmp_path / "member_0"
    run.mkdir()
    lines = ["frames,episode_return,episode_length,wall_time", *(f"{10 * i},{i},10,1.0" for i in range(150))]
    (run / "episodes.csv").write_text("\n".join(lines) + "\n")
    (run / "final.json").write_text('{"frames": 1000}')  # Exactly the budget.
    ((row,), _) = in_own_process(SUMMARISE, tmp_path, 1)
    assert (row["finished"], row["episodes"], row["last100"]) == (True, 150, 99.5)  # Games 50 to 149.


MEMBER_COMMANDS = """
import dataclasses, json, pathlib, sys
from laser import sweep
directory = pathlib.Path(sys.argv[1])
base = dataclasses.replace(sweep.PRESETS['toy_laser'], total_frames=5000, num_actors=3)
config = sweep.sweep_members(base, 1)[0]
path, run = sweep.config_path(directory, 0), directory / 'member_0'
out = {'fresh': sweep.member_command(config, path, run, 'host:1')}
run.mkdir(parents=True)
(run / 'config.json').write_text('{}')  # Started earlier, stopped before its budget.
out['resumed'] = sweep.member_command(config, path, run, 'host:1')
out['finished'] = []
for frames in (4990, 5000):  # Finished a smaller budget; finished this one.
    (run / 'final.json').write_text(json.dumps({'frames': frames}))
    out['finished'].append(sweep.finished(run, config))
print(json.dumps(out))
"""


def test_a_started_member_resumes_with_the_sweeps_budget_and_one_below_it_is_not_finished(tmp_path):
    out, _ = in_own_process(MEMBER_COMMANDS, tmp_path)
    assert out["fresh"][-1] == f"--config={tmp_path / 'configs' / 'member_0.json'}" and "--resume" not in out["fresh"]
    assert out["resumed"][-3:] == ["--resume", "--frames=5000", "--actors=3"]
    assert not any(arg.startswith("--config=") for arg in out["resumed"])
    assert out["finished"] == [False, True]  # A sweep resumed with a larger budget trains the member on.


REQUESTED_MEMBERS = """
import json, pathlib, sys
from absl import flags
from common import config as config_lib
from common.errors import UsageError
from laser import sweep
directory = pathlib.Path(sys.argv[1])
(directory / 'configs').mkdir(parents=True)
for config in sweep.sweep_members(sweep.PRESETS['toy_laser'], 2):
    sweep.config_path(directory, config.sweep_member).write_text(config_lib.to_json(config) + '\\n')
out = {}
for name, argv in [
    ('resume', ['--resume', '--frames=7000', '--actors=3']),
    ('server', ['--role=server']),
    ('server_frames', ['--role=server', '--frames=9000']),
    ('env_option', ['--resume', '--env_option=rows=5']),
    ('same', ['--resume', '--preset=toy_laser', '--agents=2', '--seed=0', '--env=toy:catch']),
    ('preset', ['--resume', '--preset=minatar_laser']),
    ('agents', ['--resume', '--agents=3']),
    ('seed', ['--resume', '--seed=1']),
    ('log_every_s', ['--resume', '--config_override=log_every_s=2']),
    ('total_frames', ['--resume', '--config_override=total_frames=99999']),
    ('num_actors', ['--resume', '--frames=7000', '--config_override=num_actors=2']),
]:
    flags.FLAGS.unparse_flags()
    flags.FLAGS(['sweep', f'--sweep_dir={directory}', *argv])
    try:
        configs, saved = sweep.requested_members(directory)
        out[name] = [saved, [[c.sweep_member, c.total_frames, c.num_actors] for c in configs]]
    except UsageError as error:
        out[name] = str(error)
(directory / 'member_1').mkdir()
(directory / 'member_1' / 'final.json').write_text(json.dumps({'frames': 9000}))
(directory / 'member_0').mkdir()  # Raised to 200,000 by an earlier resume, and stopped before it.
(directory / 'member_0' / 'provenance.json').write_text(json.dumps({'segments': [{'total_frames': 200000}]}))
for name, frames in [('below', ['--frames=7000']), ('above', ['--frames=9500']), ('kept', [])]:
    flags.FLAGS.unparse_flags()
    flags.FLAGS(['sweep', f'--sweep_dir={directory}', '--resume', *frames])
    try:
        out[name] = [c.total_frames for c in sweep.requested_members(directory)[0]]
    except UsageError as error:
        out[name] = str(error)
print(json.dumps(out))
"""


def test_a_resumed_sweep_takes_frames_and_actors_and_its_server_the_saved_members(tmp_path):
    out, _ = in_own_process(REQUESTED_MEMBERS, tmp_path)
    assert out["resume"] == [True, [[0, 7000, 3], [1, 7000, 3]]]
    saved, members = out["server"]  # `--role server` on a written sweep serves its saved members' tables.
    assert saved and [m[0] for m in members] == [0, 1]
    # A trial: its --frames, --actors and --resume were accepted and did nothing (the tables are the saved ones).
    assert out["server_frames"] == f"--role server serves the saved sweep in {tmp_path} as it is; leave out --frames"
    # Sweep flags may repeat the saved sweep's (a new user's trial: `--resume --preset` with its own preset, or
    # `--agents` with its own count, was refused as a change), not change it.
    assert out["same"] == out["server"]
    # The flags that change them named: a sweep refuses --config_override total_frames=... on a resume.
    changes = "a resumed sweep may change only total_frames (--frames), num_actors (--actors)"
    assert out["env_option"].startswith("--resume keeps the sweep's saved config: env_options would change from ")
    assert out["preset"] == (
        "--resume keeps the sweep's saved config: --preset=minatar_laser's network would change from 'toy' to "
        f"'minatar'; {changes}"
    )
    assert out["agents"] == (
        "--resume runs the sweep's saved configs: --agents=3, but the sweep has 2 members; leave out --agents"
    )
    assert out["seed"] == f"--resume keeps the sweep's saved config: seed would change from 0 to 1; {changes}"
    # An operational field a run's resume may change: a sweep's resume gives its members only --frames and --actors.
    assert out["log_every_s"].endswith(f"log_every_s would change from 5.0 to 2.0; {changes}")
    # Accepted and ignored, the members kept their budget and actors (a review).
    takes = "--config_override {0}=...: a resumed sweep takes its {0} from --{1}"
    assert out["total_frames"] == takes.format("total_frames", "frames")
    assert out["num_actors"] == takes.format("num_actors", "actors")
    # A budget below a member's frames is refused before the server and members start (a new user's trial: they
    # started, then each member's learner failed and the sweep exited 1).
    assert out["below"] == (
        "--frames=7000: member 1 has trained 9,000 frames already; give a larger budget to train the sweep on, "
        "or leave out --frames to keep its own (120,000)"
    )
    assert out["above"] == [9500, 9500]
    # Without --frames each member keeps its latest start's budget, not its saved config's: a member stopped
    # at 150K of a budget raised to 200K was counted finished by its 120K final.json (a review).
    assert out["kept"] == [200000, 120000]


MEMBER_FRAMES = """
import json, pathlib, sys
from laser import sweep
run = pathlib.Path(sys.argv[1])
run.mkdir()
out = [sweep.member_frames(run)]
header = 'frames,episode_return,episode_length,wall_time\\n'
row = '1000,1.0,20,0.5\\n'
for text in (header, header + row, header + row + '2', header + 'x' * 5000 + '\\n3000,1,2,3\\n'):
    (run / 'episodes.csv').write_text(text)
    out.append(sweep.member_frames(run))
print(json.dumps(out))
"""


def test_a_members_frames_are_its_last_whole_rows(tmp_path):
    """The file is written through a buffer and may end inside a row: "2" of "2000,..." is not a reading."""
    frames, _ = in_own_process(MEMBER_FRAMES, tmp_path / "member_0")
    assert frames == [0, 0, 1000, 1000, 3000]


FAILED_MEMBER = """
import json, pathlib, sys
from laser import sweep
directory = pathlib.Path(sys.argv[1])
directory.mkdir(parents=True, exist_ok=True)

class Server:
    port = 1

class Ended:  # A learner process that has exited with `returncode`.
    def __init__(self, returncode):
        self.returncode = returncode
    def poll(self):
        return self.returncode
    def wait(self):
        return self.returncode

def start_member(directory, config, address, learners, supervisors):
    learners[config.sweep_member] = Ended(1 if config.sweep_member == 1 else 0)

sweep.make_server = lambda configs: Server()
sweep.start_member = start_member
print(json.dumps(sweep.run_sweep(directory, sweep.sweep_members(sweep.PRESETS['toy_laser'], 2), saved=True)))
"""


def test_a_sweep_whose_member_failed_exits_1_and_names_it(tmp_path):
    status, stderr = in_own_process(FAILED_MEMBER, tmp_path / "sweep")
    assert status == 1 and "error: member(s) [1] failed" in stderr


ACTOR_SEGMENT = """
import json, pathlib, sys
from laser import sweep
directory = pathlib.Path(sys.argv[1])
started = []

class Supervisor:
    def __init__(self, *args):
        started.append(args)
    def start(self):
        pass

sweep.launch.ActorSupervisor = Supervisor
sweep.subprocess.Popen = lambda *args, **kwargs: None
config = sweep.sweep_members(sweep.PRESETS['toy_laser'], 1)[0]
run = directory / 'member_0'
run.mkdir(parents=True)
(run / 'provenance.json').write_text(json.dumps({'segments': [{'wall_time_s': 1.0}, {'wall_time_s': 1.0}]}))
sweep.start_member(directory, config, 'host:1', {}, {})
print(json.dumps(started[0][-1]))
"""


def test_a_resumed_members_actors_draw_from_the_new_starts_segment(tmp_path):
    """Two starts recorded: the learner records this one as segment 2, and its actors must seed from 2 too."""
    segment, _ = in_own_process(ACTOR_SEGMENT, tmp_path)
    assert segment == 2


@pytest.mark.slow
def test_a_two_member_sweep_trains_resumes_and_keeps_finished_members(tmp_path):
    directory = tmp_path / "sweep"
    common = [f"--sweep_dir={directory}"]
    first = subprocess.run(
        [*SWEEP, *common, "--preset=toy_laser", "--agents=2", "--frames=3000", "--config_override=log_every_s=1"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    with open(directory / "sweep_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["member"] for r in rows] == ["0", "1"] and all(int(r["frames"]) >= 3000 for r in rows)
    # The driver's progress: both members' frames against their budgets, with frames/s and ETA.
    assert re.search(r"^frames [\d,]+/6,000 \| [\d,]+ frames/s \| members [12] running \| ETA ", first.stdout, re.M)
    assert {float(r["learning_rate"]) for r in rows} == {0.005, 0.0025}
    again = subprocess.run([*SWEEP, *common, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("finished earlier, kept") == 2
    same = subprocess.run(
        [*SWEEP, *common, "--resume", "--preset=toy_laser"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert same.returncode == 0 and same.stdout.count("finished earlier, kept") == 2, same.stdout + same.stderr
    changed = subprocess.run(
        [*SWEEP, *common, "--resume", "--preset=minatar_laser"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert changed.returncode == 2 and "--preset=minatar_laser's network would change" in changed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["ctrl_c_to_the_group", "sigterm_to_the_driver", "each_learner_alone"])
def test_a_stopped_sweep_saves_every_member_and_exits_128_plus_the_signal(tmp_path, stop):
    """A terminal's Ctrl-C (to the whole group, also with SIGINT inherited ignored), a `kill` of the driver, or
    signals to the learners alone: every member saves, and the status says the sweep was interrupted."""
    directory = tmp_path / "sweep"
    driver = subprocess.Popen(
        [*SWEEP, f"--sweep_dir={directory}", "--preset=toy_laser", "--agents=2", "--frames=1e7"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=ignore_sigint,
    )  # fmt: skip
    members = [directory / f"member_{m}" for m in (0, 1)]
    try:
        wait_for(lambda: all(episodes_logged(run) for run in members), timeout=300, what="both members' episodes")
        actors = [
            int(pid) for m in (0, 1) for pid in (directory / "logs" / f"member_{m}" / "actor_pids").read_text().split()
        ]
        if stop == "ctrl_c_to_the_group":
            os.killpg(driver.pid, signal.SIGINT)
        elif stop == "sigterm_to_the_driver":
            driver.send_signal(signal.SIGTERM)
        else:
            for run, signum in zip(members, (signal.SIGINT, signal.SIGTERM)):
                for pid in pids_mentioning(f"--run_dir={run}"):
                    os.kill(pid, signum)
        output, _ = driver.communicate(timeout=180)
        expected = {"ctrl_c_to_the_group": 130, "sigterm_to_the_driver": 143, "each_learner_alone": 130}[stop]
        assert driver.returncode == expected, output
        assert f"continue with python -m laser.sweep --sweep_dir {directory} --resume" in output, output
        for m, run in enumerate(members):
            assert "interrupted: saved checkpoint" in (directory / "logs" / f"member_{m}" / "learner.log").read_text()
            assert max(checkpoint_steps(run)) > 0 and not (run / "final.json").exists()
        with open(directory / "sweep_summary.csv", newline="") as f:
            assert [r["finished"] for r in csv.DictReader(f)] == ["False", "False"]
        wait_for(lambda: not any(alive(pid) for pid in actors), timeout=30, what="the members' actors to exit")
    finally:  # After a failure, nothing of the sweep may outlive the test.
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        kill_processes_mentioning(str(directory))
