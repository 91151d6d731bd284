"""Train prioritized Double DQN (PER, Schaul et al. 2016) on a Reverb replay.

One process (an in-process Reverb server; the learner acts itself):

    python -m per.train --preset minatar_ddqn_prop --env minatar:breakout --frames 5e6
    python -m per.train --preset atari_ddqn_rank --env atari:pong

Continue a run, with a larger budget if wanted (beta re-anchors, no jump):

    python -m per.train --run_dir R --resume --frames 1e7

Topology: one `replay` table, `Prioritized(alpha)` with FIFO eviction and a
`SampleToInsertRatio` rate limiter holding the replay ratio. Reverb checkpoints
it into RUN_DIR/replay with every checkpoint, so a resumed run samples from the
same replay. This file is wiring: the roles, the loop and the run directory
are `common.launch` and `common.loop`; the agent is `per.agent`.
"""

from __future__ import annotations

from absl import flags

from common import cli, launch
from per import agent
from per.config import PRESETS, PerConfig

launch.define_flags("per", PRESETS, "toy")
flags.adopt_module_key_flags(launch)
FLAGS = flags.FLAGS


def agent_tables(config: PerConfig):
    return [agent.replay_table(config)]


AGENT = launch.Agent(
    name="per", module="per.train", presets=PRESETS, default_preset="toy", tables=agent_tables,
    validate=agent.validate, learner=agent.make_agent, checkpoint_tables=True,
)  # fmt: skip


def main(argv: list[str]) -> None:
    launch.main(AGENT, argv, FLAGS)


if __name__ == "__main__":
    cli.run(main)
