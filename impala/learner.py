"""IMPALA's learner: V-trace actor-critic losses on batches of unrolls (§4.2).

The loss is `impala.losses.vtrace_actor_critic_loss`; the learner owns what
is around it: the optimizer, gradient clipping, the tf.distribute strategy,
the counters and the learning-rate schedule. The compiled `_update` is maths
only (V-trace and the losses under XLA, the network under XLA too when
`config.xla` says so); `step` around it counts frames and returns numbers, and
the shared loop (`common/loop.py`) does the logging and checkpoints.

A batch holds B unrolls of T + 1 steps, batch-major as the dataset gives them.
Step t of an unroll carries the observation x_t, `first` (x_t opens an
episode), the action a_t, the behaviour logits of mu at x_t, and the reward
r_t and `terminal` flag that followed a_t. Steps 0..T-1 are learned from; step
T contributes only its observation, whose value is the bootstrap V(x_T), and is
learned from as step 0 of the next unroll.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tensorflow as tf

from common.optimizers import RMSPropTF1
from common.schedules import LinearSchedule
from impala import losses
from impala.config import ImpalaConfig
from impala.networks import ActorCritic, AgentOutput, xla_compiles_network

LOSS_INPUTS = ("action", "behaviour_logits", "reward", "terminal")
# The metrics that are reduced losses (`losses.LossOutput`); the rest are means.
LOSS_METRICS = ("loss", "pg_loss", "baseline_loss")


class Learner(tf.Module):
    """Owns the network's optimizer state and counters (all checkpointable).

    With a `tf.distribute` strategy (e.g. `MirroredStrategy` over the GPUs of
    one machine), each replica computes the loss and gradients of its slice of
    the batch under XLA, the gradients are all-reduced, and every replica
    applies the same update. Build the network and call `build` inside
    `variable_scope(strategy)` so the variables are mirrored.
    """

    def __init__(self, config: ImpalaConfig, network: ActorCritic, strategy: tf.distribute.Strategy | None = None):
        super().__init__(name="learner")
        self.config = config
        self.network = network
        self.strategy = strategy
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="steps")
        self.frames = tf.Variable(0, dtype=tf.int64, trainable=False, name="frames")
        # App. G: annealed linearly to 0 over the frame budget (or held constant);
        # a resumed run with a larger budget continues from the current value.
        final_rate = 0.0 if config.anneal_learning_rate else config.learning_rate
        self.learning_rate_schedule = LinearSchedule(config.learning_rate, final_rate, config.total_frames)
        self._optimizer = None
        # V-trace and the losses always run under XLA; the network too when
        # config.xla asks for it (see XLA_MODES). Compiled once, here.
        jit_network = xla_compiles_network(config.xla)
        self._losses = tf.function(self._losses_from_outputs, jit_compile=True)
        self._train_step = tf.function(self._update, jit_compile=jit_network)
        self._replica_gradients = tf.function(self._loss_and_gradients, jit_compile=jit_network)
        # Env frames each update consumes for the first time.
        self._frames_per_batch = self.new_unrolls_per_batch(config) * config.unroll_length * config.frames_per_step

    @staticmethod
    def new_unrolls_per_batch(config: ImpalaConfig) -> int:
        """Unrolls a batch brings that no batch learned from before: all of IMPALA's."""
        return config.batch_size

    @property
    def optimizer(self) -> RMSPropTF1:
        if self._optimizer is None:  # Variables exist only after the first call.
            self._optimizer = RMSPropTF1(
                self.network.trainable_variables,
                decay=self.config.rmsprop_decay,
                epsilon=self.config.rmsprop_epsilon,
                momentum=self.config.rmsprop_momentum,
            )
        return self._optimizer

    def build(self, batch: dict[str, tf.Tensor]) -> None:
        """Creates the variables (and the optimizer's) from one batch's shapes."""
        observations = _time_major(batch["observation"])
        self.network.unroll(observations, _time_major(batch["first"]), self._initial_state(batch))
        self.optimizer  # noqa: B018

    @property
    def frame_count(self) -> int:
        return int(self.frames.numpy())

    @property
    def step_count(self) -> int:
        return int(self.steps.numpy())

    def learning_rate(self) -> float:
        """The learning rate, annealed linearly to 0 at the frame budget (App. G)."""
        return self.learning_rate_schedule(self.frame_count, self.config.total_frames)

    def step(self, batch: dict[str, Any]) -> dict[str, float]:
        """One update; returns the losses and diagnostics as floats."""
        learning_rate = tf.constant(self.learning_rate(), tf.float32)
        if self.strategy is None:
            metrics = self._train_step(batch, learning_rate)
        else:
            metrics = self._distributed_step(self._split(batch), learning_rate)
        self.steps.assign_add(1)
        self.frames.assign_add(self._frames_per_batch)
        return {k: float(v) for k, v in metrics.items()}

    def _initial_state(self, batch):
        if "core_state" not in batch:
            return ()
        return tf.nest.map_structure(lambda s: s[:, 0], batch["core_state"])

    def _update(self, batch: dict[str, tf.Tensor], learning_rate: tf.Tensor) -> dict[str, tf.Tensor]:
        gradients, metrics = self._loss_and_gradients(batch)
        return self._apply(gradients, metrics, learning_rate)

    def _loss_and_gradients(self, batch: dict[str, tf.Tensor]) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        """The network's unroll, then the losses, and their gradients."""
        b = {k: _time_major(v) for k, v in batch.items() if k != "core_state"}
        with tf.GradientTape() as tape:
            outputs, _ = self.network.unroll(b["observation"], b["first"], self._initial_state(batch))
            metrics = self._losses({k: b[k] for k in LOSS_INPUTS}, outputs)
        return tape.gradient(metrics["loss"], self.network.trainable_variables), metrics

    def _losses_from_outputs(self, b: dict[str, tf.Tensor], outputs: AgentOutput) -> dict[str, tf.Tensor]:
        """`losses.vtrace_actor_critic_loss` on [T + 1, B] unrolls: steps 0..T-1, bootstrap V(x_T)."""
        c = self.config
        result = losses.vtrace_actor_critic_loss(
            *self._loss_inputs(b, outputs),
            baseline_cost=c.baseline_cost, entropy_cost=c.entropy_cost, reduction=c.loss_reduction,
            correction=c.correction, clip_rho_threshold=c.clip_rho_threshold,
            clip_pg_rho_threshold=c.clip_pg_rho_threshold,
        )  # fmt: skip
        return result._asdict()

    def _loss_inputs(self, b: dict[str, tf.Tensor], outputs: AgentOutput) -> tuple[tf.Tensor, ...]:
        """(mu's logits, pi's logits, a, gamma, r, V, V(x_T)) of steps 0..T-1, rewards clipped."""
        c = self.config
        return (
            b["behaviour_logits"][:-1], outputs.policy_logits[:-1], tf.cast(b["action"][:-1], tf.int32),
            c.discount * (1.0 - tf.cast(b["terminal"][:-1], tf.float32)),
            losses.clip_rewards(b["reward"][:-1], c.reward_clipping), outputs.baseline[:-1], outputs.baseline[-1],
        )  # fmt: skip

    def _apply(self, gradients, metrics: dict[str, tf.Tensor], learning_rate: tf.Tensor) -> dict[str, tf.Tensor]:
        gradient_norm = tf.linalg.global_norm(gradients)
        if self.config.max_grad_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, self.config.max_grad_norm, use_norm=gradient_norm)
        self.optimizer.apply(gradients, learning_rate)
        return {**metrics, "gradient_norm": gradient_norm, "learning_rate": learning_rate}

    # Several replicas (tf.distribute). ----------------------------------------

    def _split(self, batch: dict[str, tf.Tensor]):
        """Each replica's slice of the batch (B must divide by the replica count)."""
        replicas = self.strategy.num_replicas_in_sync

        def slice_for(context):
            return tf.nest.map_structure(lambda x: tf.split(x, replicas)[context.replica_id_in_sync_group], batch)

        return self.strategy.experimental_distribute_values_from_function(slice_for)

    @tf.function
    def _distributed_step(self, batch, learning_rate: tf.Tensor) -> dict[str, tf.Tensor]:
        # A summed loss sums the replicas' gradients; an averaged one averages them. The
        # losses combine as the gradients do; the other metrics are means over equal slices.
        combine = tf.distribute.ReduceOp.SUM if self.config.loss_reduction == "sum" else tf.distribute.ReduceOp.MEAN

        def replica_step(batch, learning_rate):
            gradients, metrics = self._replica_gradients(batch)
            context = tf.distribute.get_replica_context()
            gradients = context.all_reduce(combine, gradients)
            metrics = {
                k: context.all_reduce(combine if k in LOSS_METRICS else tf.distribute.ReduceOp.MEAN, v)
                for k, v in metrics.items()
            }
            return self._apply(gradients, metrics, learning_rate)

        metrics = self.strategy.run(replica_step, args=(batch, learning_rate))
        return {k: self.strategy.experimental_local_results(v)[0] for k, v in metrics.items()}


def variable_scope(strategy: tf.distribute.Strategy | None):
    """Where to create the network and learner: mirrored variables for a strategy.

    Variables are created with ONLY_FIRST_REPLICA aggregation: every replica
    computes the same all-reduced update, so the first replica's is applied to
    all copies.
    """
    if strategy is None:
        return contextlib.nullcontext()

    def mirrored(next_creator, **kwargs):
        kwargs.setdefault("aggregation", tf.VariableAggregation.ONLY_FIRST_REPLICA)
        return next_creator(**kwargs)

    stack = contextlib.ExitStack()
    stack.enter_context(strategy.scope())
    stack.enter_context(tf.variable_creator_scope(mirrored))
    return stack


def _time_major(x: tf.Tensor) -> tf.Tensor:
    """[B, T, ...] -> [T, B, ...]."""
    return tf.transpose(x, tf.concat([[1, 0], tf.range(2, tf.rank(x))], 0))
