"""IMPALA end to end: real Reverb server, actor processes and learner, as a user runs it.

Learning is asserted on the return, never on the time, in a run whose actor
is killed with SIGKILL and restarted. Bad input is one line and exit status 2.
Stopping and resuming: test_impala_recovery.py.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest
import usage_cases
from processes import episodes_logged, wait_for

REPO = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "impala.train", "--preset=toy"]


# Training runs get a generous bound: these tests assert behaviour (learning,
# resuming), not speed, and a loaded 2-core CI machine can run 4x slower.
def train(*args, timeout=900):
    return subprocess.run([*TRAIN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def start(*args):
    return subprocess.Popen(
        [*TRAIN, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


@pytest.fixture(scope="module")
def trained_through_a_killed_actor(tmp_path_factory) -> tuple[pathlib.Path, str, int, int]:
    """(run dir, output, the killed actor's pid, exit status) of one full toy run whose actor is SIGKILLed once.

    One run serves the learning test and the restart test: the actor dies as
    its first episodes are logged, and the run must still learn Catch.
    """
    run_dir = tmp_path_factory.mktemp("catch") / "run"
    process = start(f"--run_dir={run_dir}", "--seed=3")
    wait_for(lambda: episodes_logged(run_dir), what="first episodes")
    victim = int((run_dir / "actor_pids").read_text().split()[0])
    os.kill(victim, signal.SIGKILL)
    output, _ = process.communicate(timeout=900)
    return run_dir, output, victim, process.returncode


@pytest.mark.slow
def test_learns_catch_to_near_perfect_return(trained_through_a_killed_actor):
    run_dir, output, _, returncode = trained_through_a_killed_actor
    assert returncode == 0, output
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 120_000
    assert final["mean_return_last_100"] >= 0.8  # Random play scores about -0.6.
    header, *rows = (run_dir / "episodes.csv").read_text().splitlines()
    assert header == "frames,episode_return,episode_length,wall_time" and len(rows) > 1000
    assert (run_dir / "config.json").exists() and list((run_dir / "tb").iterdir())


@pytest.mark.slow
def test_killed_actor_is_restarted_and_training_finishes(trained_through_a_killed_actor):
    run_dir, output, victim, returncode = trained_through_a_killed_actor
    assert returncode == 0, output
    assert f"actor 0 (pid {victim}) exited with -9; restarting" in output
    final = json.loads((run_dir / "final.json").read_text())
    assert final["frames"] >= 120_000 and final["actor_restarts"] >= 1


PRESET_ENV_CASES = [
    (["--env=atari:breakout"], {"terminal_on_life_loss": True}),  # App. G's option holds for every game.
    (["--env=atari:breakout", "--env_option=sticky_action_prob=0.25"],
     {"terminal_on_life_loss": True, "sticky_action_prob": 0.25}),
    (["--env=minatar:breakout"], {}),  # Another family: the Atari option means nothing there.
]  # fmt: skip


@pytest.fixture(scope="module")
def resolved_env_options() -> dict[tuple[str, ...], dict]:
    """Each PRESET_ENV_CASES' resolved env options under --preset=atari_shallow, from one process.

    A subprocess because `impala.train` defines absl flags; one for all cases,
    its flags reset to their defaults between them, to import TensorFlow once.
    """
    script = (
        "import json, sys; from absl import flags; from common import config, launch; from impala import train\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    flags.FLAGS.unparse_flags(); train.FLAGS(['train', '--preset=atari_shallow', *args])\n"
        "    request, _ = launch.from_flags(train.FLAGS)\n"
        "    print(json.dumps(dict(config.resolve(train.PRESETS, 'toy', request, 'c').env_options)))"
    )
    cases = json.dumps([args for args, _ in PRESET_ENV_CASES])
    result = subprocess.run([sys.executable, "-c", script, cases], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.strip().splitlines()[-len(PRESET_ENV_CASES) :]
    return {tuple(args): json.loads(line) for (args, _), line in zip(PRESET_ENV_CASES, printed)}


@pytest.mark.parametrize("args, options", PRESET_ENV_CASES)
def test_a_presets_env_options_follow_its_env_family(resolved_env_options, args, options):
    assert resolved_env_options[tuple(args)] == options


BAD_INPUT = [
    (["--preset=atari_huge"], "preset"),
    (["--env=atari:pongg"], "unknown atari name 'pongg'"),
    (["--config_override=batch_size=many"], "expected an integer"),
    (["--config_override=colour=1"], "unknown config field 'colour'"),
    (["--config_override=env_options=x"], "unknown config field 'env_options'"),  # --env_option sets those.
    (["--config_override=batch_size=100"], "queue_size=64 must exceed batch_size=100"),
    (["--config_override=unroll_length=0"], "unroll_length=0: must be >= 1"),
    (["--actors=-1"], "num_actors=-1: must be >= 1"),
    (["--actors=0"], "num_actors=0: must be >= 1"),  # 0 is a value, not "unset".
    (["--frames=0.5"], "--frames=0.5: must be a whole number of frames"),
    (["--env_option=sticky_action_prob=2", "--env=atari:pong"], "sticky_action_prob"),
    (["--role=learner", "--replay_address=localhost:1", "--connect_timeout_s=2"], "no Reverb server answered"),
    (["--role=actor"], "needs --replay_address"),
    (["--role=learner", "--replay_address=nowhere", "--connect_timeout_s=1"], "expected HOST:PORT"),
    (["--config=/no/such/config.json"], "no such file"),
    (["--config=impala/config.py"], "is not valid JSON"),
    (["--config_override=seed=4294967296"], "seed=4294967296: must be in [0, 2147483647]"),
    (["--config_override=log_every_s=0"], "log_every_s=0.0: must be > 0 seconds"),
    (["--config_override=rmsprop_decay=1"], "rmsprop_decay=1.0: must be in [0, 1)"),
]
# Each in a process of its own, as a user runs it: the flag parser's error, and
# the two that fail only once the run has started its stderr filter and
# reaches for Reverb. The others share one process (`in_one_process`).
OWN_PROCESS = {
    ("--preset=atari_huge",),
    ("--role=learner", "--replay_address=localhost:1", "--connect_timeout_s=2"),
    ("--role=learner", "--replay_address=nowhere", "--connect_timeout_s=1"),
}


# A flag its role does nothing with: given without the harness's --run_dir, which the server and actor refuse.
ROLE_INPUT = [
    (["--role=server", "--tables_dir=tables"], "impala's checkpoints do not include its Reverb tables; leave it out"),
    (["--role=server", "--resume"], "--resume is for --role all or --role learner; --role server does nothing"),
    (["--role=server", "--run_dir=run"], "--run_dir is for --role all or --role learner; --role server does"),
    (["--role=actor", "--replay_address=localhost:1", "--overwrite"], "--overwrite is for --role all or --role"),
    (["--replay_address=localhost:1"], "--replay_address is for --role learner or --role actor; --role all does"),
    (["--role=learner", "--replay_address=localhost:1", "--port=8000"], "--port is for --role all or --role server"),
    # Flags with defaults: refused when given, even at their default value (a trial found them silently ignored).
    (["--role=server", "--actor_id=0"], "--actor_id is for --role actor; --role server does nothing with it"),
    (["--segment=2"], "--segment is for --role actor; --role all does nothing with it, leave it out"),
    (["--role=learner", "--replay_address=localhost:1", "--incarnation=1"], "--incarnation is for --role actor;"),
    (
        ["--role=server", "--connect_timeout_s=5"],
        "--connect_timeout_s is for --role learner or --role actor; --role server",
    ),
    (["--role=actor", "--replay_address=localhost:1", "--distribute=mirrored"], "--distribute is for --role all or"),
    (["--role=server", "--distribute=mirrored", "--simulated_cpu_devices=2"], "--distribute is for --role all or"),
    (["--role=actor", "--replay_address=localhost:1", "--simulated_cpu_devices=2"], "--simulated_cpu_devices is for"),
    (
        ["--role=actor", "--replay_address=localhost:1", "--incarnation=-1"],
        "--incarnation=-1: -1 is not a non-negative integer",
    ),
    (["--connect_timeout_s=10"], "--connect_timeout_s is for --role learner or --role actor; --role all does"),
    (["--role=learner", "--replay_address=localhost:1", "--connect_timeout_s=-1"], "--connect_timeout_s=-1: must be"),
]


@pytest.fixture(scope="module")
def roles_in_one_process(tmp_path_factory) -> dict[tuple[str, ...], tuple[usage_cases.Outcome, pathlib.Path]]:
    cases = [tuple(args) for args, _ in ROLE_INPUT]
    directory = tmp_path_factory.mktemp("role_input")
    return usage_cases.run_cases("impala.train", cases, directory, first=TRAIN[3:], run_dir_flag=False)


@pytest.mark.parametrize("args, fragment", ROLE_INPUT)
def test_a_flag_its_role_does_nothing_with_is_one_line_and_exit_2(roles_in_one_process, args, fragment):
    """Silently ignored before: e.g. a server's --resume, an actor's --run_dir, a learner's --port."""
    usage_cases.assert_one_line_error(roles_in_one_process[tuple(args)][0], fragment)
    assert not (REPO / "tables").exists() and not (REPO / "run").exists()


@pytest.fixture(scope="module")
def in_one_process(tmp_path_factory) -> dict[tuple[str, ...], tuple[usage_cases.Outcome, pathlib.Path]]:
    """The bad-input cases not in OWN_PROCESS, through `impala.train`'s own `cli.run(main)`, in one process."""
    cases = [tuple(args) for args, _ in BAD_INPUT if tuple(args) not in OWN_PROCESS]
    return usage_cases.run_cases("impala.train", cases, tmp_path_factory.mktemp("bad_input"), first=TRAIN[3:])


@pytest.mark.parametrize("args, fragment", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(tmp_path, in_one_process, args, fragment):
    """One line naming the problem, exit status 2, no traceback, and no run directory.

    The OWN_PROCESS cases run `python -m impala.train` each; the others run
    through the same `cli.run(main)` in one shared process (`usage_cases`),
    which spares a TensorFlow import per case.
    """
    if tuple(args) in OWN_PROCESS:
        run_dir = tmp_path / "run"
        result = train(f"--run_dir={run_dir}", *args, timeout=120)
    else:
        result, run_dir = in_one_process[tuple(args)]
    usage_cases.assert_one_line_error(result, fragment)
    assert not run_dir.exists()  # A refused start leaves nothing behind.
