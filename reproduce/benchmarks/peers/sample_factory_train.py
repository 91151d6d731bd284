"""Starts sample-factory's Atari example inside the peer's venv: `python sample_factory_train.py {gym,envpool} ARGS`.

Run by the peer's own interpreter, so it imports nothing from this project.
Everything at module level also runs in the worker processes sample-factory
spawns, which re-import this file.
"""

import sys

# ale-py 0.9 registers its gymnasium ids (PongNoFrameskip-v4) on import, not
# through an entry point, and sample-factory's gym example never imports it.
import ale_py  # noqa: F401
import gymnasium.vector
from sample_factory.algo.learning.learner import Learner

# envpool 1.2's `close()` ends in gymnasium's `VectorEnv.close`, which reads
# `closed` and `viewer`: attributes gymnasium 0.29 sets only in a constructor
# envpool never calls. sample-factory closes a first env to learn the spaces;
# the AttributeError there kills that child and leaves sample-factory waiting
# for it forever. Class-level defaults let the close go through (and change
# nothing for vector envs that run that constructor).
gymnasium.vector.VectorEnv.closed = False
gymnasium.vector.VectorEnv.viewer = None

# sample-factory 2.1.1 with V-trace: the learner's summaries read the
# minibatch's `advantages`, which only its GAE path stores (V-trace keeps them
# in a local `adv`), so the first summary kills the learner. Hand it `adv`;
# the training step itself is untouched.
_record_summaries = Learner._record_summaries


def _record_summaries_with_vtrace(self, train_loop_vars):
    if "advantages" not in train_loop_vars.mb:
        train_loop_vars.mb["advantages"] = train_loop_vars.adv
    return _record_summaries(self, train_loop_vars)


Learner._record_summaries = _record_summaries_with_vtrace


def main() -> int:
    wrappers, argv = sys.argv[1], sys.argv[2:]
    if wrappers == "envpool":
        from sf_examples.envpool.atari import train_envpool_atari as example
    else:
        from sf_examples.atari import train_atari as example
    example.register_atari_components()
    return example.run_rl(example.parse_atari_args(argv))


if __name__ == "__main__":
    sys.exit(main())
