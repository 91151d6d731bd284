"""Train IMPALA: one machine by default, separate roles on separate machines by flag.

One machine (an in-process Reverb server, the learner, N actor processes):

    python -m impala.train --preset minatar --env minatar:breakout --frames 5e6 --actors 2

Many machines (Reverb is the only channel between roles):

    python -m impala.train --role server --port 8000 --preset atari_shallow
    python -m impala.train --role learner --replay_address HOST:8000 --preset atari_shallow --run_dir R
    python -m impala.train --role actor --replay_address HOST:8000 --config R/config.json --actor_id 0

Topology: actors write unrolls to the `queue` table and read parameters from
the `params` table; the learner reads batches from `queue` and writes
`params` after every step. This file is wiring: the roles, the loop and the
run directory are `common.launch` and `common.loop`.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import reverb
import tensorflow as tf
from absl import flags

from common import cli, envs, launch, loop
from common.errors import UsageError
from common.networks import check_fits_env
from common.reverb import tables
from common.reverb import variables as reverb_variables
from impala import networks, trajectories
from impala.actor import Actor
from impala.config import PRESETS, ImpalaConfig
from impala.learner import Learner, variable_scope

launch.define_flags("impala", PRESETS, "toy")
flags.adopt_module_key_flags(launch)
flags.DEFINE_enum(
    "distribute", "none", ["none", "mirrored"],
    "mirrored: one synchronous learner replica per visible GPU (tf.distribute.MirroredStrategy).",
)  # fmt: skip
flags.DEFINE_integer(
    "simulated_cpu_devices", None, "Split the CPU into N logical devices for --distribute (tests without GPUs)."
)
FLAGS = flags.FLAGS

# How long the learner waits in C++ for unrolls before returning to Python.
SAMPLE_WAIT_MS = 2000


def agent_tables(config: ImpalaConfig) -> list[reverb.Table]:
    return [tables.queue(trajectories.QUEUE_TABLE, config.queue_size), tables.variables()]


def build_agent(config: ImpalaConfig) -> tuple[networks.ActorCritic, dict[str, tf.TensorSpec]]:
    """The network, with its variables, and the per-step spec of the unrolls it trains on."""
    env = envs.make(config.env, seed=0, **dict(config.env_options))
    space, num_actions = env.observation_space, int(env.action_space.n)
    env.close()
    network = networks.make(config, space, num_actions)
    state_spec = None
    if network.recurrent:
        state_spec = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape[1:], s.dtype), network.initial_state(1))
    network.step(tf.zeros((1, *space.shape), space.dtype), tf.zeros((1,), tf.bool), network.initial_state(1))
    return network, trajectories.step_spec(space.shape, tf.as_dtype(space.dtype), num_actions, state_spec)


def run_actor(config: ImpalaConfig, client: reverb.Client, seed: int) -> None:
    env = envs.make_batched(config.env, config.envs_per_actor, seed=seed, **dict(config.env_options))
    network, spec = build_agent(config)
    jit = networks.xla_compiles_network(config.xla)
    Actor(network, spec, env, client, config.unroll_length, seed=seed, jit=jit).run()


class QueueLearner:
    """The loop's learner: one V-trace update per batch of unrolls from the queue."""

    def __init__(self, config: ImpalaConfig, client: reverb.Client, address: str, strategy):
        with variable_scope(strategy):
            self.network, spec = build_agent(config)
            self.learner = Learner(config, self.network, strategy)
            self.learner.build({k: tf.zeros([1, config.unroll_length + 1, *s.shape], s.dtype) for k, s in spec.items()})
        self._client, self._queue_size = client, config.queue_size
        self._batches = trajectories.batches(address, spec, config.unroll_length, config.batch_size, SAMPLE_WAIT_MS)

    frames = property(lambda self: self.learner.frame_count)
    steps = property(lambda self: self.learner.step_count)

    def state(self) -> dict:
        return {"learner": self.learner}

    def start(self) -> None:
        if self.learner.learning_rate() == 0.0 and self.frames < self.learner.config.total_frames:
            print("note: the learning rate had annealed to 0 at the run's earlier budget and stays 0: a larger "
                  "--frames continues the schedule from its value, without a jump", flush=True)  # fmt: skip
        reverb_variables.publish(self._client, self.network.trainable_variables)

    def step(self) -> loop.Step | None:
        batch = next(self._batches)
        if batch is None:
            return None
        metrics = self.learner.step(batch)
        reverb_variables.publish(self._client, self.network.trainable_variables)
        episodes = trajectories.finished_episodes({k: batch[k].numpy() for k in ("episode_return", "episode_length")})
        return loop.Step(metrics, episodes)

    def progress(self) -> dict[str, float]:
        return {"queue": self._client.server_info()[trajectories.QUEUE_TABLE].current_size}

    def save_extra(self) -> None:
        """The queue is transient: nothing outside the checkpoint to keep."""


def simulate_cpu_devices(count: int) -> None:
    """Splits the CPU into `count` logical devices; must run before TensorFlow starts."""
    logical = [tf.config.LogicalDeviceConfiguration()] * count
    tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0], logical)


def learner_strategy(distribute: str, simulated: bool, batch_size: int):
    """The learner's tf.distribute strategy for --distribute, or None."""
    if distribute == "none":
        return None
    devices = [d.name for d in tf.config.list_logical_devices("CPU" if simulated else "GPU")]
    if not devices:
        raise UsageError("--distribute mirrored found no GPU; use --simulated_cpu_devices N to try it on CPU")
    if batch_size % len(devices):
        raise UsageError(f"batch_size={batch_size} must divide evenly over {len(devices)} learner replicas")
    return tf.distribute.MirroredStrategy(devices)


def make_learner(distribute: str, simulated: bool, config, client, address, directory: pathlib.Path):
    return QueueLearner(config, client, address, learner_strategy(distribute, simulated, config.batch_size))


AGENT = launch.Agent(
    name="impala", module="impala.train", presets=PRESETS, default_preset="toy", tables=agent_tables,
    validate=check_fits_env, learner=make_learner, actor=run_actor,
)  # fmt: skip


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments {argv[1:]}; flags only (see --help)")
    request, options = launch.from_flags(FLAGS)
    if FLAGS.simulated_cpu_devices:
        simulate_cpu_devices(FLAGS.simulated_cpu_devices)
    learner = functools.partial(make_learner, FLAGS.distribute, bool(FLAGS.simulated_cpu_devices))
    launch.run(dataclasses.replace(AGENT, learner=learner), request, options)


if __name__ == "__main__":
    cli.run(main)
