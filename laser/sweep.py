"""A hyper-parameter sweep of LASER agents sharing one replay (LASER §5.1, §5.4).

    python -m laser.sweep --preset minatar_laser --env minatar:breakout --frames 1e6
    python -m laser.sweep --sweep_dir runs/laser_sweep/X --resume            # continue it
    python -m laser.sweep --preset toy_laser --agents 2 --config_override trust_region=false

Members take the learning rate and entropy cost of the preset times
{1/2, 1, 2} each: 9 agents (Atari: {3e-4, 6e-4, 1.2e-3} x {5e-3, 1e-2, 2e-2}),
or the first `--agents` of them, centre first. Each member has its own seed,
network, queue and parameter table; all write every unroll to one replay
table on one Reverb server and sample from it uniformly (§5.1). A sweep of
`replay_priority=critic_loss` is refused: one member's critic loss is no
priority for the others' samples (§5.2).

One machine: this process runs the Reverb server and starts, per member, a
learner process (`laser.train --role learner`, its own run directory under
the sweep's) and `--actors` actor processes. Many machines: run the same
roles by hand against one `--role server`, e.g. with the sweep's configs:

    python -m laser.sweep --preset P --write_configs_only --sweep_dir D   # D/configs/member_<i>.json, D/tables.txt
    python -m laser.sweep --role server --sweep_dir D --port 8000         # machine A: every member's tables
    python -m laser.train --role learner --config D/configs/member_0.json --replay_address A:8000 --run_dir D/member_0
    python -m laser.train --role actor --config D/configs/member_0.json --replay_address A:8000 --actor_id 0

The replay is not checkpointed: a resumed sweep refills it.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import pathlib
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from absl import flags

from common import cli, launch, results, run_dir
from common import config as config_lib
from common.errors import UsageError
from common.signals import (
    INTERRUPTED_EXIT_CODES,
    StopRequested,
    exit_status,
    raise_on_stop_signals,
    stops_deferred,
)
from laser.config import MAX_SWEEP, PRESETS, LaserConfig, sweep_members

if TYPE_CHECKING:
    import reverb

flags.DEFINE_enum("role", "all", ["all", "server"], "all: the whole sweep here; server: only its Reverb server.")
flags.DEFINE_enum("preset", "minatar_laser", list(PRESETS), "The members' base preset (laser/config.py).")
flags.DEFINE_string("env", None, "Env spec overriding the preset's.")
cli.define_frames("Frame budget of each member (total_frames); with --resume, extends them.")
flags.DEFINE_integer("seed", None, "Base seed s; member i uses 9 s + i.", lower_bound=0)
flags.DEFINE_integer("agents", MAX_SWEEP, f"Members, 1 to {MAX_SWEEP} (the lr x entropy grid).")
flags.DEFINE_integer("actors", None, "Actor processes per member (num_actors).")
flags.DEFINE_multi_string("config_override", [], "Config field NAME=VALUE for every member; repeat for more")
flags.DEFINE_multi_string("env_option", [], "Training env option NAME=VALUE; repeat for more")
flags.DEFINE_string("sweep_dir", None, "Sweep directory (default runs/laser_sweep/<preset>_<env>_s<seed>).")
flags.DEFINE_bool("resume", False, "Continue the sweep in --sweep_dir with its own configs.")
flags.DEFINE_bool("write_configs_only", False, "Write the members' configs and table names, then exit.")
flags.DEFINE_integer("port", None, "Port of the Reverb server (default: any free port).")
FLAGS = flags.FLAGS


# The flags that make a new sweep's members; a saved sweep keeps its own.
_SWEEP_FLAGS = ("preset", "env", "seed", "agents", "config_override", "env_option")


def config_path(directory: pathlib.Path, member: int) -> pathlib.Path:
    return directory / "configs" / f"member_{member}.json"


def requested_members(directory: pathlib.Path) -> tuple[list[LaserConfig], bool]:
    """The members of a new sweep from the flags, or of the saved one; and whether it was saved."""
    saved = sorted((directory / "configs").glob("member_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    if FLAGS.role == "server" and saved:
        # Its tables are built from the saved configs as they are: a budget, actors or a resume are its members'.
        given = [name for name in (*_SWEEP_FLAGS, "frames", "actors", "resume") if FLAGS[name].present]
        if given:
            raise UsageError(f"--role server serves the saved sweep in {directory} as it is; leave out --{given[0]}")
        return [config_lib.load(LaserConfig, path, "the sweep's") for path in saved], True
    if FLAGS.resume:
        if not saved:
            raise UsageError(f"--resume: {directory} holds no sweep (no configs/member_<i>.json)")
        configs = [config_lib.load(LaserConfig, path, "the sweep's") for path in saved]
        check_same_sweep(configs)
        request = config_lib.Request(
            frames=FLAGS.frames if FLAGS["frames"].present else None,
            actors=FLAGS.actors if FLAGS["actors"].present else None,
        )  # fmt: skip
        check_budget(directory, configs, request.frames)
        return [resumed(directory, c, request) for c in configs], True
    if saved:
        if FLAGS.write_configs_only:  # Not --resume: it would be refused beside --write_configs_only.
            raise UsageError(f"sweep directory {directory} holds a sweep's configs already; give another --sweep_dir")
        raise UsageError(f"sweep directory {directory} already exists; pass --resume to continue it")
    request = config_lib.Request(
        preset=FLAGS.preset, env=FLAGS.env, frames=FLAGS.frames, actors=FLAGS.actors, seed=FLAGS.seed,
        overrides=tuple(FLAGS.config_override), env_options=tuple(FLAGS.env_option),
    )  # fmt: skip
    base = config_lib.resolve(PRESETS, FLAGS.preset, request, "laser config")
    if base.sweep_member != -1:
        raise UsageError("sweep_member is set by laser.sweep for each member; do not override it")
    members = sweep_members(base, FLAGS.agents)
    from common.networks import check_fits_env  # TensorFlow loads here, after the flags' checks.

    check_fits_env(base)
    return members, False


def check_same_sweep(configs: list[LaserConfig]) -> None:
    """A resume's sweep flags (`--preset`, `--seed`, ...) may repeat the saved sweep's, not change it.

    As `laser.train --resume` checks a run's: the flags given, over the saved
    sweep's centre member (the preset's own learning rate and entropy cost,
    `sweep_members`) taken back to the sweep's base config.
    """
    if FLAGS["agents"].present and FLAGS.agents != len(configs):
        raise UsageError(
            f"--resume runs the sweep's saved configs: --agents={FLAGS.agents}, but the sweep has {len(configs)} "
            "members; leave out --agents"
        )
    for field, flag in (("total_frames", "frames"), ("num_actors", "actors")):  # Its members take only the flags.
        if config_lib.overrides_field(FLAGS.config_override, field):
            raise UsageError(f"--config_override {field}=...: a resumed sweep takes its {field} from --{flag}")
    centre = configs[0]
    base = dataclasses.replace(centre, seed=centre.seed // MAX_SWEEP, sweep_member=-1)
    request = config_lib.Request(
        preset=FLAGS.preset if FLAGS["preset"].present else None, env=FLAGS.env, seed=FLAGS.seed,
        overrides=tuple(FLAGS.config_override), env_options=tuple(FLAGS.env_option),
    )  # fmt: skip
    config_lib.resume(base, request, PRESETS, "laser config", kind="sweep", allowed=("total_frames", "num_actors"))


def resumed(directory: pathlib.Path, config: LaserConfig, request: config_lib.Request) -> LaserConfig:
    """A member's config for a resume: without `--frames`, the budget of its own latest start, which an earlier
    resume may have raised above its saved config's (as `laser.train --resume` keeps a run's)."""
    if request.frames is None:
        request = dataclasses.replace(request, frames=run_dir.last_budget(member_run(directory, config.sweep_member)))
    return dataclasses.replace(config, **config_lib.requested_fields(request, config))


def check_budget(directory: pathlib.Path, configs: list[LaserConfig], frames: float | None) -> None:
    """A `--frames` below what a member has trained is refused here, before the server and members start."""
    if frames is None:
        return
    for config in configs:
        run = member_run(directory, config.sweep_member)
        trained = run_dir.trained_frames(run)
        if frames < trained:
            raise UsageError(
                f"--frames={frames:g}: member {config.sweep_member} has trained {trained:,} frames already; give a "
                "larger budget to train the sweep on, or leave out --frames to keep its own "
                f"({run_dir.last_budget(run) or config.total_frames:,})"
            )


def member_run(directory: pathlib.Path, member: int) -> pathlib.Path:
    return directory / f"member_{member}"


def make_server(configs: list[LaserConfig]) -> reverb.Server:
    """The sweep's Reverb server (every member's queue and parameters, one shared replay) on --port."""
    from common.reverb import server as reverb_server
    from laser import agent

    return reverb_server.make_server(agent.sweep_tables(configs), FLAGS.port)


def write_configs(directory: pathlib.Path, configs: list[LaserConfig]) -> None:
    """Each member's config (for its learner and actors) and the server's table names."""
    from laser import agent

    (directory / "configs").mkdir(parents=True, exist_ok=True)
    for config in configs:
        config_path(directory, config.sweep_member).write_text(config_lib.to_json(config) + "\n")
    (directory / "tables.txt").write_text("\n".join(t.name for t in agent.sweep_tables(configs)) + "\n")


def member_command(config: LaserConfig, config_path: pathlib.Path, run: pathlib.Path, address: str) -> list[str]:
    command = [
        sys.executable, "-m", "laser.train", "--role=learner", f"--replay_address={address}", f"--run_dir={run}",
        f"--continue_with=python -m laser.sweep --sweep_dir {run.parent} --resume",  # The sweep starts its actors.
    ]  # fmt: skip
    if (run / "config.json").exists():
        return [*command, "--resume", f"--frames={config.total_frames}", f"--actors={config.num_actors}"]
    return [*command, f"--config={config_path}"]


def summarise(directory: pathlib.Path, configs: list[LaserConfig]) -> list[dict]:
    rows = []
    for config in configs:
        run = member_run(directory, config.sweep_member)
        episodes = []
        if (run / "episodes.csv").exists():
            with open(run / "episodes.csv", newline="") as f:
                episodes = list(csv.DictReader(f))
        returns = [float(e["episode_return"]) for e in episodes]
        final = json.loads((run / "final.json").read_text()) if (run / "final.json").exists() else {}
        # An unfinished member (interrupted, or still running elsewhere) has no final.json: its last game's frames.
        frames = final.get("frames", int(episodes[-1]["frames"]) if episodes else 0)
        rows.append({
            "member": config.sweep_member, "learning_rate": config.learning_rate, "entropy_cost": config.entropy_cost,
            "seed": config.seed, "finished": final.get("frames", -1) >= config.total_frames, "frames": frames,
            "episodes": len(returns),
            "last100": round(sum(returns[-100:]) / len(returns[-100:]), 3) if returns else None,
        })  # fmt: skip
    with open(directory / "sweep_summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def member_frames(run: pathlib.Path) -> int:
    """A member's frames so far: its last finished game's (episodes.csv's last whole row), or its record's."""
    frames = run_dir.trained_frames(run)
    path = run / "episodes.csv"
    if path.exists():
        with open(path, "rb") as f:
            f.seek(max(f.seek(0, 2) - 4096, 0))  # The tail holds the last row; the file grows all run.
            tail = f.read().decode(errors="replace")
        # Written through a buffer, the file may end inside a row: only rows ended by a newline count.
        rows = tail[: tail.rfind("\n") + 1].splitlines()
        column = run_dir.EPISODE_FIELDS.index("frames")
        if len(rows) > 1 and rows[-1].split(",")[column].isdigit():
            frames = max(frames, int(rows[-1].split(",")[column]))
    return frames


def finished(run: pathlib.Path, config: LaserConfig) -> bool:
    final = run / "final.json"
    return final.exists() and json.loads(final.read_text())["frames"] >= config.total_frames


def run_sweep(directory: pathlib.Path, configs: list[LaserConfig], saved: bool) -> int:
    """Server here, a learner and its actors per member; returns the exit status.

    Ctrl-C or SIGTERM, to the driver alone or to its whole process group, is
    handed to each running learner, which saves a checkpoint; the status is
    then 128 + the signal, as it is when a member's learner alone was stopped.
    """
    server = make_server(configs)  # Before any write: a busy port fails.
    if not saved:
        write_configs(directory, configs)
    address = f"localhost:{server.port}"
    print(
        f"sweep of {len(configs)} members in {directory}; shared replay at {address}; each member's progress in "
        f"{directory / 'logs' / 'member_<i>' / 'learner.log'}",
        flush=True,
    )
    learners, supervisors, stop = {}, {}, None
    progress = run_dir.Progress(sum(c.total_frames for c in configs), configs[0].log_every_s)
    seen = {c.sweep_member: 0 for c in configs}  # Each member's frames at the last progress line.
    raise_on_stop_signals()
    try:
        for config in configs:
            with stops_deferred():  # A stop now must find the member's learner and actors recorded.
                start_member(directory, config, address, learners, supervisors)
        while any(p.poll() is None for p in learners.values()):
            time.sleep(1.0)
            if progress.due():
                running = sum(p.poll() is None for p in learners.values())
                for c in configs:  # Never below an earlier reading: a resumed member trims rows past its checkpoint.
                    seen[c.sweep_member] = max(
                        seen[c.sweep_member], member_frames(member_run(directory, c.sweep_member))
                    )
                print(progress.line(sum(seen.values()), None, members=f"{running} running"), flush=True)
            for member, process in learners.items():
                if process.poll() is not None and member in supervisors:
                    with stops_deferred():  # Popped, the supervisor is stopped by no one else.
                        supervisors.pop(member).stop()
    except StopRequested as request:  # Each learner saves a checkpoint and stops; wait for that.
        stop = request
        for process in learners.values():
            if process.poll() is None:
                process.send_signal(request.exit_code - 128)
        for process in learners.values():
            process.wait()
    for supervisor in supervisors.values():
        supervisor.stop()
    rows = summarise(directory, configs)
    for row in rows:
        print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    statuses = {member: exit_status(process.returncode) for member, process in learners.items()}
    interrupted = {m: status for m, status in statuses.items() if status in INTERRUPTED_EXIT_CODES}
    failed = [m for m, status in statuses.items() if status not in (0, *INTERRUPTED_EXIT_CODES)]
    if failed:
        logs = ", ".join(str(directory / "logs" / f"member_{m}" / "learner.log") for m in failed)
        print(f"error: member(s) {failed} failed; see {logs}", file=sys.stderr)
        return 1
    if stop is not None or interrupted:
        members = "members keep" if stop is not None else f"member(s) {sorted(interrupted)} stopped; they keep"
        again = f"python -m laser.sweep --sweep_dir {directory} --resume"
        print(f"interrupted: {members} their checkpoints; continue with {again}", flush=True)
        return stop.exit_code if stop is not None else next(iter(interrupted.values()))
    return 0


def start_member(directory: pathlib.Path, config: LaserConfig, address: str, learners: dict, supervisors: dict) -> None:
    """Starts a member's learner and actors, unless it finished earlier."""
    path = config_path(directory, config.sweep_member)
    run = member_run(directory, config.sweep_member)
    if finished(run, config):
        print(f"member {config.sweep_member}: finished earlier, kept", flush=True)
        return
    logs = directory / "logs" / f"member_{config.sweep_member}"
    logs.mkdir(parents=True, exist_ok=True)
    segment = len(run_dir.recorded_segments(run))  # Read before the learner records this start.
    learners[config.sweep_member] = subprocess.Popen(
        member_command(config, path, run, address), stdout=open(logs / "learner.log", "a"), stderr=subprocess.STDOUT
    )
    supervisors[config.sweep_member] = launch.ActorSupervisor(
        "laser.train", path, address, config.num_actors, logs, segment
    )  # fmt: skip
    supervisors[config.sweep_member].start()


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    if FLAGS.role == "server" and not FLAGS.sweep_dir:
        raise UsageError(
            "--role server needs --sweep_dir: a sweep's (--write_configs_only writes one), or a new one it writes"
        )
    if FLAGS.role == "server" and FLAGS["write_configs_only"].present:
        raise UsageError("--write_configs_only is for --role all; --role server does nothing with it, leave it out")
    if FLAGS.write_configs_only and (FLAGS.resume or FLAGS["port"].present):
        # A resume with it rewrote the saved configs in place and resumed nothing; it starts no server.
        raise UsageError(
            f"--write_configs_only writes a new sweep's configs; leave out --{'resume' if FLAGS.resume else 'port'}"
        )
    for field in ("seed", "env"):  # They name the default sweep directory, as their flags give them.
        if config_lib.overrides_field(FLAGS.config_override, field):
            raise UsageError(f"--config_override {field}=...: give the sweep's {field} with --{field}")
    default = f"runs/laser_sweep/{FLAGS.preset}_{(FLAGS.env or PRESETS[FLAGS.preset].env).replace(':', '_')}"
    directory = pathlib.Path(FLAGS.sweep_dir or f"{default}_s{FLAGS.seed or 0}")
    results.check_directory(f"sweep directory {directory}", directory)
    configs, saved = requested_members(directory)
    if FLAGS.role == "server":
        server = make_server(configs)
        if not saved:  # A mistyped directory would otherwise serve a new sweep unannounced.
            write_configs(directory, configs)
            print(f"{directory} held no sweep: wrote a new one of {len(configs)} members ({FLAGS.preset})", flush=True)
        print(f"Reverb server of the sweep listening on port {server.port} (all interfaces)", flush=True)
        server.wait()
        return
    if FLAGS.write_configs_only:
        write_configs(directory, configs)
        print(f"{len(configs)} member configs in {directory / 'configs'}; table names in {directory / 'tables.txt'}")
        return
    sys.exit(run_sweep(directory, configs, saved))


if __name__ == "__main__":
    cli.run(main)
