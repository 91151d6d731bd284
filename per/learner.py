"""Prioritized Double DQN's learner: one weighted update per sampled minibatch.

PER Algorithm 1, lines 11, 13, 15 and 16, for one minibatch of k transitions j
that the replay sampled, with their importance weights w_j (lines 9-10); the
agent writes the priorities back (line 12):

    delta_j = R_j + gamma_j Q(S_j, argmax_a Q(S_j, a; theta); theta^-) - Q(S_{j-1}, A_{j-1}; theta)
    theta  <- theta - eta * grad L,  L = sum_j w_j huber(delta_j)   (RMSProp; §4 clips delta to [-1, 1])
    theta^- <- theta every `target_update_period` updates

L is the sum over the minibatch (Algorithm 1's accumulated Delta) or, with
`loss_reduction="mean"` (the MinAtar presets, as Young & Tian), its mean.

The compiled `_update` is the maths only (`per.losses`, the optimizer); the
Python `update` around it counts updates and copies the target network. Given
the actor's next observations, the same compiled call also returns their greedy
actions under the updated theta, the next agent step's policy: one TF call per
agent step fewer when the learner acts itself.
The replay's side (sampling, writing |delta_j| back) is the caller's.
This module also holds what a checkpoint must keep beside the networks: the
counters, and the epsilon and beta schedules.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np
import tensorflow as tf

from common import optimizers
from common.schedules import LinearSchedule
from per import losses, networks
from per.config import PerConfig
from per.networks import QNetwork

# One transition's fields, as stored in the replay and batched for `update`.
FIELDS = ("observation", "action", "reward", "terminal", "next_observation")


class Update(NamedTuple):
    loss: float
    td_error: np.ndarray  # [B] delta_j, for the priorities.
    target_updated: bool
    greedy: np.ndarray | None  # [N] argmax_a Q(act_on, a; theta) after the step, if `act_on` was given.


class Learner(tf.Module):
    """The online and target networks, the optimizer, counters and schedules (all checkpointable)."""

    def __init__(self, config: PerConfig, network: QNetwork, target_network: QNetwork):
        super().__init__(name="learner")
        self.config = config
        self.network, self.target_network = network, target_network
        self.optimizer = optimizers.rmsprop(
            config.rmsprop_form, network.trainable_variables, decay=config.rmsprop_decay,
            epsilon=config.rmsprop_epsilon, momentum=config.rmsprop_momentum, centered=config.rmsprop_centered,
        )  # fmt: skip
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="steps")  # Updates.
        # Behind `agent_step_count` between checkpoints: `sync_counters` sets it before each.
        self.agent_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="agent_steps")
        self.target_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="target_updates")
        # Epsilon over a fixed number of agent steps (tuned DDQN: 1M), whatever the budget.
        self.epsilon_schedule = LinearSchedule(config.epsilon_start, config.epsilon_end, config.epsilon_decay_steps)
        # Beta from beta0 to beta_final (§3.4: 1) at the end of training: over the frame
        # budget; a resume with a larger budget continues from the current value.
        self.beta_schedule = LinearSchedule(config.beta0, config.beta_final, config.total_frames)
        # Not under XLA: measured no faster for these networks on CPU, and it compiles at start.
        self._update = tf.function(self._loss_and_step)
        self._update_and_act = tf.function(self._loss_step_and_act)
        self._compiled = self._compiled_acting = None  # Their concrete functions, traced at the first call.
        self._frames_per_step = config.frames_per_step
        self.copy_to_target()
        self.step_count, self.agent_step_count = 0, 0
        self._mirrored = False

    def restored(self) -> None:
        """Call after a checkpoint restore (or instead of one), before training.

        It mirrors the counters and the schedules' lines in Python, because a
        variable read costs more than a small network's step on these CPUs. A
        resumed run with a larger budget re-anchors beta here, once.
        """
        self.step_count = int(self.steps.numpy())
        self.agent_step_count = int(self.agent_steps.numpy())
        self._mirrored = True
        self.beta_schedule(self.frames, self.config.total_frames)
        self._epsilon, self._beta = self.epsilon_schedule.frozen(), self.beta_schedule.frozen()

    def count_agent_steps(self, n: int) -> None:
        # Python only, the variable follows before each checkpoint (`sync_counters`): an eager
        # assign per act() cost about 25 us, a percent or so of a MinAtar agent step.
        self.agent_step_count += n

    def sync_counters(self) -> None:
        """The agent-step variable from its Python count (call before a checkpoint is written)."""
        self.agent_steps.assign(self.agent_step_count)

    @property
    def update_count(self) -> int:
        return self.step_count if self._mirrored else int(self.steps.numpy())

    @property
    def frames(self) -> int:
        agent_steps = self.agent_step_count if self._mirrored else int(self.agent_steps.numpy())
        return agent_steps * self._frames_per_step

    def epsilon(self) -> float:
        """Training epsilon: linear from epsilon_start to epsilon_end over epsilon_decay_steps agent steps."""
        return self._epsilon(self.agent_step_count)

    def beta(self) -> float:
        """The IS exponent: linear from beta0 to beta_final (§3.4: 1) at the frame budget."""
        return self._beta(self.frames)

    def copy_to_target(self) -> None:
        for target, online in zip(self.target_network.variables, self.network.variables):
            target.assign(online)

    def update(
        self, batch: Mapping[str, np.ndarray], importance_weights: np.ndarray, act_on: np.ndarray | None = None
    ) -> Update:
        """One RMSProp step on a minibatch; copies theta to theta^- every `target_update_period` updates.

        With `act_on` ([N, ...] observations) it also returns their greedy actions under the updated
        theta (`Update.greedy`). Each form keeps the shapes of its first call, as a concrete function.
        """
        inputs = [tf.convert_to_tensor(batch[name]) for name in FIELDS]
        inputs.append(tf.convert_to_tensor(importance_weights, tf.float32))
        acts = act_on is not None
        # Calling a concrete function skips tf.function's argument matching.
        if acts:
            inputs.append(tf.convert_to_tensor(act_on))
            if self._compiled_acting is None:
                self._compiled_acting = self._update_and_act.get_concrete_function(*inputs)
        elif self._compiled is None:
            self._compiled = self._update.get_concrete_function(*inputs)
        loss, td_error, *greedy = (self._compiled_acting if acts else self._compiled)(*inputs)
        self.step_count += 1
        copied = self.step_count % self.config.target_update_period == 0
        if copied:
            self.copy_to_target()
            self.target_updates.assign_add(1)
        return Update(float(loss), td_error.numpy(), copied, greedy[0].numpy() if acts else None)

    def _loss_and_step(self, observation, action, reward, terminal, next_observation, importance_weights):
        """The weighted Double DQN loss and its RMSProp step (maths only)."""
        c = self.config
        if c.clip_rewards:
            reward = tf.clip_by_value(reward, -1.0, 1.0)
        discount = c.discount * (1.0 - tf.cast(terminal, tf.float32))
        q_t_value = self.target_network(next_observation)
        # The selector only picks argmax_a, which has no gradient, so it is computed off the tape:
        # backpropagating through S_{j-1} alone made the update about a third faster (README).
        q_t_selector = self.network(next_observation)
        with tf.GradientTape() as tape:
            q_tm1 = self.network(observation)
            result = losses.prioritized_double_q_loss(
                q_tm1, tf.cast(action, tf.int32), tf.cast(reward, tf.float32), discount, q_t_value,
                q_t_selector, importance_weights, reduction=c.loss_reduction,
            )  # fmt: skip
        gradients = tape.gradient(result.loss, self.network.trainable_variables)
        self.optimizer.apply(gradients, tf.constant(c.learning_rate, tf.float32))
        self.steps.assign_add(1)  # Here rather than in Python: one dispatch fewer per update.
        return result.loss, result.td_error

    def _loss_step_and_act(self, *inputs):
        """`_loss_and_step`, then the greedy actions of the last input's observations under the new theta.

        A tf.function runs a variable's reads after the assigns that precede
        them in the code, so the Q-values read theta after the step.
        """
        *step_inputs, act_on = inputs
        loss, td_error = self._loss_and_step(*step_inputs)
        return loss, td_error, networks.greedy_actions(self.network, act_on)
