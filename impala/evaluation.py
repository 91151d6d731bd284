"""The `evaluate` entry points of IMPALA and LASER: play a run by sampling from pi (IMPALA App. G).

TensorFlow loads only once the command line and RUN_DIR's config have passed
their checks, so a wrong command is answered at once.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

from absl import flags

from common import envs, evaluation


def command(module: str, config_class: type, source: str) -> Callable[[list[str]], None]:
    """The `main` of `python -m <module> RUN_DIR`, its flags defined: 200 episodes by default.

    `source`: where the default comes from, for `--help` (IMPALA App. G's protocol).
    """
    evaluation.define_flags(200, source)
    return functools.partial(evaluate, module=module, config_class=config_class, values=flags.FLAGS)


def evaluate(argv: list[str], module: str, config_class: type, values: Any) -> None:
    """`python -m <module> RUN_DIR`: restore the run, play by sampling from pi, report (IMPALA App. G).

    `values`: the entry point's flags from `common.evaluation.define_flags`.
    """
    directory = evaluation.run_directory(argv, module, values.episodes, values.envs)
    config = evaluation.load_config(directory, config_class, module)
    from impala import agent  # TensorFlow loads here.

    network, step = evaluation.restore(directory, config, agent.make_network)
    start = time.time()
    policy = agent.Sampling(config, network, values.seed)
    if envs.is_suite(config.env):  # Every level of the suite, scored as its test level (IMPALA §5.3, App. B).
        returns = evaluation.play_suite(config, policy, values.episodes, values.seed, values.log_every_s, values.envs)
        evaluation.report_suite(directory, config, step, returns, values.seed, time.time() - start)
        return
    returns = evaluation.play(config, policy, values.episodes, values.seed, values.log_every_s, num_envs=values.envs)
    evaluation.report(directory, config, step, returns, values.seed, time.time() - start, "atari_noop")
