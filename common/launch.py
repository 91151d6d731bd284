"""The roles every agent runs in: all | server | learner | actor.

One machine (`--role all`, the default): a Reverb server in the learner's
process, the learner, and `num_actors` actor processes talking gRPC to
localhost. Many machines: each role on its own, Reverb the only channel.

An agent hands `run` an `Agent`: its presets, and a function that imports
its `Parts` (its tables, a check of its config, builders of its learner and
actor). `run` owns the order of a start: resolve the config, validate
everything, and only then create the run directory, so a start that fails
leaves nothing behind. TensorFlow and Reverb load only once the flags, the
config and the run directory have passed their checks, so a mistyped command
is answered in about a second rather than after TensorFlow's several.
"""

from __future__ import annotations

import dataclasses
import pathlib
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np
from absl import flags

from common import cli, native_log, process_exit, run_dir, signals, tables_dir
from common import config as config_lib
from common.errors import UsageError
from common.reverb import ports

if TYPE_CHECKING:
    import reverb

    from common import loop

ROLES = ("all", "server", "learner", "actor")
# How long an actor keeps trying to reach a vanished Reverb server before it exits.
ACTOR_PATIENCE_S = 30.0
# Where an agent with `checkpoint_tables` keeps its Reverb checkpoints.
TABLES_DIR = "replay"
TABLES_LOG = "replay_server.log"  # What the server logs while it starts (and loads the tables).


@dataclasses.dataclass(frozen=True)
class Parts:
    """An agent's TensorFlow side, imported by `Agent.parts` once a start's input has been checked."""

    tables: Callable[[Any], Sequence[reverb.Table]]
    validate: Callable[[Any], None]  # A UsageError for a config that cannot run; creates nothing.
    learner: Callable[[Any, reverb.Client, str, pathlib.Path], loop.Learner]  # (config, client, address, run dir)
    actor: Optional[Callable[[Any, reverb.Client, int], None]] = None  # (config, client, seed); acts until stopped.
    # The tables only this run writes, empty when a new run starts (`check_unused`); None: all of `tables`.
    own_tables: Optional[Callable[[Any], Sequence[reverb.Table]]] = None


@dataclasses.dataclass(frozen=True)
class Agent:
    """What an agent's `train.py` declares; the rest is shared."""

    name: str  # Run directories default to runs/<name>/<preset>_<env>_s<seed>.
    module: str  # Actor processes start as `python -m <module> --role=actor ...`.
    presets: Mapping[str, Any]
    default_preset: str
    parts: Callable[[], Parts]  # Imports the agent's modules (and TensorFlow): called after the checks.
    # With --role all: the server checkpoints its tables into RUN_DIR/replay
    # (`Learner.save_extra` calls `client.checkpoint()`), and a resumed run
    # starts its server from them, so a replay survives a restart; a separate
    # --role server keeps them in its --tables_dir (`common.tables_dir`).
    checkpoint_tables: bool = False
    # The roles that use each flag the agent's `train.py` defines beside `define_flags`' (`check_role_flags`).
    role_flags: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Options:
    """How to run: the role and its plumbing. None means "not given"."""

    role: str = "all"
    run_dir: Optional[str] = None
    resume: bool = False
    overwrite: bool = False
    replay_address: Optional[str] = None
    port: Optional[int] = None
    actor_id: int = 0
    incarnation: int = 0
    segment: int = 0
    connect_timeout_s: float = 30.0
    tables_dir: Optional[str] = None
    continue_with: Optional[str] = None
    given: frozenset[str] = frozenset()  # The flags named on the command line, defaulted or not.


def define_flags(agent_name: str, presets: Mapping[str, Any], default_preset: str) -> None:
    """The flags every agent's entry point shares; `--help` lists the config fields."""
    fields = dataclasses.fields(presets[default_preset])
    listed = ", ".join(f"{f.name}={f.default!r}" for f in fields if f.name != "env_options")
    flags.DEFINE_enum("role", "all", ROLES, "all: server, learner and actors here; or one role of a multi-machine run.")
    flags.DEFINE_enum("preset", default_preset, list(presets), f"Named config preset ({agent_name}/config.py).")
    flags.DEFINE_string("config", None, "A saved config.json to run instead of --preset (e.g. for --role actor).")
    flags.DEFINE_string("env", None, "Env spec overriding the preset's, e.g. atari:breakout.")
    cli.define_frames(
        "Frame budget (total_frames), e.g. 5e6; by default the preset's, or with --resume the run's own. "
        "With --resume, another budget, not below the frames trained, replaces the run's: a larger one extends it, "
        "a smaller one ends it sooner."
    )
    flags.DEFINE_integer("actors", None, "Actor processes (num_actors).")
    flags.DEFINE_integer("seed", None, "Seed overriding the preset's.", lower_bound=0, upper_bound=config_lib.MAX_SEED)
    flags.DEFINE_multi_string(
        "config_override", [], f"Config field NAME=VALUE; repeat for more. Fields (dataclass defaults; a preset "
        f"sets its own values): {listed}",
    )  # fmt: skip
    flags.DEFINE_multi_string("env_option", [], "Training env option NAME=VALUE; repeat for more")
    flags.DEFINE_string("run_dir", None, f"Run directory (default runs/{agent_name}/<preset>_<env>_s<seed>).")
    flags.DEFINE_bool("resume", False, "Continue the run in --run_dir with its own config.json.")
    flags.DEFINE_bool("overwrite", False, "Delete an existing --run_dir first.")
    flags.DEFINE_string("replay_address", None, "HOST:PORT of the Reverb server (learner and actor roles).")
    flags.DEFINE_integer("port", None, "Port of the Reverb server this process starts (default: any free port).")
    flags.DEFINE_integer("actor_id", 0, "This actor's index (actor role); it seeds the actor's envs.", lower_bound=0)
    flags.DEFINE_integer(
        "incarnation", 0, "How many times this actor was restarted (seeds differ).", lower_bound=0
    )  # fmt: skip
    flags.DEFINE_integer(
        "segment", 0, "Which start of its run this actor serves: 0 first, then one more per --resume (seeds differ; "
        "a resumed learner prints it).", lower_bound=0,
    )  # fmt: skip
    flags.DEFINE_float("connect_timeout_s", 30.0, "How long to wait for a Reverb server before giving up.")
    flags.DEFINE_string(
        "tables_dir", None, "Server role of an agent whose checkpoints include its Reverb tables (PER): where the "
        "server saves them at each of the learner's checkpoints; --resume serves them again.",
    )  # fmt: skip
    flags.DEFINE_string(
        "continue_with", None, "Learner role, set by a driver that starts the learner and its actors "
        "(laser.sweep): the command that continues the run, said in place of the learner's own.",
    )  # fmt: skip


def from_flags(values: flags.FlagValues) -> tuple[config_lib.Request, Options]:
    """The request and options of the flags `define_flags` made; call from `main` only."""

    def given(name: str):
        return values[name].value if values[name].present else None

    request = config_lib.Request(
        preset=given("preset"), config_file=given("config"), env=given("env"), frames=given("frames"),
        actors=given("actors"), seed=given("seed"), overrides=tuple(values.config_override),
        env_options=tuple(values.env_option),
    )  # fmt: skip
    options = Options(
        role=values.role, run_dir=given("run_dir"), resume=values.resume, overwrite=values.overwrite,
        replay_address=given("replay_address"), port=given("port"), actor_id=values.actor_id,
        incarnation=values.incarnation, segment=values.segment, connect_timeout_s=values.connect_timeout_s,
        tables_dir=given("tables_dir"), continue_with=given("continue_with"),
        given=frozenset(name for name in values if values[name].present),
    )  # fmt: skip
    return request, options


def run(agent: Agent, request: config_lib.Request, options: Options) -> None:
    """Runs the role `options.role`; a learner exits the process with the loop's status."""
    what = f"{agent.name} config"
    if options.role in ("actor", "learner") and not options.replay_address:
        raise UsageError(f"--role {options.role} needs --replay_address HOST:PORT")
    if options.replay_address is not None:
        ports.check_address(options.replay_address)
    check_tables_dir(agent, options)
    check_role_flags(agent, options)
    check_server_keeps_tables(agent, options)  # After: a flag the role refuses is the mistake, not one it lacks.
    if not options.connect_timeout_s > 0:
        raise UsageError(f"--connect_timeout_s={options.connect_timeout_s:g}: must be > 0 (seconds)")
    config_class = type(agent.presets[agent.default_preset])
    if options.resume and (options.run_dir and options.role in ("all", "learner") or options.tables_dir):
        # The run's (or the tables') own config.json is the base (`config_lib.resume`, below): resolved on a
        # preset here, the request's overrides would be checked against the wrong one.
        config = None
    else:  # A resume without --run_dir finds its run where the same command without --resume trained it.
        config = config_lib.resolve(agent.presets, agent.default_preset, request, what)
    if options.port is not None and options.role in ("all", "server"):
        ports.check_port_free(options.port)  # Now, not after TensorFlow's import (about 30 s on a busy machine).
    if options.role == "actor":
        if getattr(config, "num_actors", 1) == 0:  # PER's learner that acts itself: its replay is not for actors.
            raise UsageError(
                "--role actor: this config's learner acts itself (num_actors=0); give the actor the --actors N that "
                "its learner was started with, beside --config RUN_DIR/config.json (which keeps the first start's "
                "num_actors), or start the learner with --actors N"
            )
        run_actor(agent.parts(), config, options)
        return
    if options.role == "server":
        run_server(agent, request, options, config)
        return
    directory = pathlib.Path(options.run_dir or default_run_dir(agent, request, config))
    run_dir.check(directory, resume=options.resume, overwrite=options.overwrite)
    if options.resume or options.overwrite:
        run_dir.check_trained_by(directory, agent.module, overwrite=options.overwrite)
    if directory.is_dir():
        run_dir.hold(directory)  # Refused, before anything starts, if another process trains into it.
    budget_note = None
    if options.resume:
        saved = config_lib.load(config_class, directory / "config.json", "the run's")
        trained = run_dir.trained_frames(directory)
        if trained and not run_dir.has_checkpoint(directory):
            raise UsageError(
                f"--resume: {directory} has trained {trained:,} frames and holds no checkpoint to continue from "
                f"(none that {directory / 'checkpoints' / 'checkpoint'} names); pass --overwrite to train it anew"
            )
        if run_dir.has_checkpoint(directory) and not (directory / "provenance.json").exists():
            # Without the record of its starts, this start would be taken for the first: its seed's draws again,
            # and the earlier starts' wall time lost.
            raise UsageError(
                f"--resume: {directory} holds checkpoints but no provenance.json, the record of its starts; "
                "restore it, or pass --overwrite to train it anew"
            )
        budget = run_dir.last_budget(directory)
        asked = config_lib.requested_fields(request, saved).get("total_frames")  # --frames, or an override's.
        # Its own budget, given again, is refused only by what the run has not trained: nothing, or the rest.
        if asked is not None and asked < trained and asked != budget:
            given = f"--frames={request.frames:g}" if request.frames is not None else f"total_frames={asked}"
            raise UsageError(
                f"{given}: the run has trained {trained:,} frames already; give a larger budget "
                f"to train it on, or leave out --frames to keep its own ({budget or 0:,})"
            )
        if asked is None:  # Keep the budget of the latest start, which a resume may have raised.
            request = dataclasses.replace(request, frames=budget)
        config = config_lib.resume(saved, request, agent.presets, what)
        budget_note = budget_changed(budget, config.total_frames, saved.total_frames)
        if run_dir.finished(directory, config.total_frames):
            # Not a start: one would save its checkpoint and replay again and add an empty segment.
            print(
                f"nothing to train: {directory} has trained {trained:,} frames, its budget was "
                f"{config.total_frames:,}; give a larger --frames to train it on", flush=True,
            )  # fmt: skip
            return
    parts = agent.parts()  # TensorFlow and Reverb load here, once the input has passed the checks above.
    from common import loop
    from common.reverb import server as reverb_server
    from common.reverb import tables as reverb_tables

    use_threads(config)  # Before `validate`, which may run TF's first op.
    parts.validate(config)
    native_log.filter_stderr()
    tables_in_run_dir = options.role == "all" and agent.checkpoint_tables
    if options.role == "all" and not tables_in_run_dir:
        server = reverb_server.make_server(parts.tables(config), options.port)
        address = f"localhost:{server.port}"
    else:
        address = options.replay_address
    client = None if tables_in_run_dir else reverb_server.connect(address, options.connect_timeout_s)
    own_tables = (parts.own_tables or parts.tables)(config)
    identity = reverb_tables.identity_table(own_tables)
    if options.role == "learner":
        reverb_server.check_served(parts.tables(config), client, address, one_config(agent))
        if options.resume:
            run = (run_dir.run_id(directory), directory.resolve())
            reverb_server.check_claim(client, identity, address, run, OWN_SERVER)
        else:
            reverb_server.check_claim(client, identity, address, None, NEW_SERVER)
            reverb_server.check_unused(own_tables, client, address, NEW_SERVER)
    with run_dir.starting(directory, config, resume=options.resume, overwrite=options.overwrite):
        if tables_in_run_dir:
            # Only now: --overwrite has removed an old run's tables, --resume loads its own.
            with native_log.redirected(directory / TABLES_LOG):  # Loading logs a line per 100 chunks.
                server = reverb_server.make_server(parts.tables(config), options.port, directory / TABLES_DIR)
            address = f"localhost:{server.port}"
            client = reverb_server.connect(address, options.connect_timeout_s)
        record = run_dir.RunRecord(directory, config, options.role)
        reverb_server.claim(client, identity, record.run_id, directory.resolve())
        if options.role == "learner":  # A learner started beside it on the same server may claim it after this.
            stop = "stopping without saving (the run keeps its last checkpoint)"
            watch = (client, identity, record.run_id, address, stop)
            threading.Thread(target=reverb_server.exit_when_claimed, args=watch, daemon=True).start()
        # The run's config stays as saved; only this start's random draws change (`run_dir.segment_seed`).
        learner = parts.learner(dataclasses.replace(config, seed=record.seed), client, address, directory)
    actors = None
    if options.role == "all" and parts.actor is not None and config.num_actors:
        actors = ActorSupervisor(
            agent.module, directory / "config.json", address, config.num_actors, directory, record.index
        )  # fmt: skip
    started = start_summary(agent, request, config, options.resume)
    print(f"{started}; run directory {directory}; Reverb at {address}", flush=True)
    if budget_note:
        print(budget_note, flush=True)
    # How to continue (the default: this module, --run_dir, --resume), and what a learner says if its server goes.
    resume_command = gone = None
    this_start = config_lib.start_flags(saved, config) if options.resume else []
    if this_start:
        resume_command = f"python -m {agent.module} --run_dir {directory} --resume {' '.join(this_start)}"
    if options.role == "learner":
        resume_command = options.continue_with or learner_hints(agent, config, address, directory, record, this_start)
        gone = f"stopping (the run keeps its last checkpoint); once the server is back, continue with {resume_command}"
        # Reverb's calls wait forever on a vanished server: the learner says so and stops (its last checkpoint kept).
        watchdog = (address, "learner", options.connect_timeout_s, gone)
        threading.Thread(target=exit_when_server_gone, args=watchdog, daemon=True).start()
    try:
        status = loop.run(learner, directory, loop.settings(config), record, actors, resume_command)
    except Exception as error:
        # A learner whose server went can also learn it from a Reverb call that fails (a connection reset)
        # before its watchdog does: the same one line, not a traceback. The port is watched for a few seconds:
        # a killed server's listening socket may still complete a connection while its process ends.
        if gone is None or not server_gone(address, within_s=10.0):
            raise
        print(
            f"learner: lost the Reverb server at {address} ({type(error).__name__}: {error}); {gone}", file=sys.stderr
        )
        status = 1
    # Reverb's in-process server and dataset threads do not always tear down
    # cleanly at interpreter exit; everything is saved, so leave at once.
    process_exit.now(status)


def start_summary(agent: Agent, request: config_lib.Request, config: Any, resume: bool) -> str:
    """What a start trains, for its first line; a preset left out (the default) is named too."""
    if resume:
        source = "resumed"
    elif request.config_file:
        source = f"config {request.config_file}"
    else:
        source = f"preset {request.preset or agent.default_preset}"
    return f"{agent.module}: {source}, {config.env}, {config.total_frames:,} frames, seed {config.seed}"


def run_server(agent: Agent, request: config_lib.Request, options: Options, config: Any) -> None:
    """The server role: the agent's tables until the process is stopped; kept in --tables_dir if it has them.

    `config` is the request's; None where --resume serves the tables with the config they were built from.
    """
    tables_from = pathlib.Path(options.tables_dir) if agent.checkpoint_tables else None
    if tables_from is not None:
        tables_dir.check(tables_from, resume=options.resume, overwrite=options.overwrite)
        if options.resume:
            saved = config_lib.load(
                type(agent.presets[agent.default_preset]), tables_from / tables_dir.CONFIG, "the tables'"
            )
            config = config_lib.resume(saved, request, agent.presets, f"{agent.name} config")
    parts = agent.parts()  # TensorFlow and Reverb load here, once the input has passed the checks above.
    from common.reverb import server as reverb_server

    tables = parts.tables(config)
    checkpoints = None
    if tables_from is not None:
        tables_dir.prepare(tables_from, config, resume=options.resume, overwrite=options.overwrite)
        checkpoints = tables_from / tables_dir.CHECKPOINTS
        print(f"Reverb tables saved in {tables_from} at each of the learner's checkpoints", flush=True)
    server = reverb_server.make_server(tables, options.port, checkpoints)
    if tables_from is not None and options.resume:
        served = sorted(server.localhost_client().server_info().items())
        sizes = ", ".join(f"{name} {info.current_size}" for name, info in served)
        print(f"serving the tables saved in {tables_dir.saved(tables_from)[-1]}: {sizes} items", flush=True)
    try:  # From the line a user waits for on, a stop says what became of the tables.
        listening = f"Reverb server listening on port {server.port} (all interfaces; keep it on a private network)"
        print(listening, flush=True)
        while True:  # Not Reverb's `server.wait()`, which a Ctrl-C ends but a SIGTERM's handler never reaches.
            time.sleep(1.0)
    except KeyboardInterrupt as interrupt:
        print(f"interrupted: {server_stopped(agent.name, tables_from, options)}", file=sys.stderr, flush=True)
        sys.exit(getattr(interrupt, "exit_code", 128 + signal.SIGINT))


def server_stopped(agent: str, tables_from: pathlib.Path | None, options: Options) -> str:
    """What a stopped server leaves, and how to serve it again: a server started anew on saved tables is refused
    (`tables_dir.check`), so the way on is `--resume`, which "the same command" alone does not say."""
    if tables_from is None:
        return f"the server stopped, and its tables with it ({agent} saves none); the same command serves new ones"
    if not tables_dir.saved(tables_from):
        return "the server stopped before a learner's checkpoint saved its tables; the same command serves new ones"
    again = (
        "the same command" if options.resume
        else "the same command with --resume in place of --overwrite" if options.overwrite
        else "the same command and --resume"
    )  # fmt: skip
    return (
        f"the server stopped; its tables, as of the learner's last checkpoint, are in {tables_from}: "
        f"serve them again with {again}"
    )


# The flags of a role's own, by the roles that use them; given to any other role, a `UsageError`, not a silent
# no-op. (A server's --resume and --overwrite are for its --tables_dir, if its agent checkpoints tables.) The
# config's flags (--preset, --config, --env, --frames, --seed, ...) are not here: they define the one config
# every role of a run shares, whichever of its fields a role reads.
ROLE_FLAGS = {
    "run_dir": ("all", "learner"), "resume": ("all", "learner"), "overwrite": ("all", "learner"),
    "replay_address": ("learner", "actor"), "port": ("all", "server"), "tables_dir": ("server",),
    # With --role all the server is in the learner's process, and its actors wait for it as long as they need.
    "continue_with": ("learner",), "connect_timeout_s": ("learner", "actor"),
    # A learner with --role all numbers and seeds its actors itself.
    "actor_id": ("actor",), "incarnation": ("actor",), "segment": ("actor",),
}  # fmt: skip


def check_role_flags(agent: Agent, options: Options) -> None:
    """A `UsageError` naming the first flag given to a role that does nothing with it."""
    for name, roles in {**ROLE_FLAGS, **agent.role_flags}.items():
        if agent.checkpoint_tables and name in ("resume", "overwrite"):
            roles = (*roles, "server")
        if name in options.given and options.role not in roles:
            accepted = " or ".join(f"--role {role}" for role in roles)
            raise UsageError(f"--{name} is for {accepted}; --role {options.role} does nothing with it, leave it out")


def check_tables_dir(agent: Agent, options: Options) -> None:
    """A `UsageError` for a --tables_dir given where no server saves the tables a learner checkpoints."""
    if options.tables_dir is None:
        return
    if not options.tables_dir.strip():
        raise UsageError("--tables_dir is empty: give a directory for the server's tables")
    if options.role == "all" and agent.checkpoint_tables:
        raise UsageError("--tables_dir is for --role server; with --role all the tables are saved in RUN_DIR/replay")
    if not agent.checkpoint_tables:
        raise UsageError(f"--tables_dir: {agent.name}'s checkpoints do not include its Reverb tables; leave it out")


def check_server_keeps_tables(agent: Agent, options: Options) -> None:
    """A `UsageError` for a server without the --tables_dir where its agent's learner checkpoints the tables."""
    if options.role == "server" and agent.checkpoint_tables and options.tables_dir is None:
        raise UsageError(
            f"{agent.name}'s --role server needs --tables_dir DIR: its learner's checkpoints save the Reverb "
            "tables there, and --resume serves them again"
        )


def learner_hints(
    agent: Agent, config: Any, address: str, directory: pathlib.Path, record: run_dir.RunRecord, this_start: list[str]
) -> str:
    """Says how to start a hand-started learner's actors; returns the command that continues it, with this start's
    operational changes (`config_lib.start_flags`)."""
    if getattr(config, "num_actors", 0):
        # Its actors are not this process's to start: said, so that "replay 0" reads as waiting for them.
        segment = f" --segment={record.index}" if record.index else ""
        print(
            f"this learner's {config.num_actors} actor(s): start each on its own machine with python -m {agent.module} "
            f"--role actor --replay_address {address} --config {directory / 'config.json'} "
            f"--actors {config.num_actors} --actor_id I{segment} "
            f"(I from 0 to {config.num_actors - 1})", flush=True,
        )  # fmt: skip
    command = f"python -m {agent.module} --role learner --replay_address {address} --run_dir {directory} --resume"
    command += "".join(f" {flag}" for flag in this_start)
    if agent.checkpoint_tables:  # Else the resumed learner samples an empty replay.
        command += " (its server started again with --tables_dir DIR --resume)"
    return command


NEW_SERVER = "start a new server for a new run, or continue the run that used this one with --resume"
OWN_SERVER = (
    "a resumed learner continues on its own run's server, or on that run's tables served again "
    "(--role server --tables_dir DIR --resume), or on a new server"
)


def budget_changed(budget: int | None, total_frames: int, first: int) -> str | None:
    """What a resume's --frames did to the budget of the run's latest start, if it changed it.

    A smaller budget (not below the frames trained) ends the run sooner, a
    larger one extends it; either way only provenance.json records it.
    """
    if budget is None or total_frames == budget:
        return None
    change = "extends" if total_frames > budget else "shortens"
    return (
        f"--frames {change} the run's budget from {budget:,} to {total_frames:,} frames; its schedules go on from "
        f"the values they have reached. provenance.json records it; config.json keeps the first start's {first:,}"
    )


def one_config(agent: Agent) -> str:
    """What a role whose server's tables another config built is told to do."""
    saved = " or the server's --tables_dir config.json" if agent.checkpoint_tables else ""
    return f"start the server and this process from one config (the learner's RUN_DIR/config.json{saved})"


def use_threads(config: Any) -> None:
    """This process's TF intra-op threads: the config's `learner_threads`, if it has the field and sets it.

    0 (or no such field) keeps TF's default, a thread per core. Call before
    TF runs its first op, which fixes its thread pools.
    """
    threads = getattr(config, "learner_threads", 0)
    if threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)


def main(agent: Agent, argv: list[str], values: flags.FlagValues) -> None:
    """An agent entry point's `main`: flags only, then `run`."""
    cli.flags_only(argv)
    request, options = from_flags(values)
    run(agent, request, options)


def default_run_dir(agent: Agent, request: config_lib.Request, config: Any) -> str:
    if request.config_file:
        preset = pathlib.Path(request.config_file).parent.name
    else:
        preset = request.preset or agent.default_preset
    return f"runs/{agent.name}/{preset}_{config.env.replace(':', '_')}_s{config.seed}"


def run_actor(parts: Parts, config: Any, options: Options) -> None:
    """One actor process: act until the server goes away."""
    import reverb
    import tensorflow as tf

    from common.reverb import server as reverb_server

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    name = f"actor {options.actor_id}"
    # A supervised actor runs in a session of its own, which a terminal's Ctrl-C does not reach (the learner
    # stops it with SIGTERM); one started by hand stops at once: it holds nothing to save.
    for signum in signals.STOP_SIGNALS:
        signal.signal(signum, lambda signum, _: stop_actor(name, signum))
    client = reverb_server.connect(options.replay_address, options.connect_timeout_s)
    reverb_server.check_served(
        parts.tables(config),
        client,
        options.replay_address,
        "start the server and this actor from one config (its learner's RUN_DIR/config.json)",
    )
    print(f"{name}: acting into the Reverb server at {options.replay_address}", flush=True)
    watchdog = (options.replay_address, name, ACTOR_PATIENCE_S, "exiting")
    threading.Thread(target=exit_when_server_gone, args=watchdog, daemon=True).start()
    failed: list[BaseException] = []

    def act() -> None:
        try:
            parts.actor(config, client, actor_seed(config.seed, options))
        except (reverb.errors.ReverbError, RuntimeError) as error:  # The server went away.
            print(f"{name}: stopping, Reverb server gone ({type(error).__name__})", file=sys.stderr)
        except BaseException as error:  # Raised again in the main thread, as if it had acted there.
            failed.append(error)

    # The main thread only waits, a second at a time: Python runs the Ctrl-C handler in the main thread between
    # calls, and a main thread blocked in a Reverb insert (its learner finished, say) never ran it.
    worker = threading.Thread(target=act, name=name, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(1.0)
    if failed:
        raise failed[0]


def stop_actor(name: str, signum: int) -> None:
    print(f"{name}: stopped by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
    process_exit.now(128 + signum)  # Not SystemExit: Reverb's client threads may hold the interpreter's exit.


def actor_seed(seed: int, options: Options) -> int:
    """An actor process's seed: its own per actor, restart and start of the run (`run_dir.segment_seed`)."""
    entropy = [run_dir.segment_seed(seed, options.segment), options.actor_id, options.incarnation]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0] % 2**31)


def server_gone(address: str, within_s: float) -> bool:
    """Whether the server at `address` refuses a connection within `within_s` (probed each second)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not ports.accepts_connections(address, 1.0):
            return True
        time.sleep(1.0)
    return False


def exit_when_server_gone(address: str, name: str, patience_s: float, then: str, period_s: float = 5.0) -> None:
    """Ends this process (status 1) once the server at `address` has been unreachable for `patience_s`, saying `then`.

    Reverb's calls retry a lost server forever, so without this an actor whose
    learner died (or a finished multi-machine run) would never exit, and a
    learner whose server went would hang. Reachable means the port accepts a
    connection, not that the server answers a call: one busy for minutes
    (saving a large replay for a learner's checkpoint) may answer none
    meanwhile, where one that has gone refuses at once.
    """
    unreachable_since = None
    while True:
        time.sleep(period_s)
        if ports.accepts_connections(address, period_s):
            unreachable_since = None
            continue
        unreachable_since = unreachable_since or time.monotonic()
        if time.monotonic() - unreachable_since >= patience_s:
            print(f"{name}: Reverb server unreachable for {patience_s:.0f}s; {then}", file=sys.stderr, flush=True)
            process_exit.now(1)


class ActorSupervisor:
    """Starts actor processes and restarts any that die while training runs.

    `segment`: which start of the run they serve (`run_dir.RunRecord.index`), for their seeds.
    """

    def __init__(
        self, module: str, config_path: pathlib.Path, address: str, num_actors: int, log_dir: pathlib.Path,
        segment: int = 0,
    ):  # fmt: skip
        self._module, self._config_path, self._address, self._log_dir = module, config_path, address, log_dir
        self._segment = segment
        self._processes: dict[int, subprocess.Popen] = {}
        self._incarnations = dict.fromkeys(range(num_actors), 0)
        self._stopping = threading.Event()
        # The watcher's check and restart, and `stop` setting `_stopping`: one or the other, so
        # that no actor starts after `stop` has terminated the others.
        self._restarting = threading.Lock()
        self.restarts = 0

    def start(self) -> None:
        for actor_id in self._incarnations:
            self._start(actor_id)
        self._write_pids()
        threading.Thread(target=self._watch, daemon=True).start()

    def _write_pids(self) -> None:
        """`actor_pids`: the live actors' PIDs, by actor id, replaced whole (a reader never sees half a file)."""
        path = self._log_dir / "actor_pids"
        path.with_name(".actor_pids").write_text(" ".join(str(p.pid) for p in self._processes.values()) + "\n")
        path.with_name(".actor_pids").replace(path)

    def _start(self, actor_id: int) -> None:
        command = [
            # --actors: a run resumed with other actors than its config.json (which stays as saved) says.
            sys.executable, "-m", self._module, "--role=actor", f"--config={self._config_path}",
            f"--actors={len(self._incarnations)}", f"--replay_address={self._address}", f"--actor_id={actor_id}",
            f"--incarnation={self._incarnations[actor_id]}", f"--segment={self._segment}",
        ]  # fmt: skip
        log = open(self._log_dir / f"actor_{actor_id}.log", "a")
        self._processes[actor_id] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _watch(self) -> None:
        while not self._stopping.wait(1.0):
            for actor_id, process in list(self._processes.items()):
                with self._restarting:
                    if process.poll() is None or self._stopping.is_set():
                        continue
                    print(
                        f"actor {actor_id} (pid {process.pid}) exited with {process.returncode}; restarting",
                        flush=True,
                    )
                    self._incarnations[actor_id] += 1
                    try:
                        self._start(actor_id)
                    except OSError as error:  # E.g. no memory or file descriptors left: retry next tick.
                        print(f"actor {actor_id}: restart failed ({error}); retrying", flush=True)
                        continue
                    self.restarts += 1
                    self._write_pids()  # A restarted actor's new PID: `kill $(cat actor_pids)` reaches it.

    def stop(self) -> None:
        with self._restarting:
            self._stopping.set()
        for process in self._processes.values():
            process.terminate()
        for process in self._processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
