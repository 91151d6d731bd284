"""Train IMPALA: one machine by default, separate roles on separate machines by flag.

One machine (an in-process Reverb server, the learner, N actor processes):

    python -m impala.train --preset minatar --env minatar:breakout --frames 5e6 --actors 2

Many machines (Reverb is the only channel between roles):

    python -m impala.train --role server --port 8000 --preset atari_shallow
    python -m impala.train --role learner --replay_address HOST:8000 --preset atari_shallow --run_dir R
    python -m impala.train --role actor --replay_address HOST:8000 --config R/config.json --actor_id 0

Topology: actors write unrolls to the `queue` table and read parameters from
the `params` table; the learner reads batches from `queue` and writes
`params` after every step.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import reverb
import tensorflow as tf
from absl import flags

from common import cli, envs, provenance, reverb_utils, run_dir
from common import config as config_lib
from common.errors import UsageError
from impala import networks, trajectories
from impala.actor import Actor
from impala.config import PRESETS, ImpalaConfig
from impala.learner import Learner, variable_scope

ROLES = ("all", "server", "learner", "actor")

flags.DEFINE_enum("role", "all", ROLES, "all: server, learner and actors here; or one role of a multi-machine run.")
flags.DEFINE_enum("preset", "toy", list(PRESETS), "Named config preset (impala/config.py).")
flags.DEFINE_string("config", "", "A resolved config.json to use instead of --preset and overrides.")
flags.DEFINE_string("env", "", "Env spec overriding the preset's, e.g. atari:breakout.")
flags.DEFINE_float("frames", 0, "Frame budget overriding the preset's total_frames, e.g. 5e6.")
flags.DEFINE_integer("actors", 0, "Actor processes overriding the preset's num_actors.")
flags.DEFINE_integer("seed", None, "Seed overriding the preset's.")
flags.DEFINE_multi_string("config_override", [], "Config field NAME=VALUE; repeat for more.")
flags.DEFINE_multi_string("env_option", [], "Training env option NAME=VALUE; repeat for more.")
flags.DEFINE_string("run_dir", "", "Run directory (default runs/impala/<preset>_<env>_s<seed>).")
flags.DEFINE_bool("resume", False, "Continue the run in --run_dir from its last checkpoint.")
flags.DEFINE_bool("overwrite", False, "Delete an existing --run_dir first.")
flags.DEFINE_string("replay_address", "", "HOST:PORT of the Reverb server (learner and actor roles).")
flags.DEFINE_integer("port", 0, "Port of the Reverb server this process starts (0: any free port).")
flags.DEFINE_integer("actor_id", 0, "This actor's index (actor role).")
flags.DEFINE_integer("incarnation", 0, "How many times this actor was restarted (seeds differ).")
flags.DEFINE_float("connect_timeout_s", 30.0, "How long to wait for a Reverb server before giving up.")
flags.DEFINE_enum(
    "distribute", "none", ["none", "mirrored"],
    "mirrored: one synchronous learner replica per visible GPU (tf.distribute.MirroredStrategy).",
)  # fmt: skip
flags.DEFINE_integer(
    "simulated_cpu_devices", 0, "Split the CPU into N logical devices for --distribute (tests without GPUs)."
)
FLAGS = flags.FLAGS


# How long the learner waits in C++ for unrolls before returning to Python.
SAMPLE_WAIT_MS = 2000
# How long an actor keeps trying to reach a vanished Reverb server before it exits.
ACTOR_PATIENCE_S = 30.0


class NonFiniteLossError(RuntimeError):
    pass


def resolve_config() -> ImpalaConfig:
    """The preset (or --config file) with every flag override applied."""
    if FLAGS.config:
        path = pathlib.Path(FLAGS.config)
        if not path.exists():
            raise UsageError(f"--config {path}: no such file")
        fields = json.loads(path.read_text())
        fields["env_options"] = tuple(tuple(pair) for pair in fields.get("env_options", ()))
        return ImpalaConfig(**fields)
    config = PRESETS[FLAGS.preset]
    # Env options are pairs, set one by one with --env_option, not by --config_override.
    defaults = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "env_options"}
    overrides = cli.parse_assignments(FLAGS.config_override, defaults)
    for name, value in (
        ("env", FLAGS.env),
        ("total_frames", int(FLAGS.frames)),
        ("num_actors", FLAGS.actors),
    ):
        if value:
            overrides[name] = value
    if FLAGS.seed is not None:
        overrides["seed"] = FLAGS.seed
    spec = overrides.get("env", config.env)
    # A preset's env options (e.g. App. G's life-loss terminals) hold for every
    # game of its env family and mean nothing to another family.
    same_family = envs.parse(spec)[0] == envs.parse(config.env)[0]
    env_options = dict(config.env_options) if same_family else {}
    env_options.update(cli.parse_assignments(FLAGS.env_option, envs.option_fields(spec)))
    overrides["env_options"] = tuple(sorted(env_options.items()))
    return config_lib.override(config, overrides, "impala config")


def env_signature(config: ImpalaConfig) -> tuple[tuple[int, ...], tf.DType, int]:
    """Observation shape and dtype and the number of actions of the config's env."""
    env = envs.make(config.env, seed=0, **dict(config.env_options))
    space = env.observation_space
    signature = tuple(space.shape), tf.as_dtype(space.dtype), int(env.action_space.n)
    env.close()
    return signature


def build_agent(config: ImpalaConfig):
    """The network and the per-step spec of the trajectories it trains on."""
    shape, dtype, num_actions = env_signature(config)
    network = networks.make(config, num_actions)
    state_spec = None
    if network.recurrent:
        state_spec = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype), network.initial_state(1))
    network.step(tf.zeros((1, *shape), dtype), tf.zeros((1,), tf.bool), network.initial_state(1))
    return network, trajectories.step_spec(shape, dtype, num_actions, state_spec)


def learner_strategy(config: ImpalaConfig) -> tf.distribute.Strategy | None:
    """The learner's tf.distribute strategy for --distribute, or None."""
    if FLAGS.distribute == "none":
        return None
    if FLAGS.simulated_cpu_devices:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * FLAGS.simulated_cpu_devices
        )
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    else:
        devices = [d.name for d in tf.config.list_logical_devices("GPU")]
    if not devices:
        raise UsageError("--distribute mirrored found no GPU; use --simulated_cpu_devices N to try it on CPU")
    if config.batch_size % len(devices):
        raise UsageError(f"batch_size={config.batch_size} must divide evenly over {len(devices)} learner replicas")
    return tf.distribute.MirroredStrategy(devices)


# Roles. ---------------------------------------------------------------------


def run_server(config: ImpalaConfig) -> reverb.Server:
    return reverb.Server(
        [trajectories.queue_table(config.queue_size), reverb_utils.params_table()],
        port=FLAGS.port or None,
    )


def run_actor(config: ImpalaConfig, address: str) -> None:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # The learner stops its actors.
    client = reverb_utils.connect(address, FLAGS.connect_timeout_s)
    seed = int(np.random.SeedSequence([config.seed, FLAGS.actor_id, FLAGS.incarnation]).generate_state(1)[0])
    env = envs.make_batched(config.env, config.envs_per_actor, seed=seed % 2**31, **dict(config.env_options))
    network, spec = build_agent(config)
    jit = networks.xla_compiles_network(config.xla)
    actor = Actor(network, spec, env, client, config.unroll_length, seed=seed % 2**31, jit=jit)
    threading.Thread(target=exit_when_server_gone, args=(client, ACTOR_PATIENCE_S), daemon=True).start()
    try:
        actor.run()
    except (reverb.errors.ReverbError, RuntimeError) as error:  # The server went away.
        print(f"actor {FLAGS.actor_id}: stopping, Reverb server gone ({type(error).__name__})", file=sys.stderr)


def exit_when_server_gone(client: reverb.Client, patience_s: float, period_s: float = 5.0) -> None:
    """Ends this actor process once the server has been unreachable for `patience_s`.

    Reverb's writers retry a lost server forever, so without this an actor
    whose learner died (or a finished multi-machine run) would never exit.
    """
    unreachable_since = None
    while True:
        time.sleep(period_s)
        try:
            client.server_info(timeout=int(period_s))
            unreachable_since = None
        except (reverb.errors.ReverbError, RuntimeError, ValueError):
            unreachable_since = unreachable_since or time.monotonic()
            if time.monotonic() - unreachable_since >= patience_s:
                print(f"actor {FLAGS.actor_id}: Reverb server unreachable for {patience_s:.0f}s; exiting", flush=True)
                os._exit(1)


class ActorSupervisor:
    """Starts actor processes and restarts any that die while training runs."""

    def __init__(self, config_path: pathlib.Path, address: str, num_actors: int, log_dir: pathlib.Path):
        self._config_path, self._address, self._log_dir = config_path, address, log_dir
        self._processes: dict[int, subprocess.Popen] = {}
        self._incarnations = dict.fromkeys(range(num_actors), 0)
        self._stopping = threading.Event()
        self.restarts = 0
        for actor_id in range(num_actors):
            self._start(actor_id)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _start(self, actor_id: int) -> None:
        command = [
            sys.executable, "-m", "impala.train", "--role=actor", f"--config={self._config_path}",
            f"--replay_address={self._address}", f"--actor_id={actor_id}",
            f"--incarnation={self._incarnations[actor_id]}",
        ]  # fmt: skip
        log = open(self._log_dir / f"actor_{actor_id}.log", "a")
        self._processes[actor_id] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _watch(self) -> None:
        while not self._stopping.wait(1.0):
            for actor_id, process in list(self._processes.items()):
                if process.poll() is not None and not self._stopping.is_set():
                    print(
                        f"actor {actor_id} (pid {process.pid}) exited with {process.returncode}; restarting",
                        flush=True,
                    )
                    self._incarnations[actor_id] += 1
                    self.restarts += 1
                    self._start(actor_id)

    def pids(self) -> list[int]:
        return [p.pid for p in self._processes.values()]

    def stop(self) -> None:
        self._stopping.set()
        for process in self._processes.values():
            process.terminate()
        for process in self._processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def log_progress(progress, learner: Learner, metrics, episodes, writer, client, config: ImpalaConfig) -> None:
    """The progress line, TensorBoard scalars, and a flush of episodes.csv."""
    queue = client.server_info()[trajectories.QUEUE_TABLE].current_size
    frames = learner.frame_count
    print(progress.line(
        frames, learner.step_count, queue=f"{queue}/{config.queue_size}", episodes=str(episodes.count),
        **{"return(100)": f"{episodes.mean_recent():.2f}"}, loss=f"{metrics['loss']:.3g}",
    ), flush=True)  # fmt: skip
    with writer.as_default(step=frames):
        for name, value in metrics.items():
            tf.summary.scalar(f"learner/{name}", value)
        tf.summary.scalar("actors/mean_return_100", episodes.mean_recent())
        tf.summary.scalar("reverb/queue_size", queue)
    episodes.flush()


def train(
    config: ImpalaConfig, directory: pathlib.Path, client: reverb.Client, address: str, start_actors: bool
) -> int:
    """The learner loop. Returns the process exit status."""
    strategy = learner_strategy(config)
    with variable_scope(strategy):
        network, spec = build_agent(config)
        learner = Learner(config, network, strategy)
        learner.build({k: tf.zeros([1, config.unroll_length + 1, *s.shape], s.dtype) for k, s in spec.items()})
    checkpoint = tf.train.Checkpoint(learner=learner)
    manager = tf.train.CheckpointManager(checkpoint, directory / "checkpoints", max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {manager.latest_checkpoint}: step {learner.step_count}, frames {learner.frame_count:,}")
    else:
        manager.save(checkpoint_number=0)
    reverb_utils.publish(client, network.trainable_variables)
    supervisor = (
        ActorSupervisor(directory / "config.json", address, config.num_actors, directory) if start_actors else None
    )
    if supervisor:
        (directory / "actor_pids").write_text(" ".join(map(str, supervisor.pids())) + "\n")
    episodes = run_dir.EpisodeLog(directory)
    writer = run_dir.summary_writer(directory)
    progress = run_dir.Progress(config.total_frames, learner.frame_count, config.log_every_s)
    iterator = trajectories.batches(address, spec, config.unroll_length, config.batch_size, wait_ms=SAMPLE_WAIT_MS)
    last_checkpoint, start = time.monotonic(), time.time()
    # Ctrl-C and a scheduler's SIGTERM ask the loop to stop between steps; raising
    # from the handler could land inside a C++ call and turn into another error.
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    status = 0
    try:
        while learner.frame_count < config.total_frames and not stop.is_set():
            batch = next(iterator)
            if batch is None:  # No unrolls for a while; look at `stop` again.
                continue
            metrics = learner.step(batch)
            if not math.isfinite(metrics["loss"]):
                raise NonFiniteLossError(
                    f"non-finite loss ({metrics['loss']}) at learner step {learner.step_count}; stopped without "
                    f"saving, the last good checkpoint is {manager.latest_checkpoint}"
                )
            reverb_utils.publish(client, network.trainable_variables)
            frames = learner.frame_count
            for episode_return, length in trajectories.finished_episodes(
                {k: batch[k].numpy() for k in ("episode_return", "episode_length")}
            ):
                episodes.add(frames, episode_return, length, time.time() - start)
            if progress.due():
                log_progress(progress, learner, metrics, episodes, writer, client, config)
            if time.monotonic() - last_checkpoint >= config.checkpoint_every_s:
                manager.save(checkpoint_number=learner.step_count)
                last_checkpoint = time.monotonic()
        manager.save(checkpoint_number=learner.step_count)
        if stop.is_set():
            print(f"interrupted: saved checkpoint at step {learner.step_count}; continue with --resume", flush=True)
        else:
            final = {
                "frames": learner.frame_count, "learner_steps": learner.step_count, "episodes": episodes.count,
                "mean_return_last_100": episodes.mean_recent(), "wall_time_s": round(time.time() - start, 1),
                "actor_restarts": supervisor.restarts if supervisor else 0,
            }  # fmt: skip
            (directory / "final.json").write_text(json.dumps(final, indent=2) + "\n")
            print(f"done: {learner.frame_count:,} frames, {learner.step_count} learner steps, "
                  f"{episodes.count} episodes, mean return(100) {episodes.mean_recent():.2f}")  # fmt: skip
    except NonFiniteLossError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        status = 1
    finally:
        if supervisor:
            supervisor.stop()
        episodes.close()
        writer.flush()
    return status


def default_run_dir(config: ImpalaConfig) -> str:
    name = config.env.replace(":", "_")
    preset = pathlib.Path(FLAGS.config).parent.name if FLAGS.config else FLAGS.preset
    return f"runs/impala/{preset}_{name}_s{config.seed}"


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments {argv[1:]}; flags only (see --help)")
    config = resolve_config()
    if FLAGS.role == "actor":
        if not FLAGS.replay_address:
            raise UsageError("--role actor needs --replay_address HOST:PORT")
        run_actor(config, FLAGS.replay_address)
        return
    if FLAGS.role == "server":
        server = run_server(config)
        print(f"Reverb server listening on port {server.port} (all interfaces; keep it on a private network)")
        server.wait()
        return
    if FLAGS.role == "learner" and not FLAGS.replay_address:
        raise UsageError("--role learner needs --replay_address HOST:PORT")
    directory = run_dir.prepare(
        FLAGS.run_dir or default_run_dir(config), config, resume=FLAGS.resume, overwrite=FLAGS.overwrite
    )
    if FLAGS.role == "all":
        server = run_server(config)
        address = f"localhost:{server.port}"
    else:
        address = FLAGS.replay_address
    client = reverb_utils.connect(address, FLAGS.connect_timeout_s)
    provenance.write(
        directory, config=dataclasses.asdict(config), seeds=[config.seed], frames=config.total_frames,
        wall_time_s=0.0, scale="training run", extra={"role": FLAGS.role, "resumed": FLAGS.resume},
    )  # fmt: skip
    print(f"run directory {directory}; Reverb at {address}; {config.num_actors} actors x {config.envs_per_actor} envs")
    status = train(config, directory, client, address, start_actors=FLAGS.role == "all")
    sys.stdout.flush()
    sys.stderr.flush()
    # Reverb's in-process server and dataset threads do not always tear down
    # cleanly at interpreter exit; everything is saved, so leave at once.
    os._exit(status)


if __name__ == "__main__":
    cli.run(main)
