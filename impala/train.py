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
from typing import Optional

from absl import flags

from common import cli, launch
from common.errors import UsageError
from impala.config import PRESETS

launch.define_flags("impala", PRESETS, "toy")
flags.adopt_module_key_flags(launch)
flags.DEFINE_enum(
    "distribute", "none", ["none", "mirrored"],
    "mirrored: one synchronous learner replica per visible GPU (tf.distribute.MirroredStrategy).",
)  # fmt: skip
flags.DEFINE_integer(
    "simulated_cpu_devices",
    None,
    "Split the CPU into N logical devices for --distribute (tests without GPUs).",
    lower_bound=1,
)
FLAGS = flags.FLAGS


def parts(distribute: str = "none", simulated_devices: Optional[int] = None, actor_id: int = 0) -> launch.Parts:
    # Imports TensorFlow: only once the command's input has passed its checks.
    from common.networks import check_fits_env
    from impala import agent

    if simulated_devices:
        agent.simulate_cpu_devices(simulated_devices)  # Before TensorFlow's first op (`launch.run` runs none yet).
    return launch.Parts(
        tables=agent.agent_tables, validate=check_fits_env,
        learner=functools.partial(agent.make_learner, distribute, bool(simulated_devices)),
        actor=functools.partial(agent.run_actor, actor_id=actor_id),  # A multi-task run's levels (IMPALA §5.3).
    )  # fmt: skip


AGENT = launch.Agent(
    name="impala", module="impala.train", presets=PRESETS, default_preset="toy", parts=parts,
    role_flags={"distribute": ("all", "learner"), "simulated_cpu_devices": ("all", "learner")},
)  # fmt: skip


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    request, options = launch.from_flags(FLAGS)
    if FLAGS["simulated_cpu_devices"].present and FLAGS.distribute == "none" and options.role in ("all", "learner"):
        raise UsageError("--simulated_cpu_devices is for --distribute mirrored (its replicas' devices); leave it out")
    wired = functools.partial(parts, FLAGS.distribute, FLAGS.simulated_cpu_devices, options.actor_id)
    launch.run(dataclasses.replace(AGENT, parts=wired), request, options)


if __name__ == "__main__":
    cli.run(main)
