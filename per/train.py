"""Train prioritized Double DQN (PER, Schaul et al. 2016) on a Reverb replay.

One process (an in-process Reverb server; the learner acts itself):

    python -m per.train --preset minatar_ddqn_prop --env minatar:breakout --frames 5e6
    python -m per.train --preset atari_ddqn_rank --env atari:pong

Actor processes (Ape-X style: the learner samples and learns, N actors act):

    python -m per.train --preset minatar_ddqn_prop --env minatar:breakout --frames 5e6 --actors 1

Continue a run, with a larger budget if wanted (beta re-anchors, no jump):

    python -m per.train --run_dir R --resume --frames 1e7

Topology: a `replay` table, `Prioritized(alpha)` with FIFO eviction and a
`SampleToInsertRatio` rate limiter holding the replay ratio; with actors, a
`params` table (theta, the maximal priority and epsilon, from the learner) and
an `episodes` queue (finished games, from the actors). Reverb checkpoints the
tables into RUN_DIR/replay with every checkpoint, so a resumed run samples from
the same replay. The other roles (`--role server|learner|actor`) are IMPALA's
(see impala/train.py), but for the server's `--tables_dir`, where the learner's
checkpoints save the tables and `--resume` serves them again. This file is
wiring: the roles, the loop and the run directory are `common.launch` and
`common.loop`; the agent is `per.agent`.
"""

from __future__ import annotations

from absl import flags

from common import cli, launch
from per.config import PRESETS

launch.define_flags("per", PRESETS, "toy")
flags.adopt_module_key_flags(launch)
FLAGS = flags.FLAGS


def parts() -> launch.Parts:
    from per import agent  # Imports TensorFlow: only once the command's input has passed its checks.

    return launch.Parts(
        tables=agent.agent_tables, validate=agent.validate, learner=agent.make_agent, actor=agent.run_actor
    )


AGENT = launch.Agent(
    name="per", module="per.train", presets=PRESETS, default_preset="toy", parts=parts, checkpoint_tables=True
)


def main(argv: list[str]) -> None:
    launch.main(AGENT, argv, FLAGS)


if __name__ == "__main__":
    cli.run(main)
