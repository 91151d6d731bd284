"""Throughput of ours against a peer system: `python -m reproduce.benchmarks.peers --peer sample_factory`.

Installs the peer into its own venv (`.peers/<peer>/`, from the pins in
`reproduce/benchmarks/peers/requirements/`) on first use, then runs ours and
each of the peer's configurations in turn, `--runs` rounds, each run for
`--warmup` + `--seconds` after its start-up. Writes
`results/impala/benchmarks/peers.{csv,md}` and `peers.provenance.json`.
A peer that cannot be installed is one line and exit status 2.
"""

from __future__ import annotations

import pathlib
import shlex
import sys
import time

from absl import flags

from common import cli, provenance
from common.errors import UsageError, choice_error
from common.results import REPO_ROOT, check_keeps_measurement, chosen_dir
from reproduce.benchmarks.peers import measure, report, systems, venv

PEERS = ("sample_factory",)
# What each peer's versions are reported for (peers.provenance.json).
PEER_PACKAGES = {"sample_factory": ["sample-factory", "torch", "ale-py", "gymnasium", "numpy", "envpool"]}

flags.DEFINE_enum("peer", "sample_factory", PEERS, "The peer system to measure against.")
flags.DEFINE_list(
    "peer_configs", list(systems.SAMPLE_FACTORY_CONFIGS), "The peer's configurations to measure, each its own `config`."
)
flags.DEFINE_integer("runs", 3, "Rounds; each round runs ours and every peer configuration once, in turn.")
flags.DEFINE_float("seconds", 90.0, "Measuring window of each run, after its warm-up.")
flags.DEFINE_float("warmup", 20.0, "Seconds from a run's first trained frames to its window (not measured).")
flags.DEFINE_float("startup_timeout", 600.0, "A run that has trained no frame after this many seconds failed.")
flags.DEFINE_string("out", None, "Output directory (default results/impala/benchmarks).")
flags.DEFINE_string("peer_dir", str(REPO_ROOT / ".peers"), "Directory of the peers' venvs (outside git).")
flags.DEFINE_string("base_python", sys.executable, "Python 3.11 interpreter that creates the peer's venv.")
FLAGS = flags.FLAGS


def check_flags() -> measure.Window:
    for config in FLAGS.peer_configs:
        if config not in systems.SAMPLE_FACTORY_CONFIGS:
            raise choice_error("--peer_configs entry", config, systems.SAMPLE_FACTORY_CONFIGS)
    if FLAGS.runs < 1 or FLAGS.seconds <= 0 or FLAGS.warmup < 0 or FLAGS.startup_timeout <= 0:
        raise UsageError("--runs must be >= 1, --seconds and --startup_timeout > 0, and --warmup >= 0")
    directory = pathlib.Path(FLAGS.peer_dir) / FLAGS.peer
    if FLAGS["base_python"].present and venv.python(directory).exists():  # It only creates a venv.
        raise UsageError(
            f"--base_python: {directory} holds the peer's venv already, which is reused (its pins reinstalled if "
            "edited); leave --base_python out, or give --peer_dir another directory"
        )
    return measure.Window(FLAGS.warmup, FLAGS.seconds, FLAGS.startup_timeout)


def peer_systems(window: measure.Window) -> tuple[list[measure.System], pathlib.Path, list[str]]:
    """The peer's systems to run, its interpreter, and notes on configurations left out."""
    directory = pathlib.Path(FLAGS.peer_dir) / FLAGS.peer
    interpreter = venv.ensure(FLAGS.peer, directory, FLAGS.base_python)
    configs, notes = list(FLAGS.peer_configs), []
    if any(c.startswith("envpool") for c in configs) and not venv.ensure_optional(FLAGS.peer, "envpool", directory):
        configs = [c for c in configs if not c.startswith("envpool")]
        notes.append(f"envpool did not install here (see {directory / 'install.log'}): its configuration is missing.")
    # sample-factory's own stop, should ours fail to stop it.
    backstop_s = window.startup_timeout_s + window.warmup_s + 2 * window.seconds
    return [systems.sample_factory(c, interpreter, backstop_s) for c in configs], interpreter, notes


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    started = time.time()
    window = check_flags()
    out = chosen_dir("--out", FLAGS.out, "impala", "benchmarks")
    check_keeps_measurement(out, "peers", "out", ignore=("peer_dir", "base_python", "startup_timeout"))  # Not what.
    peers, interpreter, notes = peer_systems(window)
    rows, resolved, every = [], {}, [systems.ours(), *peers]
    for run, system in measure.schedule(every, FLAGS.runs):
        print(f"run {run}/{FLAGS.runs}: {system.system} {system.config} ...", flush=True)
        result = measure.measure(system, window)
        rows.append(report.row(system.system, system.config, run, result))
        if result.resolved_config is not None:  # The config each system resolved, from its first run.
            resolved.setdefault(f"{system.system}/{system.config}", result.resolved_config)
        rate = "-" if result.frames_per_s is None else f"{result.frames_per_s:,.0f}"
        print(f"  {rate} frames/s; load {result.load_1min_start:.2f} -> {result.load_1min_end:.2f} {result.note}")
    # sys.argv, not argv: absl has taken the flags out of argv.
    command = shlex.join(["python", "-m", "reproduce.benchmarks.peers", *sys.argv[1:]])
    report.write(out, rows, FLAGS.peer, command, notes)
    provenance.write(
        out, "peers.provenance.json", config=resolved, seeds=[0], frames=None, wall_time_s=time.time() - started,
        scale="benchmark",
        extra={
            "peer": FLAGS.peer, "peer_versions": venv.versions(interpreter, PEER_PACKAGES[FLAGS.peer]),
            "runs": FLAGS.runs, "seconds": FLAGS.seconds, "warmup": FLAGS.warmup,
            "commands": {f"{s.system}/{s.config}": s.command(pathlib.Path("SCRATCH")) for s in every},
        },
    )  # fmt: skip
    print((out / "peers.md").read_text())


if __name__ == "__main__":
    cli.run(main)
