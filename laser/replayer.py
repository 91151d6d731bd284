"""LASER's replayer: whole episodes from replay, LSTM states recomputed, unrolls for the learner.

App. A.2: "we uniformly sample an episode. Then we replay each episode from the
beginning, using the most recent network parameters to recompute the LSTM
states along the way". App. B: Replayer Threads, "nearly identical to Actor
Threads", "sample entire episodes from replay, step through them while
reevaluating the LSTM state and slice the experience into trajectories of
length T", which go to the learner through a queue.

A replayer is an actor whose environment is the replay. It takes sampled
episodes `envs_per_actor` at a time, recomputes their states side by side (as
an actor steps its envs) from the zero state at each start, plays them one
after another as one env's stream, and cuts the stream as an actor's writer
does: unrolls of T + 1 steps every T steps, consecutive ones sharing a step,
crossing episode starts (where the learner resets the state). They go to the
`replayed` table, which the learner samples in random order. A step keeps all
the actor stored, mu's logits included, except the state: the recomputed one
replaces it. With unchanged parameters, replaying one actor env's episodes in
order gives that env's own unrolls (but at episode starts, where the stored
state is never used: the replayer stores zero there).

Cost: per replayed step, one forward pass of the torso and the LSTM (the
heads are not needed), with the newest parameters fetched once per batch of
episodes: the paper's "one additional forward pass for each learning step".
The paper recomputes with "the most recent network parameters"; here the
unrolls then wait in `replayed` (up to `queue_size` of them) until the learner
samples them, so their states can be several updates old by then;
episodes side by side are padded to the longest. Each unroll is written as
one Reverb step (a copy, in a transient table).

Episodes longer than `max_replay_episode_steps` arrive as segments
(`common.reverb.adders.SequenceAdder`). The replayer treats a cut as an episode
end (terminal, as the actor treats a time-limit truncation) and starts a
segment that begins mid-episode from the zero state (flagged `first`): the
constant start state of Kapturowski et al. 2019, which App. A.2 calls a partial
mitigation. The stored state cannot be kept there: the learner resets the state
only at `first` steps and otherwise carries it from the unroll's start, which
may lie in the previous episode.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import reverb
import tensorflow as tf

from common.reverb import variables as reverb_variables
from impala import networks
from laser.config import LaserConfig

EPISODES_TABLE = "episodes"  # Whole episodes (or segments), written by the actors.
REPLAYED_TABLE = "replayed"  # Unrolls with recomputed states, for the learner.


class Replayer:
    """Recomputes the LSTM states of episodes and writes them as unrolls of T + 1 steps.

    Args:
      config: the agent's config (T, the LSTM, XLA; `envs_per_actor` episodes side by side).
      client: a Reverb client.
      network: a network of the agent's shape, whose variables this replayer overwrites.
      params_table: where the learner publishes its parameters.
      table: where the unrolls go.
    """

    def __init__(
        self,
        config: LaserConfig,
        client: reverb.Client,
        network: networks.ActorCritic,
        params_table: str,
        table: str = REPLAYED_TABLE,
    ):
        self._client, self._network, self._params_table, self._table = client, network, params_table, table
        self._length = config.unroll_length
        self._core_states = tf.function(network.core_states, jit_compile=networks.xla_compiles_network(config.xla))
        self._writer = client.trajectory_writer(num_keep_alive_refs=1)
        self._pending = None  # Steps of the stream not yet in an unroll, and the overlap step.
        self.episodes_per_pass = config.envs_per_actor

    def replay(self, episodes: list[dict[str, Any]]) -> None:
        """Recomputes the states of `episodes` ([n, ...] fields) with the newest parameters; writes their unrolls.

        The episodes follow each other in the stream, in order. Blocks while the
        table is full.
        """
        variables = self._network.trainable_variables
        reverb_variables.assign(variables, reverb_variables.fetch(self._client, self._params_table))
        episodes = [as_episode(episode) for episode in episodes]
        for episode, states in zip(episodes, self.recompute([e["observation"] for e in episodes])):
            episode["core_state"] = states
            self._cut(episode)
        self._writer.flush()

    def recompute(self, observations: list[np.ndarray]) -> list[Any]:
        """The LSTM state before each step of each episode ([n, ...] nests), from the zero state at its start.

        The episodes run side by side, over windows of T steps (one trace per
        number of episodes); a shorter one is padded, and the padding dropped.
        At an episode's first step the state is zero, which is what the network
        makes of any state there (`ActorCritic._reset`).
        """
        lengths = [len(o) for o in observations]
        padded = -(-max(lengths) // self._length) * self._length
        batch = np.stack([np.concatenate([o, np.repeat(o[-1:], padded - len(o), 0)]) for o in observations], 1)
        first = np.zeros(batch.shape[:2], bool)  # Each episode starts from the zero state; none restarts.
        state = self._network.initial_state(len(observations))
        windows = []
        for start in range(0, padded, self._length):
            window = slice(start, start + self._length)
            states, state = self._core_states(batch[window], first[window], state)
            windows.append(tf.nest.map_structure(np.asarray, states))
        states = tf.nest.map_structure(lambda *w: np.concatenate(w), *windows)
        return [tf.nest.map_structure(lambda s, j=j, n=n: s[:n, j], states) for j, n in enumerate(lengths)]

    def _cut(self, episode: dict[str, Any]) -> None:
        """Appends the episode to the stream and writes every whole unroll: T + 1 steps every T, as an actor's."""
        steps = episode
        if self._pending is not None:
            steps = tf.nest.map_structure(lambda p, e: np.concatenate([p, e]), self._pending, episode)
        T, n = self._length, len(steps["first"])
        for start in range(0, n - T, T):
            unroll = tf.nest.map_structure(lambda x, start=start: x[start : start + T + 1], steps)
            self._writer.append(unroll)  # One step holding the unroll: a squeezed column reads back as [T + 1, ...].
            self._writer.create_item(self._table, 1.0, tf.nest.map_structure(lambda c: c[-1], self._writer.history))
        self._pending = tf.nest.map_structure(lambda x: x[(n - 1) // T * T :], steps)

    def run(self, episodes: Iterator[list[dict[str, Any]]]) -> None:
        """Replays batches of episodes (`sampled_episodes`) until they run out; a thread's loop."""
        for batch in episodes:
            self.replay(batch)

    def close(self) -> None:
        self._writer.close()


def as_episode(item: dict[str, Any]) -> dict[str, np.ndarray]:
    """An episode item as the replayer plays it: a copy, opened by `first` and closed by `terminal`.

    A whole episode already is; a segment of a longer one (`max_replay_episode_steps`)
    starts from the zero state and ends as if terminal (see the module docstring).
    """
    episode = {name: np.array(value) for name, value in item.items() if name != "core_state"}
    episode["first"][0] = True
    episode["terminal"][-1] = True
    return episode


def sampled_episodes(
    client: reverb.Client, spec: dict[str, Any], count: int, table: str = EPISODES_TABLE
) -> Iterator[list[dict]]:
    """Lists of `count` episodes sampled uniformly from `table`, each field [n, ...] (App. A.2).

    Blocks while the table holds too few.
    """
    while True:
        samples = client.sample(table, num_samples=count, emit_timesteps=False)
        yield [tf.nest.pack_sequence_as(spec, [np.asarray(column) for column in s.data]) for s in samples]
