"""Train IMPALA: one machine by default, separate roles on separate machines by flag.

One machine (an in-process Reverb server, the learner, N actor processes):

    python -m impala.train --preset minatar --env minatar:breakout --frames 5e6 --actors 2

Many machines (Reverb is the only channel between roles):

    python -m impala.train --role server --port 8000 --preset atari_shallow
    python -m impala.train --role learner --replay_address HOST:8000 --preset atari_shallow --run_dir R
    python -m impala.train --role actor --replay_address HOST:8000 --config R/config.json --actor_id 0

Topology: actors write unrolls to the `queue` table and read parameters from
the `params` table; the learner reads batches from `queue` and writes
`params` every `publish_every` steps (default: every step). This file is
wiring: the roles, the loop and the run directory are `common.launch` and
`common.loop`.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import reverb
import tensorflow as tf
from absl import flags

from common import cli, launch
from common.errors import UsageError
from common.networks import check_fits_env
from common.reverb import tables
from impala import trajectories
from impala.agent import QueueLearner, run_actor
from impala.config import PRESETS, ImpalaConfig

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


def agent_tables(config: ImpalaConfig) -> list[reverb.Table]:
    return [tables.queue(trajectories.QUEUE_TABLE, config.queue_size), tables.variables()]


def make_learner(distribute: str, simulated: bool, config, client, address, directory: pathlib.Path):
    return QueueLearner(config, client, address, learner_strategy(distribute, simulated, config.batch_size))


AGENT = launch.Agent(
    name="impala", module="impala.train", presets=PRESETS, default_preset="toy", tables=agent_tables,
    validate=check_fits_env, learner=make_learner, actor=run_actor,
)  # fmt: skip


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    request, options = launch.from_flags(FLAGS)
    if FLAGS.simulated_cpu_devices:
        simulate_cpu_devices(FLAGS.simulated_cpu_devices)
    learner = functools.partial(make_learner, FLAGS.distribute, bool(FLAGS.simulated_cpu_devices))
    actor = functools.partial(run_actor, actor_id=options.actor_id)  # A multi-task run's levels (IMPALA §5.3).
    launch.run(dataclasses.replace(AGENT, learner=learner, actor=actor), request, options)


if __name__ == "__main__":
    cli.run(main)
