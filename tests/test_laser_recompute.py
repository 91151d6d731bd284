"""LASER's recomputed LSTM states for replay (App. A.2, App. B), on a live Reverb server.

The reference is the actor itself: an LSTM actor with one Catch env writes its
unrolls to a queue and its episodes to a FIFO copy of the `episodes` table, so
both come back in the order they were played. Replaying those episodes in that
order must give back the actor's own unrolls: the same steps, cut at the same
places with the same one-step overlaps, and, with unchanged parameters, the same
LSTM states (issue #10) wherever the network uses them (at an episode start it
resets any state; the replayer stores zero there). With changed parameters the
states must be the changed network's, stepped through the same steps one at a
time. T = 4 does not divide Catch's 9-step episodes, so unrolls straddle episode
starts.
"""

import dataclasses
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import reverb
import tensorflow as tf

from common import envs
from common.errors import UsageError
from common.reverb import server as reverb_server
from common.reverb import tables
from common.reverb import variables as reverb_variables
from impala import agent as impala_agent
from impala import trajectories
from impala.actor import Actor
from laser.config import PRESETS
from laser.replayer import EPISODES_TABLE, REPLAYED_TABLE, Replayer

REPO = pathlib.Path(__file__).resolve().parent.parent
T = 4
CONFIG = dataclasses.replace(
    PRESETS["toy_laser"], use_lstm=True, lstm_size=8, unroll_length=T, envs_per_actor=1, recompute_replay_state=True
)
UNROLLS = 12  # 49 steps: 5 whole Catch episodes and the start of a sixth.


@pytest.fixture
def play():
    """`play(max_episode_length)`: (client, spec, the actor's unrolls, its episodes in order, parts).

    Append to `parts` what streams to the server: closed before the server stops.
    """
    made = []

    def make(max_episode_length: int = CONFIG.max_replay_episode_steps):
        server = reverb_server.make_server([
            tables.queue(trajectories.QUEUE_TABLE, 1000), tables.queue(EPISODES_TABLE, 1000),
            tables.queue(REPLAYED_TABLE, 1000), tables.variables(),
        ])  # fmt: skip
        made.append((server, []))
        client = reverb.Client(f"localhost:{server.port}")
        network, spec = impala_agent.build_agent(CONFIG)
        reverb_variables.publish(client, network.trainable_variables)
        env = envs.make_batched(CONFIG.env, 1, seed=3)
        actor = Actor(
            network, spec, env, client, T, seed=3, jit=False, tables=trajectories.QUEUE_ONLY,
            episode_tables={EPISODES_TABLE: 1.0}, max_episode_length=max_episode_length,
        )  # fmt: skip
        actor.run(num_unrolls=UNROLLS)
        actor.close()
        return (
            client,
            spec,
            drain(client, trajectories.QUEUE_TABLE, spec),
            drain(client, EPISODES_TABLE, spec),
            made[-1][1],
        )

    yield make
    for server, parts in made:
        for part in parts:
            part.close()
        server.stop()


def drain(client: reverb.Client, table: str, spec) -> list[dict]:
    """Every item of a FIFO `table`, in order, each field [n, ...]."""
    size = client.server_info()[table].current_size
    return [
        tf.nest.pack_sequence_as(spec, [np.asarray(c) for c in sample.data])
        for sample in client.sample(table, num_samples=size, emit_timesteps=False)
    ]


def replay(client, spec, episodes, parts) -> list[dict]:
    """The replayer's unrolls of `episodes`, played in order with the published parameters."""
    network, _ = impala_agent.build_agent(CONFIG)
    replayer = Replayer(CONFIG, client, network, tables.PARAMS, REPLAYED_TABLE)
    parts.append(replayer)
    replayer.replay(episodes)
    replayer.close()
    return drain(client, REPLAYED_TABLE, spec)


def states(unroll: dict) -> np.ndarray:
    """[T + 1, 2 lstm_size]: hidden and cell state before each step."""
    return np.concatenate([s.reshape(T + 1, -1) for s in tf.nest.flatten(unroll["core_state"])], -1)


def test_unchanged_parameters_give_the_actors_unrolls_and_states(play):
    client, spec, unrolls, episodes, parts = play()
    assert len(unrolls) == UNROLLS and len(episodes) == 5
    assert [len(e["first"]) for e in episodes] == [9] * 5 and all(e["first"][0] and e["terminal"][-1] for e in episodes)
    replayed = replay(client, spec, episodes, parts)
    assert len(replayed) == (5 * 9 - 1) // T  # Unrolls of T + 1 steps every T steps: as the actor cuts.
    for mine, theirs in zip(replayed, unrolls):
        for name in spec:
            if name != "core_state":  # Steps, their order and the overlaps: exactly the actor's.
                np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
        used = ~mine["first"]  # At an episode start the network resets any state: the replayer stores zero.
        np.testing.assert_allclose(states(mine)[used], states(theirs)[used], atol=1e-5)
        assert not states(mine)[~used].any()
    assert np.abs(states(unrolls[3])).max() > 0.01  # Not vacuous: the states are far from zero.


def stepped_states(network, unrolls: list[dict]) -> list[np.ndarray]:
    """Each unroll's [T + 1, 2 lstm_size] states by `network.step`, one step at a time through the stream.

    Independent of the replayer's path (`core_states` over whole episodes): the
    steps in the order played (unroll i's first T, then the last unroll's end),
    each from the state the previous step left, reset at an episode start.
    """
    steps = [(u["observation"][t], u["first"][t]) for u in unrolls for t in range(T)]
    steps.append((unrolls[-1]["observation"][T], unrolls[-1]["first"][T]))
    state, before = network.initial_state(1), []
    for observation, first in steps:
        before.append(np.concatenate([np.reshape(s, -1) for s in tf.nest.flatten(state)]))
        _, state = network.step(tf.constant(observation[None]), tf.constant([first]), state)
    return [np.array(before[T * i : T * i + T + 1]) for i in range(len(unrolls))]


def test_changed_parameters_give_the_changed_networks_states(play):
    client, spec, unrolls, episodes, parts = play()
    network, _ = impala_agent.build_agent(CONFIG)
    for variable in network.trainable_variables:
        variable.assign(variable * 1.5 + 0.1)
    reverb_variables.publish(client, network.trainable_variables)
    replayed = replay(client, spec, episodes, parts)
    expected = stepped_states(network, replayed)
    for mine, theirs, want in zip(replayed, unrolls, expected):
        later = ~mine["first"]  # At an episode start the network resets any state: the replayer stores zero.
        np.testing.assert_allclose(states(mine)[later], want[later], atol=1e-5)
        assert np.abs(states(mine)[later] - states(theirs)[later]).max(-1).min() > 1e-4  # Not the actor's.
        np.testing.assert_array_equal(mine["behaviour_logits"], theirs["behaviour_logits"])  # mu is kept.


def test_long_episodes_are_cut_into_segments_that_restart_from_zero(play):
    client, spec, unrolls, segments, parts = play(max_episode_length=5)
    assert [len(segment["first"]) for segment in segments] == [5, 4] * 5  # Each 9-step episode cut once.
    replayed = replay(client, spec, segments, parts)
    assert len(replayed) == (5 * 9 - 1) // T  # The segments rejoin: the 5 whole episodes, as the actor cut them.
    checked_restarts = 0
    for i, (mine, theirs) in enumerate(zip(replayed, unrolls)):
        position = (T * i + np.arange(T + 1)) % 9  # Step of the episode.
        np.testing.assert_array_equal(mine["observation"], theirs["observation"])
        np.testing.assert_array_equal(mine["first"], theirs["first"] | (position == 5))  # A segment restarts...
        np.testing.assert_array_equal(mine["terminal"], theirs["terminal"] | (position == 4))  # ...after a cut.
        # States in an episode's first segment are the actor's; the second segment starts from zero.
        kept, restarted = (1 <= position) & (position <= 4), position >= 6
        np.testing.assert_allclose(states(mine)[kept], states(theirs)[kept], atol=1e-5)
        if restarted.any():
            assert np.abs(states(mine)[restarted] - states(theirs)[restarted]).max(-1).min() > 1e-4
            checked_restarts += 1
    assert checked_restarts > 0


def test_config_refuses_what_it_cannot_recompute():
    base = PRESETS["toy_laser"]
    for fields, fragment in [
        ({"use_lstm": False}, "set use_lstm=true"),
        ({"use_lstm": True, "replay_fraction": 0.0}, "nothing is replayed"),
        ({"use_lstm": True, "replay_priority": "critic_loss"}, "uniform replay only"),
        ({"use_lstm": True, "sweep_member": 0}, "shared-replay sweep"),
    ]:
        with pytest.raises(UsageError, match=fragment):
            dataclasses.replace(base, recompute_replay_state=True, **fields)
    assert not any(preset.recompute_replay_state for preset in PRESETS.values())  # No preset has an LSTM.


def test_training_with_recomputed_states_runs(tmp_path):
    directory = tmp_path / "run"
    overrides = ["use_lstm=true", "lstm_size=16", "recompute_replay_state=true", "max_replay_episode_steps=20"]
    command = [sys.executable, "-m", "laser.train", "--preset=toy_laser", f"--run_dir={directory}", "--frames=4000"]
    command += [f"--config_override={override}" for override in overrides]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads((directory / "final.json").read_text())["frames"] >= 4000
    assert "replay_episodes" in result.stdout and "replayed" in result.stdout  # The tables, in the progress line.
