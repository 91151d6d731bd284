"""Bad input at the command line: one line on stderr, exit status 2, no traceback."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest
import usage_cases

from common import cli, errors
from common import config as config_lib
from common.errors import UsageError
from impala.config import PRESETS as IMPALA_PRESETS
from laser.config import PRESETS as LASER_PRESETS
from per.config import PRESETS as PER_PRESETS

REPO = pathlib.Path(__file__).resolve().parent.parent


def run(*args, **kwargs):
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300, **kwargs)


# The first lines of a script that runs a study's `main` against a repository root, the script's argv[1] (its
# results/ and runs/), in place of this one. The script goes on to import the study and stub its training.
AGAINST_ROOT = """
import json, pathlib, sys
import common.results, reproduce
from common import cli, errors
root = pathlib.Path(sys.argv.pop(1))
reproduce.RESULTS = common.results.RESULTS = root / "results"
reproduce.REPO_ROOT = root
"""


def assert_one_line_usage_error(result, *fragments):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["atari:pongg"], ["unknown atari name 'pongg'", "accepted: alien"]),
        (["minecraft:world"], ["unknown env family", "atari, minatar, dmlab, toy"]),
        (["dmlab:nowhere"], ["unknown dmlab name", "rooms_watermaze"]),
        (["atari:pong", "--option", "sticky_action_prob=2"], ["sticky_action_prob", "[0, 1]"]),
        (["atari:pong", "--option", "noop_max=many"], ["noop_max", "expected an integer"]),
        (["atari:pong", "--option", "colour=1"], ["unknown option 'colour'", "frame_skip"]),
        (["atari:pong", "--steps=lots"], ["steps"]),
        (["toy:catch", "--steps=-1"], ["--steps=-1", "not a positive integer"]),  # Printed "-1 steps in 0.00s".
        (["atari:pong", "--no-such-flag"], ["unknown flag --no-such-flag; accepted: ", "--option", "--steps"]),
        (["dmlab:rooms_watermaze"], ["deepmind_lab", "bazel"]),
        # Tracebacks from ale-py and numpy before: past their seed ranges, past a C int, past memory.
        (["toy:catch", "--seed=-1"], ["--seed=-1", "[0, 2147483647]"]),
        (["minatar:breakout", "--seed=5000000000"], ["--seed=5000000000", "[0, 2147483647]"]),
        (["atari:pong", "--option", "noop_max=1e20"], ["noop_max=100000000000000000000", "[0, 2,147,483,646]"]),
        (["atari:pong", "--option", "screen_size=100000"], ["screen_size=100000", "[1, 1,024]"]),
    ],
)
def test_env_cli_bad_input(args, fragments):
    assert_one_line_usage_error(run(sys.executable, "-m", "common.envs", *args), *fragments)


def test_env_cli_good_input_runs():
    result = run(sys.executable, "-m", "common.envs", "toy:catch", "--steps", "50")
    assert result.returncode == 0 and "toy:catch" in result.stdout


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["atari_sticky", "pong=1"], ["unknown score protocol", "atari_noop, atari_human_starts, dmlab30"]),
        (["atari_noop", "pongg=1"], ["unknown atari_noop game 'pongg'"]),
        (["atari_noop", "pong=high"], ["expected GAME=NUMBER"]),
    ],
)
def test_scores_cli_bad_input(args, fragments):
    assert_one_line_usage_error(run(sys.executable, "-m", "common.scores", *args), *fragments)


def test_reproduce_cli_bad_profile_and_filter():
    assert_one_line_usage_error(run(sys.executable, "-m", "reproduce", "--profile=huge"), "profile", "quick|full")
    assert_one_line_usage_error(run(sys.executable, "-m", "reproduce", "--only=nothing_matches"), "reproduce.scores")
    # A trial's `--only=` matched every script and started the whole quick profile.
    assert_one_line_usage_error(run(sys.executable, "-m", "reproduce", "--only="), "--only= is empty", "reproduce.per")
    # `make reproduce PROFILE=` said "Missing value for flag --profile", not what it takes.
    result = run("make", "--no-print-directory", "-o", ".venv/.installed-requirements", "-n", "reproduce", "PROFILE=")
    command = result.stdout.strip().splitlines()[-1].split()  # Under `make test`, too: no "make[1]: Entering".
    assert command[-3:] == ["-m", "reproduce", "--profile="], result.stdout
    assert_one_line_usage_error(run(sys.executable, *command[1:]), "--profile=: value should be one of <quick|full>")


def _unsupported_pythons(tmp_path):
    fake = tmp_path / "python3.12"
    fake.write_text("#!/bin/sh\necho 3.12\n")
    fake.chmod(0o755)
    found = [str(fake)]
    real = pathlib.Path(os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python"))
    if real.exists():  # A real 3.12 where this machine has one.
        found.append(str(real))
    return found


def test_make_refuses_an_unsupported_python_in_one_line(tmp_path):
    for python in _unsupported_pythons(tmp_path):
        result = run("make", "-s", f"PYTHON={python}", "setup")
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "use CPython 3.9, 3.10 or 3.11" in lines[0]
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("flag", ["--frames=0.5", "--frames=0", "--eval_episodes=0"])
def test_reproduce_atari_takes_no_zero_as_unset(flag):
    result = run(sys.executable, "-m", "reproduce.impala.atari", flag)
    assert_one_line_usage_error(result, f"{flag}: need a whole number >= 1")
    assert result.stderr.count("--") == 1  # The error names the flag given, not one left at its default.


def _files(directory: pathlib.Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in directory.rglob("*") if p.is_file()}


EMPTY_LIST = ("= names no ", "; accepted:")  # `--games=` is a mistake, not the default (it once trained nothing).
KEPT = ("would replace them; ask for those seeds",)  # Exact studies: another draw replaced the committed one.
UNUSED = ("; leave it out",)  # An audit: `--fresh` to a study that trains no runs, `--seed` to one that draws nothing.


@pytest.mark.parametrize(
    "module, flag, outputs, fragments",
    [
        ("reproduce.per.minatar", "--variants=", "per/full", EMPTY_LIST),
        ("reproduce.per.minatar", "--games=", "per/full", EMPTY_LIST),  # Once read as "the default games": 15 jobs.
        ("reproduce.per.atari", "--games=", "per/full", EMPTY_LIST),
        ("reproduce.laser.minatar", "--studies=", "laser/full", EMPTY_LIST),
        ("reproduce.impala.minatar", "--games=", "impala/full", EMPTY_LIST),
        ("reproduce.per.cliffwalk", "--fresh", "per/full", ("--fresh: ", *UNUSED)),
        ("reproduce.impala.vtrace_operator", "--fresh", "impala/full", ("--fresh: ", *UNUSED)),
        ("reproduce.laser.propositions", "--fresh", "laser/full", ("--fresh: ", *UNUSED)),
        ("reproduce.per.cliffwalk", "--seeds=2", "per/full", ("seeds 0-9, not seeds 0-1 (--seed=0 --seeds=2)", *KEPT)),
        ("reproduce.per.cliffwalk", "--seed=1", "per/full", ("not seeds 1-10 (--seed=1 --seeds=10)", *KEPT)),
        ("reproduce.impala.vtrace_operator", "--seed=3", "impala/full", ("from seed 0, not seed 3 (--seed=3)", *KEPT)),
        ("reproduce.laser.propositions", "--seed=3", "laser/full", ("propositions.* were computed from seed 0", *KEPT)),
        ("reproduce.scores.published_tables", "--seed=3", "scores", ("--seed: ", *UNUSED)),
        ("reproduce.scores.published_tables", "--fresh", "scores", ("--fresh: ", *UNUSED)),
    ],
)
def test_reproduce_refuses_a_flag_it_cannot_honour_and_leaves_the_results(module, flag, outputs, fragments):
    """Each once ran as if the flag meant something else or nothing, and rewrote or kept a committed table."""
    before = _files(REPO / "results" / outputs)
    result = run(sys.executable, "-m", module, "--profile=full", flag)
    assert_one_line_usage_error(result, *fragments)
    assert _files(REPO / "results" / outputs) == before


STUDY_SCRIPTS = [
    "reproduce", "reproduce.dashboard", "reproduce.suite", "reproduce.suite.aggregate", "reproduce.per.minatar",
    "reproduce.per.atari", "reproduce.per.cliffwalk", "reproduce.impala.minatar", "reproduce.impala.atari",
    "reproduce.laser.minatar", "reproduce.benchmarks.learning_check", "reproduce.benchmarks.peers",
]  # fmt: skip


@pytest.mark.parametrize("module", STUDY_SCRIPTS)
def test_the_study_scripts_check_their_flags_without_loading_tensorflow(module):
    """Importing TensorFlow takes 5-8 s here: a mistyped flag is answered at once, and each run imports it itself.

    The configs and the run directory's helpers keep TensorFlow out (`impala.config.CORRECTIONS`,
    `per.replay_config`, `common.config.RMSPROP_FORMS`, `run_dir.summary_writer`).
    """
    check = f"import sys, {module}; print(sorted({{'tensorflow', 'reverb', 'sonnet'}} & set(sys.modules)))"
    result = run(sys.executable, "-c", check)
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr


_CHECK_BEFORE_TENSORFLOW = """
import json, sys
from absl import flags
from common import cli, errors
module, cases = sys.argv[1], json.loads(sys.argv[2])
entry = __import__(module, fromlist=["main"])
statuses = []
for case in cases:
    flags.FLAGS.unparse_flags()
    sys.argv = [module, *case]
    try:
        cli.run(entry.main)
    except SystemExit as exit:
        statuses.append(exit.code)
print(json.dumps([statuses, sorted({"tensorflow", "reverb", "sonnet"} & set(sys.modules))]))
"""


@pytest.mark.parametrize("module", ["impala.train", "per.train", "laser.train"])
def test_training_refuses_bad_input_before_loading_tensorflow(module, tmp_path):
    """`common.launch` imports an agent's TensorFlow side (`Agent.parts`) only after the flags, the config and the
    run directory have passed their checks: a mistyped command is answered in under a second, not after 5-8 s."""
    existing, empty = tmp_path / "run", tmp_path / "empty"
    existing.mkdir()
    (existing / "config.json").write_text("{}")
    empty.mkdir()
    cases = [
        ["--preset=nope"], ["--config_override=nope=1"], ["--frames=abc"], ["--env=minatar:nope"], ["--seed=-1"],
        [f"--run_dir={existing}"], [f"--run_dir={empty}", "--resume"], ["--role=learner"],
        ["--role=actor", "--replay_address=localhost:1", "--config_override=nope=1"],
        ["--role=actor", "--replay_address=localhost:1", f"--run_dir={existing}"],
        ["--role=learner", "--replay_address=localhost:1", "--tables_dir=t"], ["--segment=1"],
        ["--role=learner", "--replay_address=localhost:1", "--actor_id=1"],
        ["--role=actor", "--replay_address=localhost:1", "--actor_id=-1"], ["--connect_timeout_s=5"],
        ["--role=actor", "--replay_address=localhost:1", "--connect_timeout_s=0"],
    ]  # fmt: skip
    result = run(sys.executable, "-c", _CHECK_BEFORE_TENSORFLOW, module, json.dumps(cases))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [[2] * len(cases), []], result.stderr


@pytest.mark.parametrize("module", ["impala.evaluate", "per.evaluate", "laser.evaluate"])
def test_evaluation_refuses_bad_input_before_loading_tensorflow(module, tmp_path):
    """The RUN_DIR count, --episodes, --envs and the run's config.json are checked before TensorFlow loads."""
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "config.json").write_text("{not json")
    # A run stopped before its first checkpoint: answered after TensorFlow's import once, 100 s on a busy machine.
    unsaved = tmp_path / "unsaved"
    (unsaved / "checkpoints").mkdir(parents=True)
    presets = {"impala.evaluate": IMPALA_PRESETS["toy"], "per.evaluate": PER_PRESETS["toy"]}
    (unsaved / "config.json").write_text(config_lib.to_json(presets.get(module, LASER_PRESETS["toy_laser"])))
    cases = [[], ["a", "b"], [str(tmp_path / "none")], [str(corrupt)], ["--episodes=0", "a"], ["--envs=0", "a"]]
    cases.append([str(unsaved)])
    result = run(sys.executable, "-c", _CHECK_BEFORE_TENSORFLOW, module, json.dumps(cases))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [[2] * len(cases), []], result.stderr


def test_the_laser_sweep_refuses_bad_input_before_loading_tensorflow(tmp_path):
    existing, empty, a_file = tmp_path / "sweep", tmp_path / "empty", tmp_path / "a_file"
    (existing / "configs").mkdir(parents=True)
    (existing / "configs" / "member_0.json").write_text("{}")
    empty.mkdir()
    a_file.write_text("kept")
    cases = [
        ["--preset=nope"], ["--agents=0"], ["--config_override=replay_fraction=1.5"],
        ["--config_override=sweep_member=3"], [f"--sweep_dir={existing}"], [f"--sweep_dir={empty}", "--resume"],
        [f"--sweep_dir={existing}", "--resume", "--seed=4"], ["--role=server"],
        ["--role=server", f"--sweep_dir={existing}", "--write_configs_only"],
        [f"--sweep_dir={existing}", "--resume", "--write_configs_only"], ["--write_configs_only", "--port=8000"],
        ["--config_override=seed=3"], ["--config_override= env =minatar:asterix"],
        [f"--sweep_dir={existing}", "--write_configs_only"],
        # A file where the directory goes was a traceback and exit 1 (a new user's trial).
        [f"--sweep_dir={a_file}"], [f"--sweep_dir={a_file}/sub"], [f"--sweep_dir={a_file}", "--write_configs_only"],
    ]  # fmt: skip
    result = run(sys.executable, "-c", _CHECK_BEFORE_TENSORFLOW, "laser.sweep", json.dumps(cases))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [[2] * len(cases), []], result.stderr
    assert a_file.read_text() == "kept"


def test_a_cliffwalk_of_no_seeds_is_refused_and_leaves_the_results():
    """`--seeds=0` once ran no seed, emptied the committed cliffwalk.csv and ended in a traceback."""
    before = _files(REPO / "results" / "per")
    result = run(sys.executable, "-m", "reproduce.per.cliffwalk", "--profile=full", "--seeds=0")
    assert_one_line_usage_error(result, "--seeds=0: 0 is not a positive integer")
    assert _files(REPO / "results" / "per") == before


def test_a_results_directory_that_is_a_file_is_refused_and_the_file_kept(tmp_path, monkeypatch):
    """A trial's `touch results/per/quick` made every PER study's quick profile a traceback (FileExistsError)."""
    from common import results

    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    mine = tmp_path / "results" / "per" / "quick"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    with pytest.raises(UsageError, match=r"^results/per/quick is a file; it must name a directory"):
        results.output_dir("per", "quick")
    assert mine.read_text() == "mine"
    assert results.output_dir("per", "full") == tmp_path / "results" / "per" / "full"


@pytest.mark.parametrize(
    "module, under, message",
    [
        ("reproduce.benchmarks.learning_check", "", "is a file; it must name a directory"),
        # Each once ran its whole benchmark, then ended in a traceback writing its results.
        ("reproduce.benchmarks.learning_check", "/sub", "notes.txt is a file, not a directory"),
        ("per.benchmark_replay", "/sub", "notes.txt is a file, not a directory"),
    ],
)
def test_an_output_directory_that_cannot_be_made_is_refused_and_the_file_kept(tmp_path, module, under, message):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    profile = ["--profile=full"] if module.startswith("reproduce.") else []  # The committed table it reads.
    result = run(sys.executable, "-m", module, *profile, f"--out={mine}{under}")
    assert_one_line_usage_error(result, f"--out={mine}{under}", message)
    assert mine.read_text() == "mine"


@pytest.mark.parametrize(
    "module, flag, outputs",
    [
        ("per.benchmark_replay", "--iterations=10", "per/benchmarks"),  # Seen: it replaced the 10^5-item table.
        ("per.benchmark_memory", "--transitions=2000", "per/benchmarks"),
        ("per.benchmark_agent", "--seconds=1", "per/benchmarks"),
        ("impala.benchmark_vtrace", "--calls=3", "impala/benchmarks"),
        ("impala.benchmark_throughput", "--seconds=2", "impala/benchmarks"),
        ("laser.benchmark", "--seconds=1", "laser/benchmarks"),
        ("reproduce.benchmarks.peers", "--runs=1", "impala/benchmarks"),
    ],
)
def test_a_benchmark_under_other_flags_is_refused_before_it_replaces_the_committed_one(module, flag, outputs):
    before = _files(REPO / "results" / outputs)
    result = run(sys.executable, "-m", module, flag)
    assert_one_line_usage_error(result, "hold the measurement of `python -m", f"differs in {flag}", "outside results/")
    assert _files(REPO / "results" / outputs) == before


_KEEPS_MEASUREMENT = """
import json, pathlib, sys
from absl import flags
from common import cli, results
flags.DEFINE_float("seconds", 15, "")
flags.DEFINE_list("actors", ["1"], "")
flags.DEFINE_bool("fast", False, "")
flags.DEFINE_string("place", "here", "")
flags.DEFINE_string("out", None, "")
committed, recorded = pathlib.Path(sys.argv.pop(1)), sys.argv.pop(1)
results.RESULTS = committed.parent  # As if it were results/<paper>/benchmarks.
(committed / "bench.provenance.json").write_text(json.dumps({"command": recorded}))
cli.run(lambda argv: results.check_keeps_measurement(pathlib.Path(flags.FLAGS.out or committed), "bench", "out",
                                                      ignore=("place",)))
"""
RECORDED = "python -m bench --seconds 60 --actors=1,2 --fast"


@pytest.mark.parametrize(
    "recorded, flags, refused",
    [
        (RECORDED, ["--seconds=60", "--actors", "1,2", "--fast"], None),  # The same flags, written otherwise.
        (RECORDED, ["--seconds=60", "--actors=1,2", "--fast", "--place=there"], None),  # Where, not what.
        (RECORDED, ["--seconds=60", "--actors=1,2", "--out=elsewhere"], None),  # Not into results/.
        (RECORDED, ["--seconds=60", "--actors=1,2"], "--fast=False (measured with True)"),
        (RECORDED, ["--seconds=61", "--actors=1,2", "--fast"], "--seconds=61.0 (measured with 60.0)"),
        (RECORDED, ["--seconds=60", "--actors=1", "--fast"], "--actors=1 (measured with 1,2)"),
        (RECORDED, ["--seconds=61", "--actors=1,2", "--fast", "--out=COMMITTED"], "--seconds=61.0"),  # results/.
        (RECORDED + " --alsologtostderr --verbosity 1", ["--seconds=60", "--actors=1,2", "--fast"], None),  # absl's.
        (
            "python -m bench --seconds abc --gone=3",
            [],
            "--seconds=15.0 (measured with abc); flags this version lacks (gone)",
        ),
        ("python bench.py --seconds 60 --actors=1,2 --fast", ["--seconds=60", "--actors=1,2", "--fast"], None),
    ],
)
def test_a_measurement_is_kept_from_other_flags_only(tmp_path, recorded, flags, refused):
    committed = tmp_path / "benchmarks"
    committed.mkdir()
    flags = [flag.replace("COMMITTED", str(committed)) for flag in flags]
    result = run(sys.executable, "-c", _KEEPS_MEASUREMENT, str(committed), recorded, *flags)
    if refused is None:
        assert result.returncode == 0, result.stderr
    else:
        assert_one_line_usage_error(result, refused)


@pytest.mark.parametrize("where", ["/proc/nonexistent/suite", "notes.txt/suite"])
def test_a_suite_directory_that_cannot_be_made_is_one_line(tmp_path, where):
    """Each was a traceback (NotADirectoryError, FileNotFoundError) after the suite's checks."""
    (tmp_path / "notes.txt").write_text("mine")
    suite_dir = where if where.startswith("/") else str(tmp_path / where)
    flags = ("--agent=impala", "--preset=toy", "--suite=toy:catch", "--frames=100", f"--suite_dir={suite_dir}")
    result = run(sys.executable, "-m", "reproduce.suite", *flags)
    assert_one_line_usage_error(result, f"--suite_dir={suite_dir} cannot be created")
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "module, refused_after",
    [
        # Each with a flag its main refuses right after the words' check, where it has one: were the words
        # let through again, the script fails at once on that flag rather than running its studies.
        ("reproduce", "--only=nothing_matches"), ("reproduce.per.minatar", "--games=pong"),
        ("reproduce.per.atari", "--games=nope"), ("reproduce.impala.minatar", "--games=pong"),
        ("reproduce.impala.atari", "--games=nope"), ("reproduce.laser.minatar", "--games=pong"),
        ("reproduce.benchmarks.learning_check", "--game=pong"), ("reproduce.per.cliffwalk", ""),
        ("reproduce.impala.vtrace_operator", ""), ("reproduce.laser.propositions", ""),
        ("reproduce.scores.published_tables", ""),
    ],
)  # fmt: skip
def test_a_reproduce_script_refuses_words_that_are_not_flags(module, refused_after):
    # `reproduce.per.minatar breakout` trained the default games, breakout's name ignored.
    result = run(sys.executable, "-m", module, "breakout", "--profile=quick", *refused_after.split())
    assert_one_line_usage_error(result, "unexpected arguments ['breakout']; flags only")


def test_a_negative_seed_is_refused():
    result = run(sys.executable, "-m", "reproduce.per.minatar", "--seed=-1")
    assert_one_line_usage_error(result, "seed")


def test_an_unknown_flag_names_the_accepted_ones_with_those_adopted():
    result = run(sys.executable, "-m", "reproduce.per.minatar", "--game=breakout")
    assert_one_line_usage_error(result, "unknown flag --game; accepted: ", "--games", "--profile", "--variants")


def test_a_study_scripts_flag_given_to_the_driver_is_sent_to_the_study_script():
    result = run(sys.executable, "-m", "reproduce", "--fresh")
    assert_one_line_usage_error(
        result,
        "unknown flag --fresh; accepted: --only, --profile (a study's own flags, such as --fresh, --games and",
        "--frames, go to its script: python -m reproduce.per.minatar --profile quick --fresh, say)",
    )


@pytest.mark.parametrize("help_flag", ["--help", "--helpshort"])
def test_a_reproduce_scripts_help_lists_the_shared_flags(help_flag):
    result = run(sys.executable, "-m", "reproduce.per.cliffwalk", help_flag)
    assert result.returncode == 0, result.stderr
    for flag in ("  --profile:", "  --seed:", "  --[no]fresh:"):
        assert flag in result.stdout


@pytest.mark.parametrize(
    ("module", "accepted"),
    [("per.evaluate", "accepted: --envs, --episodes, --log_every_s, --seed"), ("reproduce.dashboard", "no flags")],
)
def test_an_unknown_flag_names_those_of_a_shared_module_or_none(module, accepted):
    result = run(sys.executable, "-m", module, "--episdoes=3")
    assert_one_line_usage_error(result, "unknown flag --episdoes; ", accepted)


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        # It wrote NaN rows over vtrace.csv. (absl's bounds, as impala.benchmark_throughput's --seconds.)
        ("impala.benchmark_vtrace", ["--repeats=0"], "--repeats"),
        ("impala.benchmark_throughput", ["--actors=1,x"], "--actors: 'x' is not a positive integer; expected e.g."),
        # common.cli.flags_only, as every entry point that takes no positional arguments.
        ("reproduce.benchmarks.peers", ["sample_factory"], "unexpected arguments ['sample_factory']; flags only"),
        ("per.benchmark_memory", ["--transitions=10"], "--transitions=10: must be >= 1000"),
        ("per.benchmark_agent", ["--seconds=0"], "--seconds=0.0: must be > 0"),
    ],
)
def test_a_benchmark_refuses_bad_input_before_measuring_and_keeps_its_results(module, args, message):
    agent = "per" if module.startswith("per.") else "impala"  # The peers' results are IMPALA's.
    outputs = sorted((REPO / "results" / agent / "benchmarks").iterdir())
    before = {path: path.read_bytes() for path in outputs if path.is_file()}
    assert_one_line_usage_error(run(sys.executable, "-m", module, *args), message)
    assert {path: path.read_bytes() for path in outputs if path.is_file()} == before


BENCHMARK_CASES = {
    "per.benchmark_replay": [
        *[
            ((f"--sizes={sizes}",), f"--sizes={sizes}: need integers in [2, 2,147,483,647]")
            for sizes in ("", "x", "1,1000", "1e4", "1000,100000000000")  # The last: Reverb's TypeError before.
        ],
        (("--rounds=0",), "need --rounds >= 1, --iterations >= --rounds, --batch_size >= 1 and --chunk_length >= 1"),
        (("--iterations=2", "--rounds=3"), "--iterations >= --rounds"),
        (("--chunk_length=0",), "--chunk_length >= 1"),
        (("--batch_size=0",), "--batch_size >= 1"),  # Was a traceback from Reverb's sampler.
        (("--env=atari:pongg",), "unknown atari name 'pongg'"),
    ],
    "per.benchmark_agent": [
        (("--envs_per_actor=",), "--envs_per_actor= names no count"),
        (("--envs_per_actor=1,x",), "--envs_per_actor: 'x' is not a positive integer"),
        (("--envs_per_actor=0",), "--envs_per_actor: '0' is not a positive integer"),
        (("--envs_per_actor=3",), "update_period=4 must be a multiple of envs_per_actor=3"),
        (("--warmup_s=0",), "--warmup_s=0.0: must be > 0"),
        (("--alone_s=-1",), "--alone_s=-1.0: must be > 0"),
        (("--repeats=0",), "--repeats=0: must be > 0"),
        (("--env=dmlab:rooms_watermaze",), "measures PER's minatar and atari presets; use minatar:GAME or atari:GAME"),
        (("--env=toy:catch",), "measures PER's minatar and atari presets"),  # Was "PER has no toy presets": it has.
    ],
    "per.benchmark_memory": [
        (("--env=dmlab:rooms_watermaze",), "PER has no dmlab preset; use one of"),
        (("--env=toy:nope",), "unknown toy name 'nope'"),
    ],
}


@pytest.mark.parametrize("module", BENCHMARK_CASES)
def test_each_benchmark_flag_check_is_one_line_before_measuring(module, tmp_path):
    """Every flag check of the PER benchmarks, from one process per benchmark; nothing under results/ changes."""
    before = usage_cases.snapshot(REPO / "results" / "per" / "benchmarks")
    cases = BENCHMARK_CASES[module]
    outcomes = usage_cases.run_cases(module, [args for args, _ in cases], tmp_path, run_dir_flag=False)
    for args, message in cases:
        usage_cases.assert_one_line_error(outcomes[args][0], message)
    assert usage_cases.snapshot(REPO / "results" / "per" / "benchmarks") == before


# The agent benchmark's report from made-up rates: 2 envs counts x 2 process layouts x 3 replays.
BENCHMARK_REPORT = """
import importlib.util, itertools, sys
from per import benchmark_agent as b
# As if run as `python -m per.benchmark_agent --env atari:pong --repeats 3`.
sys.modules["__main__"].__spec__ = importlib.util.find_spec("per.benchmark_agent")
sys.argv = ["benchmark_agent.py", "--env", "atari:pong", "--repeats", "3"]
rows = [{"measurement": "env", "agent_steps_per_s": 1000.0}, {"measurement": "learner", "updates_per_s": 250.0,
        "agent_steps_per_s": 1000.0}]
acting = {1: 3000.0, 4: 4000.0}  # Acting bounds 750 and 800 agent steps/s.
rows += [{"measurement": "acting", "envs_per_actor": n, "agent_steps_per_s": rate} for n, rate in acting.items()]
rate = {"uniform": 300.0, "rank": 285.0, "proportional": 300.0}
for n, actors, replay in itertools.product((1, 4), (0, 1), rate):
    steps = rate[replay] * n * (1 + actors) * (0.95 if (replay, n) == ("rank", 4) else 1.0)
    rows.append({"measurement": "end_to_end", "replay": replay, "actors": actors, "envs_per_actor": n,
                 "agent_steps_per_s": steps, "updates_per_s": steps / 4, "bytes_per_transition": 1000.0,
                 "rank_tracker_bytes_per_item": 0.0, "of_bound": steps / 500,
                 "of_acting_bound": steps / (1 / (1 / acting[n] + 1 / 1000.0))})
print(b.markdown(rows, b.benchmark_config("minatar:breakout", "proportional", 2000), 15, (0.1, 0.2), 60, "agent"))
"""


def test_the_agent_benchmark_reports_each_envs_count_apart():
    result = run(sys.executable, "-c", BENCHMARK_REPORT)
    assert result.returncode == 0, result.stderr
    report = result.stdout
    # The command with its flags (a trial found the committed Pong report's header without them).
    assert "Produced by `python -m per.benchmark_agent --env atari:pong --repeats 3` (see its docstring" in report
    # 285 x 4 envs x 2 processes x 0.95 = 2,166: 433% of the bound (500), 271% of the acting bound (800).
    assert "| rank | 1 | 4 | 2,166 |  | 541.5 | 1,000 | 0 | 433% | 271% |" in report
    assert (
        "- acting alone, 4 env(s) per actor (the policy's forward pass, the env, the replay's inserts): "
        "4,000 agent steps/s; acting bound 1/(1/acting + 1/learner): 800\n"
    ) in report
    # 1 - 285/300 is 0.050000000000000044 in floats: printed as 5.0%, it meets the <= 5% target.
    for n, cost, verdict in ((1, "5.0%", "meets"), (4, "9.8%", "misses")):
        assert (
            f"- 0 actor process(es), {n} env(s) per actor: rank-based costs {cost} of proportional's agent "
            f"steps/s ({verdict} the <= 5% target)."
        ) in report
        assert f"- uniform, {n} env(s) per actor: one actor process runs 2.00x the single process's" in report
    # Uniform at 1 env: 300 and 600 agent steps/s, against the bound of 500 and the acting bound of 750.
    assert "of the bound 60% and 120% (target >= 80%); of the acting bound 40% and 80%." in report
    assert "Load average (1 min) at start 0.1, at end 0.2, on " in report and "nothing else ran" in report


ACTING_ALONE = """
from common import launch
from per import benchmark_agent as b
config = b.benchmark_config("minatar:breakout", "rank", 2000, 4)
launch.use_threads(config.learner_threads)
print(b.acting_rate(config, 0.5)["agent_steps_per_s"])
"""


def test_acting_alone_stores_every_transition_it_times():
    # `acting_rate` checks the table's size against the transitions it stepped (and raises if they differ):
    # with the replay ratio's limiter, nothing sampling would have blocked the inserts instead.
    result = run(sys.executable, "-c", ACTING_ALONE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert float(result.stdout.split()[-1]) > 0


def test_the_agent_benchmark_reports_each_rates_median_over_the_rounds_and_its_range(tmp_path):
    import csv

    from common.results import write_csv
    from per import benchmark_agent as b

    runs = []
    for run, (env, learner, end) in enumerate(
        [(1000.0, 1000.0, 300.0), (3000.0, 600.0, 100.0), (2000.0, 500.0, 200.0)]
    ):
        runs += [
            {"measurement": "env", "run": run, "agent_steps_per_s": env},
            {"measurement": "learner", "run": run, "updates_per_s": learner / 4, "agent_steps_per_s": learner},
            {"measurement": "acting", "run": run, "envs_per_actor": 4, "agent_steps_per_s": 1200.0 - 100 * run},
            {"measurement": "end_to_end", "run": run, "replay": "uniform", "actors": 1, "envs_per_actor": 4,
             "agent_steps_per_s": end, "updates_per_s": end / 4, "bytes_per_transition": 1000.0 + run,
             "rank_tracker_bytes_per_item": 0.0},
        ]  # fmt: skip
    env, learner, acting, end = b.medians(runs)
    assert (env["agent_steps_per_s"], learner["agent_steps_per_s"], learner["updates_per_s"]) == (2000, 600, 150)
    assert (end["agent_steps_per_s"], end["updates_per_s"], end["bytes_per_transition"], end["runs"]) == (
        200,
        50,
        1001,
        3,
    )
    assert (end["agent_steps_per_s_min"], end["agent_steps_per_s_max"]) == (100, 300)
    assert end["of_bound"] == pytest.approx(200 / (1 / (1 / 2000 + 1 / 600)), abs=1e-3)  # The medians' bound.
    assert acting["agent_steps_per_s"] == 1100 and acting["of_acting_bound"] == ""
    assert end["of_acting_bound"] == pytest.approx(200 / (1 / (1 / 1100 + 1 / 600)), abs=1e-3)
    assert b.rate_range(end) == "100–300" and b.rate_range({"agent_steps_per_s": 1.0}) == ""
    for rows, name in ((b.medians(runs), "medians.csv"), (b.run_rows(runs), "runs.csv")):  # Same columns in each row.
        assert len({tuple(row) for row in rows}) == 1, {tuple(row) for row in rows}
        write_csv(tmp_path / name, rows)
        assert len(list(csv.DictReader(open(tmp_path / name)))) == len(rows)


def test_an_empty_output_directory_is_refused_not_the_default():
    result = run(sys.executable, "-m", "reproduce.benchmarks.learning_check", "--profile=full", "--out=")
    assert_one_line_usage_error(result, "--out= is empty; it must name a directory")


@pytest.mark.parametrize(
    ("module", "flag"),
    [
        ("per.evaluate", "--log_every_s=nan"),  # NaN passes absl's lower bounds: every comparison is false.
        ("laser.benchmark", "--seconds=inf"),
        ("reproduce.per.atari", "--frames=-inf"),
    ],
)
def test_a_float_flag_that_is_not_finite_is_refused_before_anything_runs(module, flag):
    result = run(sys.executable, "-m", module, flag)
    assert_one_line_usage_error(result, f"{flag}: expected a finite number")


@pytest.mark.parametrize("module", ["per.train", "reproduce.per.minatar"])
def test_help_into_a_closed_pipe_is_quiet(module):
    """`--help | head` (or `| less`, quit early): the reader leaves before the help is written, no traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [sys.executable, "-m", module, "--help"], cwd=REPO, stdout=write, stderr=subprocess.PIPE, text=True,
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (0, "")


def test_an_entry_points_process_runs_tensorflow_without_loading_keras():
    """TF 2.15 imports Keras as it loads (about 1.4 s of CPU a process); no entry point uses it."""
    script = (
        "import sys\n"
        "from common import cli\n"
        "def main(argv):\n"
        "    import reverb, sonnet as snt, tensorflow as tf\n"
        "    keras = sorted(name for name, module in sys.modules.items() if module and name.split('.')[0] == 'keras')\n"
        "    print(float(snt.Linear(1, w_init=tf.ones_initializer())(tf.ones([1, 2]))[0, 0]), keras)\n"
        "cli.run(main)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "2.0 []"


REPRODUCE_ENTRY = textwrap.dedent(
    """
    import json, sys
    from absl import flags
    from common.signals import exit_status
    from reproduce import __main__ as entry

    codes = json.loads(sys.argv[1])
    calls = []
    entry.discover = lambda: sorted(codes)
    # A script's status as `run_script` gives it (a signal's death, Popen's -N, as the shell says it, 128 + N), no stop.
    entry.run_script = lambda command: (calls.append(command[2:]) or exit_status(codes[command[2]]), None)
    argv = ["reproduce", *sys.argv[2:]]
    argv = flags.FLAGS(argv)
    try:
        entry.main(argv)
        code = 0
    except SystemExit as exit:
        code = exit.code
    print("RESULT " + json.dumps({"code": code, "calls": calls}))
    """
)


def reproduce_entry(codes: dict[str, int], *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    result = subprocess.run(
        [sys.executable, "-c", REPRODUCE_ENTRY, json.dumps(codes), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT ")), result


def test_make_reproduce_fails_when_a_script_fails_or_is_killed_and_passes_its_profile():
    """A script killed by a signal (the OOM killer's SIGKILL: Popen's -9, 137 to a shell) has failed too."""
    codes = {"reproduce.a.one": 0, "reproduce.a.two": -9, "reproduce.b.three": 3}
    outcome, result = reproduce_entry(codes, "--profile=full")
    assert outcome["code"] == 1, result.stderr
    assert outcome["calls"] == [[script, "--profile=full"] for script in sorted(codes)]
    assert "2 of 3 reproduce scripts failed: reproduce.a.two, reproduce.b.three" in result.stderr


def test_make_reproduce_defaults_to_the_quick_profile_and_exits_0_when_all_pass():
    outcome, result = reproduce_entry({"reproduce.a.one": 0, "reproduce.b.two": 0}, "--only=reproduce.a")
    assert outcome == {"code": 0, "calls": [["reproduce.a.one", "--profile=quick"]]}, result.stderr
    assert "all 1 reproduce scripts completed" in result.stdout


@pytest.mark.parametrize("text, expected", [("1", True), ("TRUE", True), ("Yes", True), ("0", False), ("No", False)])
def test_a_boolean_option_takes_every_documented_spelling(text: str, expected: bool):
    """`--config_override=use_lstm=1` (or `=0`, any case) must set the flag, not be refused."""
    assert cli.parse_value("use_lstm", text, False) is expected


def test_an_integer_option_takes_5e6_and_returns_an_int():
    """Budgets are written 5e6: accepted, and an int (not the float 5000000.0 that would print as such)."""
    value = cli.parse_value("total_frames", "5e6", 0)
    assert value == 5_000_000 and type(value) is int


def test_an_assignment_needs_an_equals_sign_and_takes_an_empty_value():
    """`name` alone is refused; `name=` is an empty value, not a missing `=`."""
    with pytest.raises(UsageError, match="expected NAME=VALUE"):
        cli.parse_assignments(["tag"], {"tag": "x"}, "--config_override")
    assert cli.parse_assignments(["tag="], {"tag": "x"}, "--config_override") == {"tag": ""}


def test_positive_integers_refuse_zero_and_an_empty_list():
    """`--actors=0` or `--actors=` would benchmark nothing: each is one usage error."""
    assert cli.positive_integers("--actors", ["1", "4"], "1,2") == [1, 4]
    with pytest.raises(UsageError, match="'0' is not a positive integer"):
        cli.positive_integers("--actors", ["0"], "1,2")
    with pytest.raises(UsageError, match="names no count"):
        cli.positive_integers("--actors", [], "1,2")


def test_an_integer_option_refuses_a_word_and_a_fraction():
    """`batch_size=many` or `=2.5` is one usage error, not 0 or a silently truncated 2."""
    for text in ("many", "2.5"):
        with pytest.raises(UsageError, match=rf"option batch_size='{text}': expected an integer"):
            cli.parse_value("batch_size", text, 32)


def test_a_float_option_refuses_a_word_and_nan():
    """`learning_rate=fast` is a usage error (not a ValueError traceback); `=nan` would train on NaN."""
    with pytest.raises(UsageError, match="expected a float"):
        cli.parse_value("learning_rate", "fast", 0.1)
    with pytest.raises(UsageError, match="expected a finite number"):
        cli.parse_value("learning_rate", "nan", 0.1)


def test_an_option_without_a_default_type_is_text():
    """A field whose default is None takes the text as given: `3` stays the string "3"."""
    assert cli.parse_value("tag", "3", None) == "3"


def test_an_empty_boolean_is_refused():
    """`use_lstm=` names no value: refused, not read as false."""
    with pytest.raises(UsageError, match="expected true or false"):
        cli.parse_value("use_lstm", "", False)


def test_a_field_assigned_two_values_is_refused():
    """`--config_override seed=5 --config_override seed=6` trained seed 6, silently (a new user's trial); the same
    value twice is no conflict."""
    with pytest.raises(UsageError, match=r"^--config_override sets seed twice, to 5 and 6; give it once$"):
        cli.parse_assignments(["seed=5", "seed=6"], {"seed": 0}, "--config_override")
    assert cli.parse_assignments(["seed=5", "seed=5"], {"seed": 0}, "--config_override") == {"seed": 5}


def test_an_assignment_splits_at_the_first_equals_sign():
    """`tag=a=b` sets tag to "a=b" (a value may contain `=`), not an unknown field "tag=a"."""
    assert cli.parse_assignments(["tag=a=b"], {"tag": "x"}, "--config_override") == {"tag": "a=b"}


TWO_FLAGS_MAIN = (
    "from absl import flags; from common import cli; flags.DEFINE_float('rate', 1.0, 'r'); "
    "flags.DEFINE_integer('n', 1, 'n'); cli.run(lambda argv: print('ran'))"
)


def test_run_says_an_integer_flag_needs_a_whole_number():
    """`--n=lots` is "expected a whole number", not Python's "invalid literal for int() with base 10"."""
    result = run(sys.executable, "-c", TWO_FLAGS_MAIN, "--n=lots")
    assert result.returncode == 2 and result.stderr.strip().endswith("flag --n=lots: expected a whole number")


@pytest.mark.parametrize("help_flag", ["-h", "--help"])
def test_help_prints_the_whole_docstring_and_exits_0(help_flag: str):
    """`-h` is help too, and the help is the entry point's whole docstring, then its flags."""
    result = run(sys.executable, "-m", "reproduce.dashboard", help_flag)
    assert result.returncode == 0, result.stderr
    assert "This module lives outside the paper folders" in result.stdout


@pytest.mark.parametrize(
    "command, stop",
    [
        (["-m", "starting.imports"], "SIGINT"),
        (["-mstarting.imports"], "SIGINT"),
        (["-m", "starting.imports"], "SIGTERM"),
    ],
)
def test_a_stop_while_a_command_imports_is_one_line_and_exit_128_plus_the_signal(
    tmp_path: pathlib.Path, command: list[str], stop: str
):
    """A Ctrl-C in a command's first second (a terminal's, or a driver's handed to a run it has just started) came
    out of whichever import was running as a traceback, or as SIGABRT from inside TensorFlow's; a SIGTERM ended it
    with no word. Here a module run by `python -m` is stopped while it imports: its package imports `common`
    first, as each of ours does."""
    package = tmp_path / "starting"
    package.mkdir()
    (package / "__init__.py").write_text("import common\n")
    stopped = f"import os, signal, time\nos.kill(os.getpid(), signal.{stop})\ntime.sleep(20)\n"
    (package / "imports.py").write_text(stopped)
    result = subprocess.run(
        [sys.executable, *command], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert result.returncode == 128 + signal.Signals[stop], result.stderr
    assert result.stderr == "python -m starting.imports: interrupted; run the same command again\n"


def test_importing_common_outside_a_command_keeps_the_stop_handlers():
    """A library use (a test runner, a notebook) keeps Python's KeyboardInterrupt and SIGTERM's default: only
    `python -m` gets the exit."""
    check = (
        "import signal, common; "
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGTERM) == 0)"
    )
    result = run(sys.executable, "-c", check, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert result.returncode == 0 and result.stdout == "True True\n", result.stderr  # SIG_DFL is 0.


def test_an_entry_point_puts_back_the_sigterm_handler_it_found():
    """`cli` makes SIGTERM a Ctrl-C that exits 143 while the entry point runs, and only then (a library caller's
    handler comes back)."""
    seen = []

    def main():
        seen.append(signal.getsignal(signal.SIGTERM))

    def mine(signum, _):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        errors.cli(main)()
        assert seen[0] is not mine and signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
