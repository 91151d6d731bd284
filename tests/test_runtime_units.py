"""The shared runtime in `common/`, in-process: config resolution, schedules,
the run directory, the loop, Reverb adders and tables, torsos and layouts."""

import csv
import dataclasses
import json
import math
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types

import gymnasium as gym
import numpy as np
import pytest
import reverb
import tensorflow as tf
from processes import checkpoint_steps, summary_steps, wait_for

from common import config as config_lib
from common import evaluation, launch, loop, networks, run_dir
from common.errors import UsageError
from common.reverb import adders, datasets, server, tables
from common.schedules import LinearSchedule
from common.signals import (
    INTERRUPTED_EXIT_CODES,
    STOP_SIGNALS,
    StopRequested,
    raise_on_stop_signals,
    stops_deferred,
)
from impala.config import PRESETS
from laser.config import PRESETS as LASER_PRESETS
from per.config import PRESETS as PER_PRESETS
from reproduce import REPO_ROOT, _runs

Request = config_lib.Request


# Config resolution: a pure function of the request and the presets. -------------


def resolve(**request):
    return config_lib.resolve(PRESETS, "toy", Request(**request), "impala config")


def test_resolve_applies_only_what_was_given():
    assert resolve() == PRESETS["toy"]
    config = resolve(preset="minatar", frames=2e6, actors=3, seed=7, overrides=("batch_size=4",))
    expected = dataclasses.replace(PRESETS["minatar"], total_frames=2_000_000, num_actors=3, seed=7, batch_size=4)
    assert config == expected


@pytest.mark.parametrize(
    "request_fields, message",
    [
        ({"frames": 0.5}, r"--frames=0.5: must be a whole number of frames in \[1, 1e\+15\]"),
        ({"frames": 0.0}, "--frames=0: must be a whole number"),
        ({"actors": 0}, "num_actors=0: must be >= 1"),
        ({"preset": "huge"}, "unknown preset 'huge'; accepted: atari_shallow"),
        ({"preset": "toy", "config_file": "x.json"}, "--config x.json: no such file"),
        ({"preset": "toy", "config_file": "."}, "--config .: a directory, not a file"),
        ({"overrides": ("env_options=x",)}, "unknown config field 'env_options'"),
        # NaN passes every range check (NaN < 0 is false), so it is refused as it is parsed.
        ({"overrides": ("learning_rate=nan",)}, "option learning_rate='nan': expected a finite number"),
        ({"overrides": ("max_grad_norm=inf",)}, "option max_grad_norm='inf': expected a finite number"),
        ({"overrides": ("use_lstm=maybe",)}, "option use_lstm='maybe': expected true or false"),
        ({"overrides": ("batch_size",)}, "--config_override 'batch_size': expected NAME=VALUE"),
        ({"env_options": ("full_action_space",)}, "--env_option 'full_action_space': expected NAME=VALUE"),
        (
            {"frames": 2e6, "overrides": ("total_frames=3e6",)},
            "--frames and --config_override total_frames=.* disagree",
        ),
        ({"env": "minatar:breakout", "overrides": ("env=atari:pong",)}, "--env and --config_override env=.* disagree"),
        ({"seed": 3, "overrides": ("seed=5",)}, "--seed and --config_override seed=.* disagree"),
        ({"actors": 1, "overrides": ("num_actors=2",)}, "--actors and --config_override num_actors=.* disagree"),
    ],
)
def test_resolve_rejects_what_it_cannot_run(request_fields, message):
    with pytest.raises(UsageError, match=message):
        resolve(**request_fields)


def test_resume_refuses_a_config_file():
    with pytest.raises(UsageError, match="--resume runs the run's own config.json; drop --config"):
        config_lib.resume(PRESETS["minatar"], Request(config_file="other.json"), PRESETS, "c")


def test_run_directory_checks_name_the_flag_at_fault(tmp_path):
    with pytest.raises(UsageError, match="--resume and --overwrite exclude each other"):
        run_dir.check(tmp_path, resume=True, overwrite=True)
    with pytest.raises(UsageError, match=f"--resume: {tmp_path} holds no run \\(no config.json\\)"):
        run_dir.check(tmp_path, resume=True, overwrite=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "episodes", "envs", "message"),
    [
        (["evaluate"], 10, 8, "expected one run directory: python -m per.evaluate RUN_DIR"),
        (["evaluate", "a", "b"], 10, 8, "expected one run directory"),
        (["evaluate", "run"], 0, 8, "--episodes=0: must be >= 1"),
        (["evaluate", "run"], 10, 0, "--envs=0: must be >= 1"),
    ],
)
def test_an_evaluation_refuses_bad_arguments(argv, episodes, envs, message):
    with pytest.raises(UsageError, match=message):
        evaluation.run_directory(argv, "per.evaluate", episodes, envs)


def test_evaluating_what_is_not_a_run_directory_says_so(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(config_lib.to_json(PRESETS["toy"]))
    for path, message in [
        (tmp_path / "none", f"^{tmp_path / 'none'}: no such run directory$"),
        (config, f"^{config} is a file, not a run directory"),  # Was: .../config.json/config.json: no such file.
        (pathlib.Path("/dev/null"), "^/dev/null is a file, not a run directory"),  # Was: "a directory without".
        (tmp_path.parent, f"^{tmp_path.parent} is a directory without a config.json, not a run directory"),
    ]:
        with pytest.raises(UsageError, match=message):
            evaluation.load_config(path, type(PRESETS["toy"]), "impala.evaluate")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-0"\n')
    (tmp_path / "checkpoints" / "ckpt-0.index").write_bytes(b"")
    assert evaluation.load_config(tmp_path, type(PRESETS["toy"]), "impala.evaluate") == PRESETS["toy"]


def test_evaluating_a_run_without_a_checkpoint_is_a_usage_error(tmp_path):
    """A run stopped before its first checkpoint: `impala.evaluate RUN_DIR` names what is missing, before
    TensorFlow loads (a trial waited 100 s on a busy machine for the line that the same RUN_DIR's --resume gave
    in 5)."""
    (tmp_path / "config.json").write_text(config_lib.to_json(PRESETS["toy"]))
    (tmp_path / "checkpoints").mkdir()

    def never_built(config, env):
        raise AssertionError("no network is built without a checkpoint")

    missing = f"^{tmp_path} has no checkpoint to evaluate$"
    with pytest.raises(UsageError, match=missing):
        evaluation.load_config(tmp_path, type(PRESETS["toy"]), "impala.evaluate")
    with pytest.raises(UsageError, match=missing):
        evaluation.restore(tmp_path, PRESETS["toy"], never_built)


def test_env_options_follow_the_env_family():
    assert dict(resolve(preset="atari_shallow", env="atari:breakout").env_options) == {"terminal_on_life_loss": True}
    assert resolve(preset="atari_shallow", env="minatar:breakout").env_options == ()


def test_resume_changes_only_operational_fields():
    saved = PRESETS["minatar"]
    config = config_lib.resume(saved, Request(frames=1e7, actors=1), PRESETS, "c")
    assert config == dataclasses.replace(saved, total_frames=10_000_000, num_actors=1)
    assert config_lib.resume(saved, Request(), PRESETS, "c") == saved  # Nothing given: the saved config.
    assert config_lib.resume(saved, Request(preset="minatar"), PRESETS, "c") == saved


def test_a_resumes_hint_carries_its_operational_changes_but_not_its_budget():
    """Its hint was `--run_dir R --resume` alone: followed, it started the saved config's actors again."""
    saved = PRESETS["minatar"]
    request = Request(frames=1e7, actors=1, overrides=("log_every_s=2",))  # The preset: 2 actors.
    config = config_lib.resume(saved, request, PRESETS, "c")
    assert config_lib.start_flags(saved, config) == ["--actors 1", "--config_override log_every_s=2.0"]
    assert config_lib.start_flags(saved, config_lib.resume(saved, Request(frames=1e7), PRESETS, "c")) == []


def test_a_resumed_learners_hint_carries_its_starts_operational_flags_too(tmp_path):
    """The separate learner's hint was built apart from `role all`'s and kept a bare --resume."""
    agent = launch.Agent("impala", "impala.train", PRESETS, "minatar", parts=lambda: pytest.fail("loaded"))
    record, config = types.SimpleNamespace(index=1), types.SimpleNamespace(num_actors=0)
    command = launch.learner_hints(agent, config, "h:1", tmp_path, record, ["--config_override log_every_s=2.0"])
    learner = f"python -m impala.train --role learner --replay_address h:1 --run_dir {tmp_path} --resume"
    assert command == learner + " --config_override log_every_s=2.0"


def test_a_resume_naming_the_runs_preset_needs_no_env_flag_and_any_other_preset_is_refused():
    saved = dataclasses.replace(PRESETS["minatar"], env="minatar:asterix", seed=4)  # The preset's env is breakout.
    assert config_lib.resume(saved, Request(preset="minatar"), PRESETS, "c") == saved
    with pytest.raises(UsageError, match="--preset=atari_shallow's network would change from 'minatar'"):
        config_lib.resume(saved, Request(preset="atari_shallow"), PRESETS, "c")


def test_a_resumes_overrides_are_checked_against_the_run_not_the_default_preset(tmp_path):
    from per.config import PRESETS as PER_PRESETS

    # `per.train`'s agent, without importing per.train (its flags would clash with other modules' in this process).
    agent = launch.Agent("per", "per.train", PER_PRESETS, "toy", parts=lambda: pytest.fail("TensorFlow's side loaded"))
    path = tmp_path / "run"
    with run_dir.starting(path, PER_PRESETS["minatar_ddqn_rank"], resume=False, overwrite=False):
        pass
    before = (path / "config.json").read_text()
    options = launch.Options(run_dir=str(path), resume=True)
    for override, message in [
        ("replay=uniform", "replay would change from 'rank' to 'uniform'"),  # Was: toy's alpha, with replay=uniform.
        ("replay_capacity=16", "replay_capacity would change from 100000 to 16"),  # Was: toy's min_replay_size.
    ]:
        with pytest.raises(UsageError, match=f"--resume keeps the run's saved config: {message}"):
            launch.run(agent, Request(overrides=(override,)), options)
    with pytest.raises(UsageError, match="--preset=atari_ddqn_rank's network would change from 'minatar'"):
        launch.run(agent, Request(preset="atari_ddqn_rank"), options)  # Not a check of that preset on MinAtar.
    assert (path / "config.json").read_text() == before


class _ChecksPassedError(Exception):
    """Raised where a start would load TensorFlow: every check before it passed."""


def test_a_run_resumes_with_the_command_that_started_it_whatever_its_overrides_made_valid(tmp_path):
    def reached():
        raise _ChecksPassedError

    agent = launch.Agent("impala", "impala.train", PRESETS, "toy", parts=reached)
    start = Request(preset="dmlab30", actors=1, overrides=("envs_per_actor=30",))  # 15 envs would miss levels.
    path = tmp_path / "run"
    with run_dir.starting(path, resolve(**vars(start)), resume=False, overwrite=False):
        pass
    with pytest.raises(_ChecksPassedError):
        launch.run(agent, start, launch.Options(run_dir=str(path), resume=True))


def test_learner_threads_are_operational_and_set_before_tf_starts():
    """A resumed run may change its threads; `launch.use_threads` sets TF's intra-op pool, 0 keeps TF's default."""
    from per.config import PRESETS as PER_PRESETS

    saved = PER_PRESETS["minatar_ddqn"]
    assert saved.learner_threads == 1
    resumed = config_lib.resume(saved, Request(overrides=("learner_threads=2",)), PER_PRESETS, "c")
    assert resumed == dataclasses.replace(saved, learner_threads=2)
    probe = (
        "import sys; import tensorflow as tf; from common import launch; from per.config import PRESETS; "
        "launch.use_threads(PRESETS[sys.argv[1]]); tf.constant(1.0) + 1.0; "
        "print(tf.config.threading.get_intra_op_parallelism_threads())"
    )
    threads = {
        preset: subprocess.run(
            [sys.executable, "-c", probe, preset], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        for preset in ("minatar_ddqn", "atari_ddqn")
    }
    assert threads == {"minatar_ddqn": "1", "atari_ddqn": "0"}


@pytest.mark.parametrize(
    "request_fields, field",
    [
        ({"env": "minatar:asterix"}, "env"),
        ({"overrides": ("learning_rate=0.1",)}, "learning_rate"),
        ({"seed": 5}, "seed"),
        ({"preset": "toy"}, "--preset=toy's network"),  # Another preset's maths, named as the preset's.
        ({"preset": "toy", "env": "minatar:asterix"}, "env"),  # A field given itself is named as such.
        ({"env_options": ("sticky_action_prob=0.2",)}, "env_options"),
        # The run's own preset beside an option: the option is the change (it was named as the preset's).
        ({"preset": "minatar", "env_options": ("sticky_action_prob=0.2",)}, "env_options"),
        ({"overrides": ("batch_size=64",)}, "batch_size"),
    ],
)
def test_resume_refuses_to_change_the_experiment(request_fields, field):
    with pytest.raises(UsageError, match=f"--resume keeps the run's saved config: {field} would change"):
        config_lib.resume(PRESETS["minatar"], Request(**request_fields), PRESETS, "c")


def test_an_env_option_given_on_a_resume_is_merged_into_the_saved_ones():
    """The run's own command with one of its options resumes it: the others stay, so nothing changes."""
    saved = dataclasses.replace(
        resolve(preset="atari_shallow", env="atari:breakout"),
        env_options=(("sticky_action_prob", 0.25), ("terminal_on_life_loss", True)),
    )  # fmt: skip
    assert config_lib.resume(saved, Request(env_options=("sticky_action_prob=0.25",)), PRESETS, "c") == saved
    with pytest.raises(UsageError, match="env_options would change"):
        config_lib.resume(saved, Request(env_options=("sticky_action_prob=0.5",)), PRESETS, "c")


def test_a_resume_may_change_only_the_fields_the_readme_names():
    """The README's run-directory contract: the budget (--frames), --actors, learner_threads, log_every_s and
    checkpoint_every_s. A field added to the list widens what a resume lets change: it must be said there too."""
    assert set(config_lib.OPERATIONAL_FIELDS) == {
        "total_frames", "num_actors", "learner_threads", "log_every_s", "checkpoint_every_s",
    }  # fmt: skip


def test_saved_config_round_trips_and_bad_files_are_named(tmp_path):
    saved = PRESETS["atari_shallow"]
    path = tmp_path / "config.json"
    path.write_text(config_lib.to_json(saved))
    assert config_lib.load(type(saved), path) == saved
    fields = json.loads(config_lib.to_json(saved))
    for text, message in [
        ("{broken", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        (json.dumps({"env": "toy:catch", "colour": 1}), "unknown config fields colour; accepted: env"),
        (json.dumps({"batch_size": "many"}), "field batch_size='many' must be a int"),
        (json.dumps({"env_options": "x"}), "env_options must be a list of"),
        # A field missing was filled with its default: a run resumed at another learning rate (a new user's trial).
        (json.dumps({k: v for k, v in fields.items() if k != "learning_rate"}), "lacks config field.s. learning_rate:"),
        ("{}", "lacks config field.s. env, env_options, network, use_lstm"),
    ]:
        path.write_text(text)
        with pytest.raises(UsageError, match=message):
            config_lib.load(type(saved), path)


@pytest.mark.parametrize("preset", [PRESETS["atari_shallow"], PER_PRESETS["atari_ddqn"], LASER_PRESETS["atari_laser"]])
def test_a_config_saved_before_a_field_was_added_loads_with_its_default(preset, tmp_path):
    """Only `ADDED_FIELDS` may be missing (e.g. the committed IMPALA suite's configs predate publish_every)."""
    path = tmp_path / "config.json"
    older = {k: v for k, v in json.loads(config_lib.to_json(preset)).items() if k not in type(preset).ADDED_FIELDS}
    path.write_text(json.dumps(older))
    defaults = {f.name: f.default for f in dataclasses.fields(preset) if f.name in type(preset).ADDED_FIELDS}
    assert sorted(defaults) == sorted(type(preset).ADDED_FIELDS)  # Each names a field.
    assert config_lib.load(type(preset), path) == dataclasses.replace(preset, **defaults)


@pytest.mark.parametrize(
    "config_class, files",
    [
        (type(PRESETS["toy"]), ["common/config.py", "impala/config.py"]),
        (type(PER_PRESETS["toy"]), ["common/config.py", "per/config.py"]),
        (type(LASER_PRESETS["toy_laser"]), ["common/config.py", "impala/config.py", "laser/config.py"]),
    ],
)
def test_added_fields_are_those_the_first_saved_configs_lacked(config_class, files):
    """`ADDED_FIELDS` may be missing from a saved config and take their defaults: exactly the fields the class
    has gained since its first commit, read from git. One listed too many would let a damaged config run on a
    default (LASER's once listed `anneal_learning_rate`, which its first config already had: a review)."""
    git = ["git", "-C", str(REPO_ROOT)]
    if subprocess.run([*git, "rev-parse", "--git-dir"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    log = subprocess.run([*git, "log", "--reverse", "--format=%H", "--", files[-1]], capture_output=True, text=True)
    first = log.stdout.split()[0]
    then = set()
    for path in files:  # Its own file and those its fields then came from (a field's line: `    name: type = ...`).
        text = subprocess.run([*git, "show", f"{first}:{path}"], capture_output=True, text=True).stdout
        then |= set(re.findall(r"^    (\w+): [^=\n]+ = ", text, re.MULTILINE))
    gained = {f.name for f in dataclasses.fields(config_class)} - then
    assert gained and sorted(config_class.ADDED_FIELDS) == sorted(gained)


# The learning-rate / beta schedule. -----------------------------------------------


def test_linear_schedule_continues_without_a_jump_on_a_larger_budget(tmp_path):
    schedule = LinearSchedule(0.6, 0.0, end=100)
    assert schedule(0, 100) == pytest.approx(0.6) and schedule(50, 100) == pytest.approx(0.3)
    assert schedule(100, 100) == 0.0
    path = tf.train.Checkpoint(s=schedule).save(str(tmp_path / "ckpt"))
    restored = LinearSchedule(0.6, 0.0, end=300)  # A resumed run's config with a larger budget...
    tf.train.Checkpoint(s=restored).restore(path).assert_existing_objects_matched()
    assert restored(50, 300) == pytest.approx(0.3)  # ...continues from where it was,
    assert restored(175, 300) == pytest.approx(0.15)  # ...anneals linearly from there,
    assert restored(300, 300) == 0.0 and restored(400, 300) == 0.0  # ...and reaches 0 at the new end.


# The run directory. ---------------------------------------------------------------


def test_a_failed_start_removes_what_it_created(tmp_path):
    path = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_dir.starting(path, PRESETS["toy"], resume=False, overwrite=False):
            raise RuntimeError("the learner could not be built")
    assert not path.exists()
    with run_dir.starting(path, PRESETS["toy"], resume=False, overwrite=False):
        pass
    assert json.loads((path / "config.json").read_text())["env"] == "toy:catch"
    with pytest.raises(UsageError, match="already exists; pass --resume to continue it, --run_dir for a new run"):
        run_dir.check(path, resume=False, overwrite=False)
    mine = tmp_path / "mine"  # An empty directory of the user's: kept, and left empty.
    mine.mkdir()
    with pytest.raises(RuntimeError):
        with run_dir.starting(mine, PRESETS["toy"], resume=False, overwrite=False):
            assert (mine / "config.json").exists()
            raise RuntimeError("the learner could not be built")
    assert mine.is_dir() and list(mine.iterdir()) == []


def test_a_directory_of_the_users_own_is_refused_without_offering_what_would_be_refused(tmp_path):
    """Not "pass --resume ... or --overwrite", which both refuse a directory without a run (a new user's trial)."""
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    with pytest.raises(UsageError, match=r"^run directory .*notes holds files but no run \(no config.json\); give "):
        run_dir.check(mine, resume=False, overwrite=False)
    for resume, overwrite in ((True, False), (False, True)):
        with pytest.raises(UsageError, match="holds no run"):
            run_dir.check(mine, resume=resume, overwrite=overwrite)
    assert (mine / "todo.txt").read_text() == "mine"


def test_a_run_directory_that_is_a_file_is_refused_and_kept(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    for resume, overwrite in ((False, False), (True, False), (False, True)):
        with pytest.raises(UsageError, match=f"run directory {path} is a file, not a directory"):
            with run_dir.starting(path, PRESETS["toy"], resume=resume, overwrite=overwrite):
                pass
    assert path.read_text() == "mine"


def test_a_run_directory_that_cannot_be_created_is_refused_before_the_start(tmp_path, monkeypatch):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    for path in (afile / "run", afile / "deeper" / "run"):
        with pytest.raises(UsageError, match=f"run directory {path} cannot be created: {afile} is a file"):
            run_dir.check(path, resume=False, overwrite=False)
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(run_dir.os, "access", lambda p, mode: pathlib.Path(p) != locked)  # Root may write anywhere.
    with pytest.raises(UsageError, match=f"cannot be created: {locked} is not writable"):
        run_dir.check(locked / "a" / "run", resume=False, overwrite=False)
    monkeypatch.undo()

    def mkdir_in_proc(*args, **kwargs):  # As /proc refuses a new entry: its check passes, mkdir fails.
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir_in_proc)
    with pytest.raises(UsageError, match="run directory .* cannot be created: No such file or directory"):
        with run_dir.starting(tmp_path / "run", PRESETS["toy"], resume=False, overwrite=False):
            pass
    assert afile.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["locked", "notes.txt"]


def test_overwrite_refuses_a_directory_that_holds_no_run_and_keeps_it(tmp_path):
    path = tmp_path / "mine"
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match=f"--overwrite deletes only a run directory: {path} holds no run"):
        with run_dir.starting(path, PRESETS["toy"], resume=False, overwrite=True):
            pass
    assert {p.name: p.read_text() for p in path.iterdir()} == {"notes.txt": "mine"}
    empty = tmp_path / "empty"
    empty.mkdir()
    with run_dir.starting(empty, PRESETS["toy"], resume=False, overwrite=True):
        pass  # An empty directory holds nothing to lose.
    (empty / "episodes.csv").write_text("the first run's")
    with run_dir.starting(empty, PRESETS["toy"], resume=False, overwrite=True):
        pass  # A run's directory is replaced.
    assert [p.name for p in empty.iterdir()] == ["config.json"]


def test_a_failed_resume_leaves_the_run_as_it_was(tmp_path):
    path = tmp_path / "run"
    with run_dir.starting(path, PRESETS["toy"], resume=False, overwrite=False):
        pass
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(RuntimeError):
        with run_dir.starting(path, PRESETS["minatar"], resume=True, overwrite=False):
            raise RuntimeError("boom")
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before


def test_a_failed_overwrite_puts_the_old_run_back(tmp_path):
    """A PER start with a busy --port failed after --overwrite had deleted the run (seen): it is only moved
    aside, put back if the start fails, and deleted once the new run has started."""
    path = tmp_path / "run"
    with run_dir.starting(path, PRESETS["toy"], resume=False, overwrite=False):
        pass
    (path / "episodes.csv").write_text("the old run's")
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(UsageError, match="is already in use"):
        with run_dir.starting(path, PRESETS["minatar"], resume=False, overwrite=True):
            assert not (path / "episodes.csv").exists()  # The new run's directory, while it starts.
            raise UsageError("--port=2024 is already in use")
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    run_dir.overwritten(path).mkdir()  # As an --overwrite killed while it started leaves it.
    with pytest.raises(UsageError, match="left the run it replaced in .*; move it back or delete it"):
        with run_dir.starting(path, PRESETS["minatar"], resume=False, overwrite=True):
            pass
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    run_dir.overwritten(path).rmdir()
    with run_dir.starting(path, PRESETS["minatar"], resume=False, overwrite=True):
        pass
    assert [p.name for p in path.iterdir()] == ["config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # The old run, deleted once this one started.


def test_episode_log_of_a_run_killed_before_its_first_flush_gets_its_header_on_resume(tmp_path):
    """A run killed 0.1 s in left an empty episodes.csv; its resume wrote rows with no header (seen)."""
    first = run_dir.EpisodeLog(tmp_path)
    assert (tmp_path / "episodes.csv").read_text().startswith("frames,episode_return")  # Flushed at once.
    first._file.close()
    (tmp_path / "episodes.csv").write_text("")  # As a kill before any flush leaves it.
    resumed = run_dir.EpisodeLog(tmp_path)
    resumed.add(160, 2.0, 6, 1.5)
    resumed.close()
    rows = list(csv.DictReader(open(tmp_path / "episodes.csv", newline="")))
    assert [(r["frames"], r["episode_return"]) for r in rows] == [("160", "2")]
    assert run_dir.EpisodeLog(tmp_path).count == 1  # A second resume counts it.


def test_first_progress_line_has_no_eta_and_later_ones_do():
    progress = run_dir.Progress(total_frames=1000, every_s=0.0)
    first = progress.line(100, 1, extra="1")
    assert "ETA ?" in first and "nan" not in first and "steps/s" not in first
    assert progress.rates == {}
    later = progress.line(200, 2)
    assert "learner steps/s" in later and "ETA ?" not in later
    assert set(progress.rates) == {"frames_per_s", "learner_steps_per_s"} and progress.rates["frames_per_s"] > 0


def test_a_line_at_the_budget_says_eta_0_even_as_a_starts_first():
    """A start shorter than one interval ended on 'frames 8,000/8,000 | ... | ETA ?'."""
    assert run_dir.Progress(total_frames=1000, every_s=0.0).line(1000, 9).endswith(" | ETA 0m00s")


def test_eta_follows_the_recent_rate_after_a_change_of_speed():
    # 100 s at 1,000 frames/s (as DQN's replay warm-up fill), then 10 frames/s
    # for longer than the window: the ETA is the slow rate's, 24h58m, where the
    # average since the first line (101,100 frames in 210 s) would say 31 min.
    now = [0.0]
    progress = run_dir.Progress(total_frames=1_000_000, every_s=1.0, eta_window_s=60.0, clock=lambda: now[0])
    progress.line(0, 0)
    for t in range(1, 101):
        now[0] = float(t)
        progress.line(1_000 * t, t)
    for k in range(1, 12):
        now[0] = 100.0 + 10 * k
        line = progress.line(100_000 + 100 * k, 100 + k)
    assert line.endswith(f"ETA {run_dir.duration((1_000_000 - 101_100) / 10)}"), line
    assert line.endswith("ETA 24h58m")
    assert "10 frames/s" in line


def test_a_pause_is_left_out_of_the_eta_and_a_gap_of_a_few_intervals_is_not():
    # 100 frames/s with a line every 10 s; then a 17-minute pause (Ctrl-Z), then
    # 100 frames/s again: the ETA is at that rate, not at the rate with the
    # pause in it (about 2 frames/s here, an ETA of days).
    now = [0.0]
    progress = run_dir.Progress(total_frames=1_000_000, every_s=10.0, clock=lambda: now[0])
    for k in range(31):
        now[0] = 10.0 * k
        progress.line(1_000 * k, k)
    now[0] = 300.0 + 17 * 60 + 10
    resumed = progress.line(31_000, 31)
    assert " 1 frames/s" in resumed  # The line's own rate is over the whole gap.
    now[0] += 10
    line = progress.line(32_000, 32)
    assert line.endswith(f"ETA {run_dir.duration((1_000_000 - 32_000) / 100)}"), line
    # A run whose lines come 30 s apart (a slow step) is not paused: its ETA is its rate.
    slow = run_dir.Progress(total_frames=1_000_000, every_s=10.0, clock=lambda: now[0])
    for k in range(5):
        now[0] = 30.0 * k
        line = slow.line(1_000 * k, k)
    assert line.endswith(f"ETA {run_dir.duration((1_000_000 - 4_000) / (1_000 / 30))}"), line


# The loop, with a scripted learner. --------------------------------------------------


class ScriptedLearner(tf.Module):
    """Makes `frames_per_step` frames per step; the loss becomes `bad_loss` (NaN) at step `nan_at`."""

    def __init__(self, frames_per_step=10, nan_at=None, bad_loss=math.nan):
        super().__init__()
        self.counter = tf.Variable(0, dtype=tf.int64)
        self.frames_per_step, self.nan_at, self.bad_loss = frames_per_step, nan_at, bad_loss
        self.started = self.extra_saves = 0

    frames = property(lambda self: int(self.counter.numpy()) * self.frames_per_step)
    steps = property(lambda self: int(self.counter.numpy()))

    def state(self):
        return {"learner": self}

    def start(self):
        self.started += 1

    def step(self):
        self.counter.assign_add(1)
        loss = self.bad_loss if self.steps == self.nan_at else 1.0
        return loop.Step({"loss": loss}, [(float(self.steps), 1)])

    def progress(self):
        return {"queue": 3.0}

    def save_extra(self):
        self.extra_saves += 1


def run_loop(path, learner, total_frames, checkpoint_every_s=0.0):
    path.mkdir(exist_ok=True)
    record = run_dir.RunRecord(path, PRESETS["toy"], "all")
    return loop.run(learner, path, loop.Settings(total_frames, checkpoint_every_s, 0.0), record)


def test_loop_trains_to_the_budget_and_resumes_with_its_statistics(tmp_path):
    learner = ScriptedLearner()
    assert run_loop(tmp_path, learner, total_frames=50) == 0
    assert learner.started == 1 and learner.extra_saves >= 1  # The extra state is saved with each checkpoint.
    final = json.loads((tmp_path / "final.json").read_text())
    assert final["frames"] == 50 and final["episodes"] == 5 and final["mean_return_last_100"] == pytest.approx(3.0)
    resumed = ScriptedLearner()
    assert run_loop(tmp_path, resumed, total_frames=100) == 0
    assert resumed.steps == 10  # Restored at step 5, then 5 more.
    final = json.loads((tmp_path / "final.json").read_text())
    assert final["episodes"] == 10 and final["mean_return_last_100"] == pytest.approx(5.5)
    provenance = json.loads((tmp_path / "provenance.json").read_text())
    assert [s["frames_at_start"] for s in provenance["segments"]] == [0, 50]
    assert [s["total_frames"] for s in provenance["segments"]] == [50, 100]
    assert final["segments"] == 2 and final["frames"] == 100  # The run's frames, not this start's.
    assert final["wall_time_s"] == pytest.approx(sum(s["wall_time_s"] for s in provenance["segments"]), abs=0.2)
    assert run_loop(tmp_path, ScriptedLearner(), total_frames=150) == 0  # A third start keeps both earlier ones.
    segments = json.loads((tmp_path / "provenance.json").read_text())["segments"]
    assert [s["frames_at_start"] for s in segments] == [0, 50, 100]
    assert json.loads((tmp_path / "final.json").read_text())["frames"] == 150


class LazyLearner(ScriptedLearner):
    """Counts its steps in Python and writes the variable only in `before_save` (as PER's agent-step count)."""

    def __init__(self):
        super().__init__()
        self.count, self.before_saves = None, 0

    frames = property(lambda self: (int(self.counter.numpy()) if self.count is None else self.count) * 10)
    steps = property(lambda self: int(self.counter.numpy()) if self.count is None else self.count)

    def start(self):
        super().start()
        self.count = self.started_at = int(self.counter.numpy())

    def step(self):
        self.count += 1
        return loop.Step({"loss": 1.0}, [(float(self.count), 1)])

    def before_save(self):
        self.before_saves += 1
        self.counter.assign(self.count)


def test_the_loop_calls_before_save_before_each_checkpoint_it_resumes_from(tmp_path):
    first = LazyLearner()
    assert run_loop(tmp_path, first, total_frames=50) == 0
    assert first.before_saves >= 1  # Not for checkpoint 0: nothing has run yet.
    resumed = LazyLearner()
    assert run_loop(tmp_path, resumed, total_frames=100) == 0
    assert resumed.started_at == 5 and resumed.steps == 10  # Restored at step 5 (written by before_save).


class SignalledLearner(ScriptedLearner):
    """Sends its own process `signum` at step 3, as Ctrl-C or `kill` would mid-run."""

    def __init__(self, signum):
        super().__init__()
        self.signum = signum

    def step(self):
        if self.steps == 2:
            os.kill(os.getpid(), self.signum)
        return super().step()


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signalled_run_saves_and_exits_128_plus_the_signal(tmp_path, signum, status):
    """Not 0: a script must tell a stopped run (checkpoint, no final.json) from a finished one."""
    learner, before = SignalledLearner(signum), signal.getsignal(signum)
    # No timed checkpoint within the run: the last one is the stop's own.
    assert run_loop(tmp_path, learner, total_frames=1000, checkpoint_every_s=3600.0) == status
    assert status in INTERRUPTED_EXIT_CODES
    assert checkpoint_steps(tmp_path)[-1] == learner.steps < 100 and not (tmp_path / "final.json").exists()
    assert signal.getsignal(signum) is before  # The loop's handlers are gone.


def blocked_reentries(handler, signum) -> tuple[list[str], int]:
    """Calls the signal handler `handler`, and at each call it makes runs it again, as a second signal
    arriving there would; the calls where that second run could not finish (deadlocked) within 5 s, and
    how many calls were probed (none: the probe saw nothing, and an empty list proves nothing).

    The second run is on another thread so that a deadlock shows as a timeout, not a hung test: a
    non-reentrant lock that the first run holds blocks it on any thread.
    """
    blocked, inside, probed = [], [], []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is handler.__code__:
            inside.append(frame)
        elif event == "return" and inside and frame is inside[-1]:
            inside.pop()
        elif event in ("call", "c_call") and inside:
            sys.setprofile(None)
            probed.append(frame.f_code.co_qualname)
            second = threading.Thread(target=handler, args=(signum, None), daemon=True)
            second.start()
            second.join(5.0)
            if second.is_alive():
                blocked.append(getattr(arg, "__qualname__", None) or frame.f_code.co_qualname)
            sys.setprofile(profile)

    sys.setprofile(profile)
    try:
        handler(signum, None)
    finally:
        sys.setprofile(None)
    return blocked, len(probed)


class TwiceSignalledLearner(ScriptedLearner):
    """At step 3, a SIGTERM whose handling a second SIGTERM interrupts at each point it can."""

    def step(self):
        if self.steps == 2:
            self.blocked, self.probed = blocked_reentries(signal.getsignal(signal.SIGTERM), signal.SIGTERM)
        return super().step()


def test_a_second_signal_while_the_first_is_handled_neither_hangs_nor_loses_the_stop(tmp_path):
    """Ctrl-C reaches a study driver and its run, and the driver hands the run a SIGTERM too: the run
    gets two signals at once. A handler that took a lock (as `threading.Event.set` does) hung there."""
    learner = TwiceSignalledLearner()
    assert run_loop(tmp_path, learner, total_frames=1000, checkpoint_every_s=3600.0) == 128 + signal.SIGTERM
    assert learner.probed >= 1 and learner.blocked == []
    assert checkpoint_steps(tmp_path)[-1] == learner.steps == 3


class IdleLearner(ScriptedLearner):
    """Has nothing to learn from at its first 3 calls (PER's learner while its replay fills), then steps."""

    def __init__(self):
        super().__init__()
        self.idle = 3

    def step(self):
        if self.idle:
            self.idle -= 1
            return None
        return super().step()


def test_a_step_with_nothing_to_learn_from_does_not_end_the_run(tmp_path):
    learner = IdleLearner()
    assert run_loop(tmp_path, learner, total_frames=50) == 0
    assert learner.idle == 0 and learner.steps == 5
    assert json.loads((tmp_path / "final.json").read_text())["frames"] == 50


def test_an_infinite_loss_stops_the_run_as_a_nan_does(tmp_path, capsys):
    assert run_loop(tmp_path, ScriptedLearner(nan_at=3, bad_loss=math.inf), total_frames=1000) == 1
    assert "non-finite loss (inf)" in capsys.readouterr().err
    assert max(checkpoint_steps(tmp_path)) < 3 and not (tmp_path / "final.json").exists()


def test_a_run_that_fails_at_its_first_step_keeps_its_initial_checkpoint(tmp_path, capsys):
    assert run_loop(tmp_path, ScriptedLearner(nan_at=1), total_frames=1000, checkpoint_every_s=3600.0) == 1
    assert checkpoint_steps(tmp_path) == [0]
    assert "ckpt-0" in capsys.readouterr().err


def test_a_stop_during_the_first_checkpoint_leaves_the_record_of_its_start(tmp_path, monkeypatch):
    """A review: ckpt-0 was saved before provenance.json was written, so a stop in between left a checkpoint
    without the record of starts, which `--resume` refuses; the record comes first."""

    def stopped(self, checkpoint_number=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(tf.train.CheckpointManager, "save", stopped)
    with pytest.raises(KeyboardInterrupt):
        run_loop(tmp_path, ScriptedLearner(), total_frames=50)
    assert len(run_dir.recorded_segments(tmp_path)) == 1


class SummarisingLearner(ScriptedLearner):
    def summary(self):
        return {"policy_lag_mean": 1.5}


class RestartedActors:
    restarts = 2

    def start(self):
        pass

    def stop(self):
        pass


def test_final_json_has_learner_steps_actor_restarts_and_the_learners_own_summary(tmp_path):
    record = run_dir.RunRecord(tmp_path, PRESETS["toy"], "all")
    assert loop.run(SummarisingLearner(), tmp_path, loop.Settings(50, 3600.0, 0.0), record, RestartedActors()) == 0
    final = json.loads((tmp_path / "final.json").read_text())
    assert (final["frames"], final["learner_steps"], final["actor_restarts"]) == (50, 5, 2)  # 10 frames a step.
    assert final["policy_lag_mean"] == 1.5


def test_tensorboard_ends_where_the_run_did_in_frames(tmp_path):
    """No progress line falls due in an hour: the loop's closing log is the only one, at 50 frames."""
    record = run_dir.RunRecord(tmp_path, PRESETS["toy"], "all")
    assert loop.run(ScriptedLearner(), tmp_path, loop.Settings(50, 3600.0, 3600.0), record) == 0
    assert summary_steps(tmp_path, "learner/loss") == [50]  # Frames (10 a step), not learner steps.
    assert summary_steps(tmp_path, "progress/queue") == [50]


def tensorboard_steps(run_dir: pathlib.Path, tag: str) -> list[int]:
    """The steps of `tag` that TensorBoard's Python loader shows, after its purge of orphaned data."""
    from tensorboard.backend.event_processing import plugin_event_accumulator

    loaded = plugin_event_accumulator.EventAccumulator(str(run_dir / "tb"), tensor_size_guidance={"scalars": 0})
    loaded.Reload()
    return [event.step for event in loaded.Tensors(tag)]


def test_tensorboard_drops_what_a_run_logged_past_the_checkpoint_it_resumes_from(tmp_path):
    """A run that died between checkpoints (here its loss went NaN; a kill or a lost server is the same) had
    logged past its last checkpoint; resumed, TensorBoard's Python loader drew both starts' curves there."""

    def next_second() -> None:
        # TensorFlow names a writer's file by the second, then by a count of the process's writers compared as
        # text (".10" before ".9"): starts in one second of a process that has made many writers (this test
        # runner) would be read out of order. A training run's starts are separate processes, seconds apart.
        time.sleep(1 - time.time() % 1)

    assert run_loop(tmp_path, ScriptedLearner(nan_at=6), total_frames=1000, checkpoint_every_s=3600.0) == 1
    assert checkpoint_steps(tmp_path) == [0]
    assert tensorboard_steps(tmp_path, "learner/loss") == [10, 20, 30, 40, 50]  # A first start drops nothing.
    next_second()
    assert run_loop(tmp_path, ScriptedLearner(), total_frames=30) == 0  # Resumed from ckpt-0: frame 0.
    assert summary_steps(tmp_path, "learner/loss") == [10, 20, 30, 40, 50, 10, 20, 30]  # Both are on disk.
    assert tensorboard_steps(tmp_path, "learner/loss") == [10, 20, 30]
    next_second()
    assert run_loop(tmp_path, ScriptedLearner(), total_frames=50) == 0  # Resumed from its end: it keeps it all.
    assert tensorboard_steps(tmp_path, "learner/loss") == [10, 20, 30, 40, 50]


class CsvReadingLearner(ScriptedLearner):
    """Reads episodes.csv at each step, as a dashboard, or a kill, would find it."""

    def __init__(self, directory):
        super().__init__()
        self.directory, self.rows_seen = directory, []

    def step(self):
        with open(self.directory / "episodes.csv", newline="") as f:
            self.rows_seen.append(len(list(csv.DictReader(f))))
        return super().step()


def test_each_due_progress_line_prints_and_flushes_episodes_csv_during_the_run(tmp_path, capsys):
    learner = CsvReadingLearner(tmp_path)
    assert run_loop(tmp_path, learner, total_frames=50) == 0  # A line is due after every step.
    assert learner.rows_seen == [0, 1, 2, 3, 4]  # Each step's episode is on disk before the next step.
    assert sum(line.startswith("frames ") for line in capsys.readouterr().out.splitlines()) == 5


def test_episodes_csv_records_the_runs_wall_time(tmp_path):
    class SleepyLearner(ScriptedLearner):
        def step(self):
            time.sleep(0.06)
            return super().step()

    assert run_loop(tmp_path, SleepyLearner(), total_frames=50) == 0
    with open(tmp_path / "episodes.csv", newline="") as f:
        wall = [float(row["wall_time"]) for row in csv.DictReader(f)]
    assert len(wall) == 5 and wall == sorted(wall) and wall[-1] >= 0.2  # At least 0.3 s, rounded to 0.1 s.


def test_timed_checkpoints_come_once_an_interval(tmp_path, monkeypatch):
    """A step takes one second of the loop's clock; with a checkpoint every 2.5 s, ten steps save at 3, 6
    and 9, then at the end."""
    clock = [0.0]
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))

    class OneSecondLearner(ScriptedLearner):
        def step(self):
            clock[0] += 1.0
            return super().step()

    learner = OneSecondLearner()
    assert run_loop(tmp_path, learner, total_frames=100, checkpoint_every_s=2.5) == 0
    assert learner.extra_saves == 4


def test_a_stop_records_the_checkpointed_frames_in_provenance(tmp_path):
    """A resume's budget may not fall below them (`common.launch`): each save records them, not only the end."""
    learner = SignalledLearner(signal.SIGTERM)
    assert run_loop(tmp_path, learner, total_frames=1000, checkpoint_every_s=3600.0) == 143
    segment = json.loads((tmp_path / "provenance.json").read_text())["segments"][-1]
    assert segment["frames"] == learner.frames == 30


def test_loop_settings_take_each_field_from_its_namesake():
    config = dataclasses.replace(PRESETS["toy"], total_frames=1234, checkpoint_every_s=600.0, log_every_s=5.0)
    assert loop.settings(config) == loop.Settings(total_frames=1234, checkpoint_every_s=600.0, log_every_s=5.0)


class SignalledActors:
    """Actor processes that a Ctrl-C reaches as they start; records whether they were stopped."""

    restarts = 0

    def __init__(self):
        self.stopped = False

    def start(self):
        os.kill(os.getpid(), signal.SIGINT)

    def stop(self):
        self.stopped = True


@pytest.fixture
def stop_handlers_restored():
    """A test may replace the Ctrl-C and SIGTERM handlers: pytest's come back after it."""
    before = {stop_signal: signal.getsignal(stop_signal) for stop_signal in STOP_SIGNALS}
    yield
    for stop_signal, handler in before.items():
        signal.signal(stop_signal, handler)


class UnhandledStopError(Exception):
    pass


def test_a_stop_as_the_actors_start_saves_and_stops_them(tmp_path, stop_handlers_restored):
    """Actor processes run in sessions of their own: a stop the loop did not handle would leave them running."""

    def interrupted(signum, _):
        raise UnhandledStopError  # What reaches a run's main thread outside the loop's handler.

    signal.signal(signal.SIGINT, interrupted)
    learner, actors, path = ScriptedLearner(), SignalledActors(), tmp_path / "run"
    path.mkdir()
    record = run_dir.RunRecord(path, PRESETS["toy"], "all")
    status = loop.run(learner, path, loop.Settings(1000, 3600.0, 0.0), record, actors)
    assert status == 128 + signal.SIGINT and actors.stopped
    assert learner.steps == 0 and checkpoint_steps(path) == [0]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_driver_stop_within_a_deferred_start_is_raised_after_the_start_is_recorded(signum, stop_handlers_restored):
    """A suite or sweep starts a child, then records it; a stop raised between the two would miss the child."""
    recorded, raised_at = [], None
    raise_on_stop_signals()
    try:
        with stops_deferred():
            os.kill(os.getpid(), signum)  # Handled at once, here: the child is started, not yet recorded.
            recorded.append("child")
    except StopRequested as stop:
        raised_at = (len(recorded), stop.exit_code)
    assert raised_at == (1, 128 + signum)


# A training run as `run_to_completion` sees it: it says it is ready, saves on a signal and exits 128 + it.
STOPPABLE_RUN = """
import pathlib, signal, sys, time
def stop(signum, _):
    print(f"saved on {signum}", flush=True)
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[1]).write_text("ready")
time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_study_script_hands_a_signal_to_its_run_and_exits_with_its_status(tmp_path, signum):
    """`kill` of a reproduce script alone (not its group): the training run saves; the script says how to go on."""
    ready = tmp_path / "ready"
    script = (
        "import pathlib, sys\n"
        "from reproduce import _runs\n"
        "run_dir = pathlib.Path(sys.argv[2]).parent\n"
        "_runs.run_to_completion([sys.executable, '-c', sys.argv[1], sys.argv[2]], run_dir, lambda: False)\n"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script, STOPPABLE_RUN, str(ready)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        driver.send_signal(signum)
        output, _ = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 128 + signum, output
    assert f"saved on {signum}" in output and f"interrupted: {tmp_path} keeps its checkpoint" in output, output


def test_a_study_script_says_a_run_stopped_as_it_started_kept_nothing(tmp_path, capsys):
    """A run stopped before it made its directory (or that removed it) keeps no checkpoint to resume from."""
    stopped_while_importing = [sys.executable, "-c", "import sys; sys.exit(130)"]
    with pytest.raises(SystemExit) as exited:
        _runs.run_to_completion(stopped_while_importing, tmp_path / "run", lambda: False)
    assert exited.value.code == 130
    assert f"interrupted: {tmp_path / 'run'} did not start; run this same command again" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # Again with --fresh, the jobs the command retrained would retrain once more.
        _runs.run_to_completion(stopped_while_importing, tmp_path / "run", lambda: False, fresh=True)
    assert (
        "did not start; run this command again without --fresh to start it; it retrains anew the jobs --fresh "
        "asked that have not retrained yet" in capsys.readouterr().out
    )


def test_each_start_of_a_run_draws_from_its_own_seed(tmp_path):
    """The first start keeps the config's seed (a run never resumed is as before); each resume gets a new one."""
    seeds = [run_dir.segment_seed(7, segment) for segment in range(5)]
    assert seeds[0] == 7 and len(set(seeds)) == 5 and all(0 <= s < 2**31 for s in seeds)
    assert seeds == [run_dir.segment_seed(7, segment) for segment in range(5)]  # Reproducible.
    assert run_dir.segment_seed(8, 1) != seeds[1]
    toy_seed = PRESETS["toy"].seed
    assert run_dir.RunRecord(tmp_path, PRESETS["toy"], "all").seed == toy_seed
    run_loop(tmp_path, ScriptedLearner(), total_frames=50)
    record = run_dir.RunRecord(tmp_path, PRESETS["toy"], "all")
    assert record.index == 1 and record.seed == run_dir.segment_seed(toy_seed, 1) != toy_seed
    run_loop(tmp_path, ScriptedLearner(), total_frames=100)
    provenance = json.loads((tmp_path / "provenance.json").read_text())
    assert [s["seed"] for s in provenance["segments"]] == [toy_seed, run_dir.segment_seed(toy_seed, 1)]
    assert provenance["seeds"] == [toy_seed]  # The run's seed, as its config.json says.


def test_a_runs_wall_time_counts_each_start_once(tmp_path, monkeypatch):
    """provenance.json's total, and the running total episodes.csv logs, are the starts' own times summed."""
    clock = [0.0]
    monkeypatch.setattr(run_dir.time, "time", lambda: clock[0])
    earlier = 0.0
    for started_at, duration in [(1000.0, 600.0), (5000.0, 300.0), (9000.0, 60.0)]:  # Three starts, apart.
        clock[0] = started_at
        record = run_dir.RunRecord(tmp_path, PRESETS["toy"], "all")
        record.start(frames=0, total_frames=50)
        clock[0] += duration / 2
        record.update()  # A checkpoint midway: its time is the segment's, not counted again after it.
        clock[0] += duration / 2
        assert record.wall_time_s() == record.update() == earlier + duration
        earlier += duration
    provenance = json.loads((tmp_path / "provenance.json").read_text())
    assert [s["wall_time_s"] for s in provenance["segments"]] == [600.0, 300.0, 60.0]
    assert provenance["wall_time_s"] == 960.0


def test_a_resumed_learner_draws_from_its_starts_seed_to_the_latest_starts_budget(tmp_path):
    """`launch.run` on a resume without --frames: the learner's config is the run's, but for the seed of this
    start (`run_dir.segment_seed`) and the budget of the latest start, which had raised it and was stopped."""
    built = []

    def learner(config, *_):
        built.append(config)
        raise _ChecksPassedError

    parts = launch.Parts(
        tables=lambda _: [tables.queue("queue", 10), tables.run_identity()], validate=lambda _: None, learner=learner
    )
    agent = launch.Agent("impala", "impala.train", PRESETS, "toy", parts=lambda: parts)
    path, config = tmp_path / "run", dataclasses.replace(PRESETS["toy"], total_frames=50)
    with run_dir.starting(path, config, resume=False, overwrite=False):
        pass
    assert run_loop(path, ScriptedLearner(), total_frames=50) == 0
    assert run_loop(path, ScriptedLearner(nan_at=8), total_frames=100) != 0  # Raised to 100; stopped short of it.
    assert run_dir.trained_frames(path) < 100 and run_dir.last_budget(path) == 100
    with pytest.raises(_ChecksPassedError):
        launch.run(agent, Request(), launch.Options(run_dir=str(path), resume=True))
    seed = run_dir.segment_seed(config.seed, 2)
    assert built == [dataclasses.replace(config, total_frames=100, seed=seed)] and seed != config.seed
    assert config_lib.load(type(config), path / "config.json", "the run's") == config  # Its own seed, as saved.


def test_actor_processes_seed_by_actor_restart_and_start(monkeypatch, tmp_path):
    base = launch.Options()
    # A run's first start seeds its actors as before this existed (committed runs regenerate).
    old = int(np.random.SeedSequence([5, 2, 1]).generate_state(1)[0] % 2**31)
    assert launch.actor_seed(5, dataclasses.replace(base, actor_id=2, incarnation=1)) == old
    seeds = {
        launch.actor_seed(5, dataclasses.replace(base, actor_id=a, incarnation=i, segment=s))
        for a in range(2) for i in range(2) for s in range(3)
    }  # fmt: skip
    assert len(seeds) == 12
    commands = []
    monkeypatch.setattr(launch.subprocess, "Popen", lambda command, **_: commands.append(command) or FakeProcess())
    supervisor = launch.ActorSupervisor("per.train", tmp_path / "config.json", "localhost:1", 2, tmp_path, segment=3)
    supervisor.start()
    supervisor.stop()
    assert [c[-1] for c in commands] == ["--segment=3", "--segment=3"]


def sleeping_supervisor(tmp_path, started: list, on_restart) -> launch.ActorSupervisor:
    """A one-actor supervisor whose actors are `sleep 60` (appended to `started`); `on_restart()` runs first at each
    restart."""

    class Supervisor(launch.ActorSupervisor):
        def _start(self, actor_id):
            if self._incarnations[actor_id]:
                on_restart()
            started.append(subprocess.Popen(["sleep", "60"], start_new_session=True))
            self._processes[actor_id] = started[-1]

    return Supervisor("per.train", tmp_path / "config.json", "localhost:1", 1, tmp_path)


def test_an_actor_restarting_as_the_supervisor_stops_is_stopped_too(tmp_path):
    """The watcher saw a dead actor and is starting its successor when `stop` comes: that one must end too."""
    restarting, proceed, started = threading.Event(), threading.Event(), []

    def stop_comes_now():
        restarting.set()
        proceed.wait(10)

    supervisor = sleeping_supervisor(tmp_path, started, stop_comes_now)
    try:
        supervisor.start()
        started[0].kill()
        assert restarting.wait(10)
        stopping = threading.Thread(target=supervisor.stop)
        stopping.start()
        time.sleep(0.5)  # `stop` runs while the successor starts.
        proceed.set()
        stopping.join(30)
        time.sleep(0.5)
        assert len(started) == 2 and all(process.poll() is not None for process in started)
    finally:
        proceed.set()
        for process in started:
            process.kill()
            process.wait()


def test_a_restart_that_cannot_start_a_process_is_retried(tmp_path, capsys):
    """A failed `Popen` (no memory, no file descriptors) once ended the watcher: no actor was restarted again."""
    started, failures = [], [OSError(12, "Cannot allocate memory")]

    def fails_once():
        if failures:
            raise failures.pop()

    supervisor = sleeping_supervisor(tmp_path, started, fails_once)
    try:
        supervisor.start()
        started[0].kill()
        wait_for(lambda: len(started) == 2, timeout=10, what="the actor's restart after a failed one")
        assert supervisor.restarts == 1 and started[1].poll() is None
        assert "actor 0: restart failed ([Errno 12] Cannot allocate memory); retrying" in capsys.readouterr().out
    finally:
        supervisor.stop()
        for process in started:
            process.kill()
            process.wait()


class FakeProcess:
    pid = 0

    def poll(self):
        return None

    def terminate(self):
        pass

    def wait(self, timeout=None):
        return 0


def test_a_resume_after_a_kill_drops_the_episodes_logged_past_its_checkpoint(tmp_path, capsys):
    """SIGKILL after a flush but before a save: training plays those frames again, so their rows go."""
    assert run_loop(tmp_path, ScriptedLearner(), total_frames=50) == 0  # Checkpoint at 50 frames.
    with open(tmp_path / "episodes.csv", "a") as f:  # What a killed continuation flushed, unsaved.
        f.write("60,6,1,1.0\n70,7,1,1.1\n")
    assert run_loop(tmp_path, ScriptedLearner(), total_frames=100) == 0
    assert "dropped 2 episodes logged after the checkpoint at 50 frames" in capsys.readouterr().out
    rows = list(csv.DictReader(open(tmp_path / "episodes.csv", newline="")))
    assert [int(r["frames"]) for r in rows] == list(range(10, 101, 10))  # Each frame count once.
    final = json.loads((tmp_path / "final.json").read_text())
    assert final["episodes"] == 10 and final["mean_return_last_100"] == pytest.approx(5.5)


def test_loop_stops_on_a_non_finite_loss_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    learner = ScriptedLearner(nan_at=3)
    assert run_loop(tmp_path, learner, total_frames=1000) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "non-finite loss" in errors[0] and "last good checkpoint" in errors[0]
    assert max(checkpoint_steps(tmp_path)) < 3 and not (tmp_path / "final.json").exists()


# Reverb: adders and tables on a real in-process server. -------------------------------


def test_one_history_feeds_several_tables_and_n_step_items():
    spec = {"x": tf.TensorSpec((), tf.int32)}
    srv = server.make_server([tables.queue("queue", 100), tables.uniform_replay("replay", 100)])
    client = reverb.Client(f"localhost:{srv.port}")
    adder = adders.SequenceAdder(client, spec, 2, length=3, period=1, priorities={"queue": 1.0, "replay": 1.0})
    for t in range(5):
        adder.append({"x": np.array([t, 100 + t])})
    adder.close()
    info = client.server_info()
    assert info["queue"].current_size == info["replay"].current_size == 2 * 3  # Steps 0..2, 1..3, 2..4 per env.
    batch = next(iter(datasets.dataset(f"localhost:{srv.port}", "queue", spec, 3, 6)))
    items = sorted(map(tuple, batch["x"].numpy().tolist()))
    assert items == [(0, 1, 2), (1, 2, 3), (2, 3, 4), (100, 101, 102), (101, 102, 103), (102, 103, 104)]
    srv.stop()


def test_a_dataset_that_times_out_ends_without_a_short_batch():
    """A learner whose table runs dry mid-batch trains on no batch, not on a smaller one."""
    spec = {"x": tf.TensorSpec((), tf.int32)}
    srv = server.make_server([tables.queue("queue", 100)])
    address = f"localhost:{srv.port}"
    adder = adders.SequenceAdder(reverb.Client(address), spec, 3, length=1, period=1, priorities={"queue": 1.0})
    adder.append({"x": np.array([0, 1, 2])})  # 3 items, one per env.
    adder.close()
    sizes = [len(batch["x"]) for batch in datasets.dataset(address, "queue", spec, 1, 2, timeout_ms=200)]
    assert sizes == [2]
    srv.stop()


def test_sample_to_insert_ratio_holds_the_replay_ratio():
    """8 samples per insert (PER's 32 per 4 steps), enforced on both sides by the limiter."""
    spec = {"x": tf.TensorSpec((), tf.int32)}
    srv = server.make_server(
        [tables.uniform_replay("replay", 1000, min_size=10, samples_per_insert=8.0, error_buffer=16)]
    )
    address = f"localhost:{srv.port}"
    adder = adders.SequenceAdder(reverb.Client(address), spec, 1, length=1, period=1, priorities={"replay": 1.0})

    def insert():
        for i in range(30):  # Blocks whenever the inserts run ahead of the samples.
            adder.append({"x": np.array([i])})

    writer = threading.Thread(target=insert, daemon=True)
    writer.start()
    # The dataset ends once the limiter has blocked it for a second: all 30 inserted.
    sampled = sum(1 for _ in datasets.dataset(address, "replay", spec, 1, 1, timeout_ms=1000))
    writer.join(timeout=10)
    assert not writer.is_alive()
    # Samples beyond the first 10 inserts: 8 per insert, within the limiter's error buffer (16).
    assert abs(sampled - 8 * (30 - 10)) <= 16, sampled
    srv.stop()


def test_a_busy_port_is_refused():
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(UsageError, match=f"--port={port} is already in use"):
            server.make_server([tables.variables()], port)


def test_a_port_just_freed_by_a_stopped_server_is_taken_again():
    """A stopped server's connections linger in TIME_WAIT on its port for a minute. gRPC binds over them, but our
    check refused the port ("in use"), so Ctrl-C then `--resume --port P` failed though nothing listened. The
    lingering connection is made by hand, as a stopped Reverb server leaves one (a listener with SO_REUSEADDR, as
    gRPC's, whose end closes first): with Reverb itself, the client's end closed late in some runs only."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = listener.accept()
            accepted.close()

    def lingering() -> bool:
        found = subprocess.run(["ss", "-tan", "state", "time-wait"], capture_output=True, text=True).stdout
        return f":{port} " in found

    wait_for(lingering, 10, "the closed connection in TIME_WAIT")  # Else this test tests nothing.
    server.make_server([tables.variables()], port).stop()


@pytest.mark.parametrize(
    "family, host, address", [(socket.AF_INET, "127.0.0.1", "localhost"), (socket.AF_INET6, "::1", "[::1]")]
)
def test_a_server_is_reachable_while_its_port_accepts_connections(family, host, address):
    """The watchdogs' probe; gRPC's bracketed IPv6 form read as a host named "[::1]" never connected, and a
    healthy server's learner would have stopped."""
    with socket.socket(family) as listener:
        listener.bind((host, 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert launch.ports.accepts_connections(f"{address}:{port}", 2)
        assert not launch.server_gone(f"{address}:{port}", within_s=1.5)
    assert not launch.ports.accepts_connections(f"{address}:{port}", 2)
    assert launch.server_gone(f"{address}:{port}", within_s=1.5)


def test_a_role_is_refused_a_server_whose_tables_another_config_built():
    """A learner with another alpha trained against its server's (its config.json saying one, the table
    sampling with the other); one with another batch size waited forever on the server's rate limiter."""
    from per import agent as per_agent
    from per.config import PRESETS as PER_PRESETS

    toy = PER_PRESETS["toy"]
    srv = server.make_server(per_agent.agent_tables(toy))
    client = reverb.Client(f"localhost:{srv.port}")
    try:
        server.check_served(per_agent.agent_tables(toy), client, "A:1", "REMEDY")
        server.check_served(
            per_agent.agent_tables(dataclasses.replace(toy, num_actors=2, seed=9)), client, "A:1", "REMEDY"
        )
        cases = [
            ({"alpha": 0.3}, "built table 'replay' with sampler prioritized { priority_exponent: 0.6 }, this "
             "process's config with prioritized { priority_exponent: 0.3 }"),
            ({"replay_capacity": 5000}, "built table 'replay' with max_size 10000, this process's config with 5000"),
            ({"batch_size": 16}, "built table 'replay' with samples_per_insert 16.0, this process's config with 8.0"),
        ]  # fmt: skip
        for change, message in cases:
            with pytest.raises(UsageError, match=re.escape(message)):
                server.check_served(per_agent.agent_tables(dataclasses.replace(toy, **change)), client, "A:1", "REMEDY")
        listed = r"has no table 'unrolls' \(it has episodes, params, replay, run\); REMEDY"
        with pytest.raises(UsageError, match=listed):
            server.check_served([reverb.Table.queue("unrolls", 4)], client, "A:1", "REMEDY")
    finally:
        srv.stop()


def test_a_new_run_is_refused_a_server_whose_tables_another_run_has_used():
    """A trial: a new run's learner on a server another run had used logged that run's queued episodes as its
    own and trained on them; a PER server then saved the mixed replay over the one it had kept. A LASER sweep
    member starts on the replay the other members fill: only its own queue and parameters are asked."""
    from laser import agent as laser_agent
    from laser.config import PRESETS as LASER_PRESETS

    member = dataclasses.replace(LASER_PRESETS["toy_laser"], sweep_member=1)
    other = dataclasses.replace(member, sweep_member=0)
    srv = server.make_server(laser_agent.sweep_tables([other, member]))
    client = reverb.Client(f"localhost:{srv.port}")
    try:
        server.check_unused(laser_agent.unshared_tables(member), client, "A:1", "REMEDY")
        client.insert([np.zeros(3, np.float32)], priorities={"params_0": 1.0})  # The other member's learner.
        client.insert([np.zeros(3, np.float32)], priorities={"replay": 1.0})  # The replay they share.
        server.check_unused(laser_agent.unshared_tables(member), client, "A:1", "REMEDY")
        lone = dataclasses.replace(member, sweep_member=-1)  # Its tables are all its own, the replay among them.
        with pytest.raises(UsageError, match=r"holds 1 item\(s\) in table 'replay', another run's, "):
            server.check_unused([laser_agent.replay_table(lone)], client, "A:1", "REMEDY")
        client.insert([np.zeros(3, np.float32)], priorities={"params_1": 1.0})
        refusal = (
            "the Reverb server at A:1 already holds 1 item(s) in table 'params_1', another run's, which a new run "
            "would train on; REMEDY"
        )
        with pytest.raises(UsageError, match=f"^{re.escape(refusal)}$"):
            server.check_unused(laser_agent.unshared_tables(member), client, "A:1", "REMEDY")
    finally:
        srv.stop()


def test_a_learner_is_refused_a_server_that_another_runs_learner_claimed(tmp_path):
    """A resumed learner given another run's server (the same config) trained on that run's replay; the tables'
    settings alone cannot tell. The claim is saved with the tables; tables saved before claims have none."""
    saved, mine, other = tmp_path / "saved", tmp_path / "mine", tmp_path / "other"

    def own() -> list[reverb.Table]:  # New tables per server: a table keeps its items after its server stops.
        return [tables.run_identity(), reverb.Table.queue("q", 4)]

    assert tables.identity_table(own()) == "run" and tables.identity_table([tables.run_identity("_3")]) == "run_3"
    srv = server.make_server(own()[1:], checkpoint_dir=saved)  # Tables saved before claims existed.
    client = reverb.Client(f"localhost:{srv.port}")
    client.insert([np.zeros(2)], {"q": 1.0})
    client.checkpoint()
    srv.stop()
    srv = server.make_server(own(), checkpoint_dir=saved)
    client = reverb.Client(f"localhost:{srv.port}")
    try:
        assert client.server_info()["q"].current_size == 1 and server.claimant(client, "run") is None
        server.check_claim(client, "run", "A:1", None, "REMEDY")  # Unclaimed: a new run, or any resumed one.
        server.check_claim(client, "run", "A:1", ("b" * 32, other), "REMEDY")
        server.claim(client, "run", "a" * 32, mine)
        assert server.claimant(client, "run") == ("a" * 32, str(mine))
        server.check_claim(client, "run", "A:1", ("a" * 32, tmp_path / "moved"), "REMEDY")  # Its own id.
        server.check_claim(client, "run", "A:1", (None, mine), "REMEDY")  # No id recorded yet: its own directory.
        refusal = f"the Reverb server at A:1 serves the run in {mine} (its learner's); REMEDY"
        for run in (None, ("b" * 32, mine), ("b" * 32, other), (None, other)):
            with pytest.raises(UsageError, match=f"^{re.escape(refusal)}$"):
                server.check_claim(client, "run", "A:1", run, "REMEDY")
        client.checkpoint()
    finally:
        srv.stop()
    srv = server.make_server(own(), checkpoint_dir=saved)  # Served again from its saved tables: still claimed.
    try:
        client = reverb.Client(f"localhost:{srv.port}")
        assert server.claimant(client, "run") == ("a" * 32, str(mine))
        server.claim(client, "run", "b" * 32, other)  # A later claim replaces it.
        assert server.claimant(client, "run") == ("b" * 32, str(other))
        assert client.server_info()["run"].current_size == 1
    finally:
        srv.stop()


def test_a_learner_stops_once_a_learner_started_beside_it_has_claimed_its_server(monkeypatch, capsys):
    """Two learners started together on one server both passed `check_claim` before either claimed it, and both
    trained on its replay. The one whose claim came first stops, unsaved, once it sees the other's."""
    srv = server.make_server([tables.run_identity()])
    client = reverb.Client(f"localhost:{srv.port}")
    looks = []

    def sleep(seconds: float) -> None:
        looks.append(seconds)
        assert len(looks) <= 3, "it never stopped"

    def exit_(status: int) -> None:
        raise SystemExit(status)

    monkeypatch.setattr(server.time, "sleep", sleep)
    monkeypatch.setattr(server.os, "_exit", exit_)
    try:
        server.claim(client, "run", "a" * 32, pathlib.Path("/runs/mine"))
        with pytest.raises(AssertionError, match="it never stopped"):  # Its own claim: it trains on.
            server.exit_when_claimed(client, "run", "a" * 32, "A:1", "THEN", period_s=7.0)
        looks.clear()
        server.claim(client, "run", "b" * 32, pathlib.Path("/runs/other"))
        with pytest.raises(SystemExit) as stopped:
            server.exit_when_claimed(client, "run", "a" * 32, "A:1", "THEN", period_s=7.0)
        assert stopped.value.code == 1 and looks == [7.0]
        said = "learner: the Reverb server at A:1 now serves the run in /runs/other, whose learner claimed it after "
        assert capsys.readouterr().err == said + "this one; THEN\n"
    finally:
        srv.stop()


def test_a_server_without_checkpoints_leaves_no_temporary_directory(tmp_path, monkeypatch):
    """Reverb's default checkpointer left an empty /tmp/tmpXXXXXXXX behind per server (1,300 after a day here)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    srv = server.make_server([reverb.Table.queue("q", 4)])
    client = reverb.Client(f"localhost:{srv.port}")
    client.insert([np.zeros(2)], {"q": 1.0})
    assert client.server_info()["q"].current_size == 1
    srv.stop()
    assert list(tmp_path.iterdir()) == []
    # A checkpoint asked for later still works: Reverb makes the directory again.
    srv = server.make_server([reverb.Table.queue("q", 4)])
    client = reverb.Client(f"localhost:{srv.port}")
    # `server_info` waits for the new channel to connect; a first RPC of `checkpoint` fails fast, and once did in
    # CI ("connections to all backends failing"). An agent's client has always made other calls before it.
    client.server_info()
    assert pathlib.Path(client.checkpoint()).is_relative_to(tmp_path)
    srv.stop()


# Torsos and observation layouts. -------------------------------------------------------


def test_preprocess_learns_the_layout_from_the_observation_space():
    atari = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    frames = np.random.default_rng(0).integers(0, 256, (2, 4, 84, 84)).astype(np.uint8)
    x = networks.Preprocess(atari)(tf.constant(frames)).numpy()
    np.testing.assert_allclose(x, np.transpose(frames, (0, 2, 3, 1)) / 255.0, rtol=1e-6)
    minatar = gym.spaces.Box(0, 1, (10, 10, 4), np.uint8)
    board = np.ones((1, 10, 10, 4), np.uint8)
    np.testing.assert_array_equal(networks.Preprocess(minatar)(tf.constant(board)).numpy(), board)


def torso_variable_shapes(name: str, space: gym.spaces.Box) -> list[tuple[int, ...]]:
    torso = networks.TORSOS[name]()
    torso(networks.Preprocess(space)(tf.zeros((1, *space.shape), space.dtype)))
    return sorted(tuple(v.shape) for v in torso.trainable_variables)


def test_the_torsos_are_the_papers_networks():
    """On Atari's 4x84x84 stacks: Mnih et al. 2015's DQN, IMPALA Fig. 3's shallow and deep networks, and
    LASER §5.1's deep network with 4 times the channels."""
    atari = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    nature = [(8, 8, 4, 32), (32,), (4, 4, 32, 64), (64,), (3, 3, 64, 64), (64,), (7 * 7 * 64, 512), (512,)]
    assert torso_variable_shapes("nature_dqn", atari) == sorted(nature)
    shallow = [(8, 8, 4, 16), (16,), (4, 4, 16, 32), (32,), (9 * 9 * 32, 256), (256,)]
    assert torso_variable_shapes("shallow", atari) == sorted(shallow)
    for name, channels in [("deep", (16, 32, 32)), ("deep_x4", (64, 128, 128))]:
        # Per section: a 3x3 convolution and two residual blocks of two 3x3 convolutions each; then FC 256.
        shapes = torso_variable_shapes(name, atari)
        kernels = [shape for shape in shapes if len(shape) == 4]
        assert sorted(shape[-1] for shape in kernels) == sorted(c for c in channels for _ in range(5))
        assert {shape[:2] for shape in kernels} == {(3, 3)}
        assert (11 * 11 * channels[-1], 256) in shapes  # 84 -> 42 -> 21 -> 11.


def _conv3x3_same(x: np.ndarray, conv) -> np.ndarray:
    """A 3x3 stride-1 SAME convolution (cross-correlation, as TF's), in float64 from the module's w and b."""
    w, b = conv.w.numpy().astype(np.float64), conv.b.numpy().astype(np.float64)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    height, width = x.shape[1:3]
    out = sum(
        np.einsum("nhwc,co->nhwo", padded[:, i : i + height, j : j + width], w[i, j])
        for i in range(3)
        for j in range(3)
    )
    return out + b


def _max_pool_3x3_stride_2_same(x: np.ndarray) -> np.ndarray:
    """TF's SAME max pool: ceil(size / 2) outputs, the padding (as -inf) split with the extra row/column after."""
    n, height, width, c = x.shape
    out_h, out_w = -(-height // 2), -(-width // 2)
    pad_h, pad_w = max((out_h - 1) * 2 + 3 - height, 0), max((out_w - 1) * 2 + 3 - width, 0)
    padded = np.pad(
        x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)), constant_values=-np.inf
    )
    return np.array(
        [[padded[:, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].max(axis=(1, 2)) for j in range(out_w)] for i in range(out_h)]
    ).transpose(2, 0, 1, 3)


def test_the_deep_torso_computes_fig_3s_layers_in_order():
    """IMPALA Fig. 3 right, from the module's own weights in float64: per section a 3x3 convolution, a 3x3 stride-2
    max pool, then two residual blocks x + conv(relu(conv(relu(x)))); then ReLU, FC 256, ReLU. The variable shapes
    alone would not notice layers in another order."""
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    torso = networks.DeepTorso(channels=(4, 5, 6))
    x = tf.random.stateless_uniform((2, 13, 11, 3), [3, 4])
    got = torso(x).numpy()
    h = x.numpy().astype(np.float64)
    for conv, *blocks in torso._sections:
        h = _max_pool_3x3_stride_2_same(_conv3x3_same(h, conv))
        for block in blocks:
            h = h + _conv3x3_same(relu(_conv3x3_same(relu(h), block._conv_a)), block._conv_b)
    assert h.shape == (2, 2, 2, 6)  # 13 x 11 -> 7 x 6 -> 4 x 3 -> 2 x 2.
    linear = torso._linear
    expected = relu(relu(h).reshape(2, -1) @ linear.w.numpy().astype(np.float64) + linear.b.numpy())
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert (got > 0).any()  # Not a comparison of two zero vectors.


def test_a_residual_block_adds_its_input():
    """IMPALA Fig. 3: x + conv(relu(conv(relu(x)))); with the last convolution at 0, the block is the identity."""
    block = networks.ResidualBlock(8)
    x = tf.random.stateless_normal((2, 5, 5, 8), [0, 1])
    block(x)
    for variable in block._conv_b.variables:
        variable.assign(tf.zeros_like(variable))
    np.testing.assert_array_equal(block(x).numpy(), x.numpy())


def test_a_network_that_does_not_fit_the_env_is_named():
    minatar = gym.spaces.Box(0, 1, (10, 10, 4), np.uint8)
    with pytest.raises(UsageError, match="network 'shallow' does not fit minatar:breakout's observations"):
        networks.check_fits("shallow", minatar, "minatar:breakout")
    networks.check_fits("minatar", minatar, "minatar:breakout")
    networks.check_fits("nature_dqn", gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), "atari:pong")


def test_a_saved_config_and_a_preset_exclude_each_other(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(config_lib.to_json(PRESETS["minatar"]))
    assert resolve(config_file=str(path), frames=7) == dataclasses.replace(PRESETS["minatar"], total_frames=7)
    with pytest.raises(UsageError, match="--config and --preset exclude each other"):
        resolve(config_file=str(path), preset="toy")


def test_a_stopped_servers_hint_is_one_its_next_start_accepts(tmp_path):
    """`--resume` only where tables were saved, and in place of an `--overwrite` (the two exclude each other)."""
    (tmp_path / "checkpoints").mkdir()
    assert launch.server_stopped("per", tmp_path, launch.Options()).endswith("the same command serves new ones")
    (tmp_path / "checkpoints" / "2026-12-05T19:00:00").mkdir()
    (tmp_path / "checkpoints" / "2026-12-05T19:00:00" / "DONE").touch()
    assert launch.server_stopped("per", tmp_path, launch.Options()).endswith("the same command and --resume")
    stopped = launch.server_stopped("per", tmp_path, launch.Options(overwrite=True))
    assert stopped.endswith("the same command with --resume in place of --overwrite")
    assert launch.server_stopped("per", tmp_path, launch.Options(resume=True)).endswith("with the same command")
    assert "its tables with it (impala saves none)" in launch.server_stopped("impala", None, launch.Options())
