r"""Train LASER (Schmitt, Hessel & Simonyan 2020): IMPALA with a replay mixed into every batch.

One machine (an in-process Reverb server, the learner, N actor processes):

    python -m laser.train --preset minatar_laser --env minatar:breakout --frames 2e6
    python -m laser.train --preset toy_laser --config_override replay_fraction=0.5
    python -m laser.train --preset minatar_laser_a2 --config_override replay_priority=critic_loss  # App. A.2
    python -m laser.train --preset toy_laser --config_override use_lstm=true \
        --config_override recompute_replay_state=true  # App. A.2 / B: recomputed LSTM states

Many machines: the roles of `impala.train` (`--role server|learner|actor`).

Topology: actors write each unroll to `queue` and `replay`; the learner
mixes B_online queued and B_replay replayed unrolls per batch and publishes
`params` after every step (`laser.agent`). The replay is not checkpointed
(10M observations would be a large checkpoint): a resumed run refills it.
"""

from __future__ import annotations

from absl import flags

from common import cli, launch
from laser.config import PRESETS

launch.define_flags("laser", PRESETS, "toy_laser")
flags.adopt_module_key_flags(launch)
FLAGS = flags.FLAGS


def parts() -> launch.Parts:
    # Imports TensorFlow: only once the command's input has passed its checks.
    from common.networks import check_fits_env
    from laser import agent

    return launch.Parts(
        tables=agent.agent_tables, validate=check_fits_env, learner=agent.make_learner, actor=agent.run_actor,
        own_tables=agent.unshared_tables,
    )  # fmt: skip


AGENT = launch.Agent(name="laser", module="laser.train", presets=PRESETS, default_preset="toy_laser", parts=parts)


def main(argv: list[str]) -> None:
    launch.main(AGENT, argv, FLAGS)


if __name__ == "__main__":
    cli.run(main)
