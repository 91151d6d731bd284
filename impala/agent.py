"""IMPALA's parts between the maths and the entry points: network and spec, actor, queue learner, policy.

`impala.train` wires these into the shared runtime; LASER (`laser/`) builds on
them with its replay.
"""

from __future__ import annotations

import pathlib
from typing import Iterator, Mapping

import numpy as np
import reverb
import tensorflow as tf

from common import envs, loop
from common.errors import UsageError
from common.reverb import tables as reverb_tables
from common.reverb import variables as reverb_variables
from common.reverb.tables import PARAMS
from impala import networks, trajectories
from impala.actor import Actor
from impala.config import ImpalaConfig
from impala.learner import Learner, variable_scope

# How long the learner waits in C++ for unrolls before returning to Python.
SAMPLE_WAIT_MS = 2000


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
    tasks, versions = envs.is_suite(config.env), records_policy_versions(config)
    spec = trajectories.step_spec(space.shape, tf.as_dtype(space.dtype), num_actions, state_spec, tasks, versions)
    return network, spec


def records_policy_versions(config: ImpalaConfig) -> bool:
    """Whether steps hold `policy_version` (IMPALA's policy lag): IMPALA's own configs only.

    LASER (a subclass's config) keeps its spec: its tools write steps of that spec by hand.
    """
    return type(config) is ImpalaConfig


def run_actor(
    config: ImpalaConfig,
    client: reverb.Client,
    seed: int,
    tables: Mapping[str, float] = trajectories.QUEUE_ONLY,
    params_table: str = PARAMS,
    episode_tables: Mapping[str, float] | None = None,
    max_episode_length: int = 0,
    actor_id: int = 0,
) -> None:
    """Acts forever with parameters from `params_table`, writing each unroll once into `tables` ({name: priority}).

    `episode_tables` get each whole episode too (LASER's recomputed LSTM states; `SequenceAdder`).
    In a multi-task run, actor `actor_id`'s envs are envs `actor_id * envs_per_actor + j`
    overall, each playing one fixed task round-robin (`common.envs.task_indices`; IMPALA §5.3).
    """
    first_env = actor_id * config.envs_per_actor
    env = envs.make_batched(
        config.env, config.envs_per_actor, seed=seed, first_env=first_env, **dict(config.env_options)
    )  # fmt: skip
    network, spec = build_agent(config)
    jit = networks.xla_compiles_network(config.xla)
    tasks = envs.task_indices(config.env, config.envs_per_actor, first_env) if "task" in spec else None
    actor = Actor(
        network, spec, env, client, config.unroll_length, seed, jit, tables=tables, params_table=params_table,
        episode_tables=episode_tables, max_episode_length=max_episode_length, tasks=tasks,
    )  # fmt: skip
    actor.run()


class QueueLearner:
    """The loop's learner: one update per batch of unrolls from `batches()`.

    IMPALA's batches are B unrolls from the queue. LASER's subclass mixes in
    replay, with its own `learner_class`, `batches` and `step`.
    """

    learner_class = Learner
    queue_table, params_table = trajectories.QUEUE_TABLE, PARAMS

    def __init__(self, config: ImpalaConfig, client: reverb.Client, address: str, strategy=None):
        with variable_scope(strategy):
            self.network, self.spec = build_agent(config)
            self.learner = self.learner_class(config, self.network, strategy)
            self.learner.build(  # A nest: an LSTM agent's `core_state` is one.
                tf.nest.map_structure(lambda s: tf.zeros([1, config.unroll_length + 1, *s.shape], s.dtype), self.spec)
            )
        self.config, self._client, self._address = config, client, address
        self._batches = self.batches()
        # A multi-task run logs each episode with its level (IMPALA §5.3).
        self._tasks = envs.tasks(config.env) if "task" in self.spec else ()
        self.policy_lag = trajectories.PolicyLag()

    frames = property(lambda self: self.learner.frame_count)
    steps = property(lambda self: self.learner.step_count)

    def batches(self) -> Iterator[dict[str, tf.Tensor] | None]:
        c = self.config
        return trajectories.batches(
            self._address, self.spec, c.unroll_length, c.batch_size, SAMPLE_WAIT_MS, self.queue_table
        )

    def state(self) -> dict:
        return {"learner": self.learner}

    def start(self) -> None:
        if self.learner.learning_rate() == 0.0 and self.frames < self.learner.config.total_frames:
            print("note: the learning rate had annealed to 0 at the run's earlier budget and stays 0: a larger "
                  "--frames continues the schedule from its value, without a jump", flush=True)  # fmt: skip
        self._publish()

    def step(self) -> loop.Step | None:
        batch = next(self._batches)
        if batch is None:
            return None
        if "policy_version" in batch:
            self.policy_lag.add(self.steps, batch["policy_version"].numpy())
        metrics = self.learner.step(batch)
        self._publish_if_due()
        fields = {k: batch[k].numpy() for k in ("episode_return", "episode_length", "task") if k in batch}
        episodes = trajectories.finished_episodes(fields, self._tasks)
        return loop.Step(metrics, episodes)

    def _publish_if_due(self) -> None:
        """Publishes after every `publish_every`-th learner step (1: after each)."""
        if self.steps % self.config.publish_every == 0:
            self._publish()

    def _publish(self) -> None:
        """The parameters, for the actors' next unrolls, and their version: the learner steps that made them."""
        version = np.asarray(self.steps, np.int64)
        reverb_variables.publish(self._client, self.network.trainable_variables, self.params_table, [version])

    def progress(self) -> dict[str, float]:
        return {"queue": self._client.server_info()[self.queue_table].current_size, **self.policy_lag.recent()}

    def summary(self) -> dict[str, float]:
        return self.policy_lag.summary()

    def save_extra(self) -> None:
        """The queue is transient: nothing outside the checkpoint to keep."""


def simulate_cpu_devices(count: int) -> None:
    """Splits the CPU into `count` logical devices (`impala.train --simulated_cpu_devices`); before TF starts."""
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
    return [
        reverb_tables.queue(trajectories.QUEUE_TABLE, config.queue_size), reverb_tables.variables(),
        reverb_tables.run_identity(),
    ]  # fmt: skip


def make_learner(
    distribute: str,
    simulated: bool,
    config: ImpalaConfig,
    client: reverb.Client,
    address: str,
    directory: pathlib.Path,
) -> QueueLearner:
    """`launch.Parts.learner` for `impala.train`: the queue learner under --distribute's strategy."""
    return QueueLearner(config, client, address, learner_strategy(distribute, simulated, config.batch_size))


def make_network(config: ImpalaConfig, env) -> networks.ActorCritic:
    network = networks.make(config, env.observation_space, int(env.action_space.n))
    observation, _ = env.reset()
    network.step(observation[None], tf.zeros((1,), tf.bool), network.initial_state(1))  # Creates the variables.
    return network


class Sampling:
    """Samples actions from pi = softmax(logits), carrying the recurrent state."""

    def __init__(self, config: ImpalaConfig, network: networks.ActorCritic, seed: int):
        self._network = network
        self._step = tf.function(network.step, jit_compile=networks.xla_compiles_network(config.xla))
        self._rng = np.random.default_rng(seed)

    def reset(self, num_envs: int) -> None:
        self._state = self._network.initial_state(num_envs)

    def __call__(self, observations: np.ndarray, first: np.ndarray) -> np.ndarray:
        output, self._state = self._step(observations, tf.constant(first), self._state)
        return categorical(tf.nn.softmax(output.policy_logits).numpy().astype(np.float64), self._rng)


def categorical(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[B] actions a_i ~ probs[i] ([B, A], rows summing to 1 up to rounding), by inverse CDF:
    a_i = #{a : sum_{b <= a} probs[i, b] < u_i}, u_i uniform on [0, the row's sum)."""
    cdf = probs.cumsum(axis=1)
    u = rng.random((len(probs), 1)) * cdf[:, -1:]
    return np.minimum((cdf < u).sum(axis=1), probs.shape[1] - 1)
