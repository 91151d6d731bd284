"""Frames stored once (issue #12): what the replay samples is what the env returned.

The agent's storage (`per.agent.make_replay`, `PrioritizedReplay.add_transition`)
writes each frame once and makes every transition an item of references to the
frames of S_{j-1} and S_j. Against a real in-process Reverb server:

* every sampled S_{j-1}, A, R, terminal, S_j equals the env's own arrays for
  that step, across chunk boundaries, life-loss terminals (the stack goes on)
  and games the env reset itself to (same-step autoreset: S_j is the new
  game's first stack), for Atari's stacks of 4 and single observations;
* the frames survive a Reverb checkpoint;
* priorities, keys and IS weights behave as with `add`'s one-step items
  (tests/test_per.py's statistics, on transitions);
* items an actor process wrote (no insertion index) age from the learner's
  first sample of them, and the rank tracker never forgets a live one.
"""

import dataclasses
import threading
import time

import numpy as np
import pytest
import reverb
import test_per
from test_per import keys_by_item

from common import envs
from common.reverb import server as reverb_server
from per import agent as agent_lib
from per import networks, replay, replay_config
from per.actor import Actor, Transition
from per.config import PRESETS

ATARI = dataclasses.replace(
    PRESETS["atari_ddqn_prop"], env="atari:breakout", envs_per_actor=2, update_period=4,
    alpha=1.0, priority_epsilon=0.0,  # A seen item's priority 0 is never drawn again: see `read_all`.
)  # fmt: skip
SINGLE = {
    "minatar": dataclasses.replace(
        PRESETS["minatar_ddqn_prop"], envs_per_actor=2, update_period=2, alpha=1.0, priority_epsilon=0.0
    ),
    "toy": dataclasses.replace(PRESETS["toy"], envs_per_actor=2, alpha=1.0, priority_epsilon=0.0),
}


@pytest.fixture
def servers(reverb_tables):
    """In-process servers for `replay.table(config)`, sampling from 1 item; replays close before servers stop."""

    def make(config, checkpoint_dir=None):
        return reverb_tables([replay.table(dataclasses.replace(config, min_size=1))], checkpoint_dir)

    return make


def play(config, buffer, steps, seed=0):
    """The agent's acting and storage at epsilon 1: {insertion id: the env's transition, copied}."""
    space, num_actions = agent_lib.spaces(config)
    env = envs.make_batched(config.env, config.envs_per_actor, seed=seed, **dict(config.env_options))
    actor = Actor(networks.make(config, space, num_actions, name="q"), env, seed)
    added = {}
    for _ in range(steps):
        transitions, _ = actor.step(1.0)
        for stream, transition in enumerate(transitions):
            added[buffer.inserted] = Transition(*(np.array(x) for x in transition))
            buffer.add_transition(transition, stream)
    env.close()
    return added


def read_all(buffer, n):
    """Every item once, {insertion id: its five sampled fields}: a seen item's priority is set to 0."""
    found = {}
    for _ in range(n):  # Bounded: a batch drawn after an update holds unseen items only.
        if len(found) == n:
            break
        batch = buffer.sample(64, beta=0.0)
        for j, key in enumerate(batch.keys):
            found[buffer._inserted_at[int(key)]] = [column[j] for column in batch.data]
        buffer.update(batch.keys, np.zeros(len(batch.keys)))
    assert len(found) == n, f"{n - len(found)} items never sampled"
    return found


def assert_items_are_the_transitions(found, added):
    assert sorted(found) == sorted(added)
    for item, transition in added.items():
        for field, got, want in zip(Transition._fields, found[item], transition):
            np.testing.assert_array_equal(got, want, err_msg=f"item {item}, {field}")


def kinds(added):
    """Counts of life-loss terminals (the stack goes on) and game overs (a new game's stack)."""
    life_losses = game_overs = 0
    for t in added.values():
        continues = np.array_equal(t.next_observation[:-1], t.observation[1:])
        life_losses += bool(t.terminal) and continues
        game_overs += not continues
    return life_losses, game_overs


def test_sampled_atari_stacks_are_the_envs_own_across_life_losses_and_game_overs(servers):
    client, replays = servers(ATARI.replay_config)
    buffer = agent_lib.make_replay(ATARI, client)
    replays.append(buffer)
    assert (agent_lib.frame_stack(ATARI), agent_lib.chunk_length(ATARI)) == (4, agent_lib.CHUNK_LENGTH)
    added = play(ATARI, buffer, steps=400)
    life_losses, game_overs = kinds(added)
    assert life_losses >= 4 and game_overs >= 2, (life_losses, game_overs)
    # A new game's first stack holds what the env put there (blank frames, then the first).
    reset = next(
        t.next_observation for t in added.values() if not np.array_equal(t.next_observation[:-1], t.observation[1:])
    )
    assert not reset[:-1].any() and reset[-1].any()
    assert_items_are_the_transitions(read_all(buffer, len(added)), added)


@pytest.mark.parametrize("family", ["minatar", "toy"])
def test_sampled_single_observations_are_the_envs_own(servers, family):
    config = SINGLE[family]
    client, replays = servers(config.replay_config)
    buffer = agent_lib.make_replay(config, client)
    replays.append(buffer)
    assert agent_lib.frame_stack(config) == 1
    added = play(config, buffer, steps=150)
    assert sum(bool(t.terminal) for t in added.values()) >= 2
    assert_items_are_the_transitions(read_all(buffer, len(added)), added)


def stack_of(frame_ids):
    """A [4, 2, 3] uint8 stack whose frame i is filled with frame_ids[i] (distinct frames)."""
    return np.stack([np.full((2, 3), f, np.uint8) for f in frame_ids])


def test_windows_over_short_chunks_new_games_and_skipped_steps(servers):
    """Synthetic stacks: chunks of 3 frames, flushes between, a reset stack, and a caller skipping a step."""
    config = replay_config.ReplayConfig(alpha=1.0, epsilon=0.0, capacity=1000)
    client, replays = servers(config)
    buffer = replay.PrioritizedReplay(client, config, flush_every=5, frame_stack=4, chunk_length=3)
    replays.append(buffer)
    frames = iter(range(1, 256))
    state, added = stack_of([0, 0, 0, next(frames)]), {}
    for step in range(40):
        if step in (11, 12, 25):  # A new game: the env's reset stack (blank frames repeat across games).
            next_state = stack_of([0, 0, 0, next(frames)])
        else:
            next_state = np.concatenate([state[1:], stack_of([next(frames)])[-1:]])
        terminal = np.float32(step in (5, 11, 12, 25))  # Step 5: a life lost, the stack goes on.
        transition = Transition(state, np.int32(step % 3), np.float32(step), terminal, next_state)
        if step != 30:  # Step 30 is never stored: step 31's S_{j-1} is not the stream's last S_j.
            added[buffer.inserted] = transition
            buffer.add_transition(transition)
        state = next_state
    assert_items_are_the_transitions(read_all(buffer, len(added)), added)


def test_each_envs_frames_are_written_once(servers, monkeypatch):
    """Two envs' games, interleaved: each stream's first stack is written whole, then one new frame a step
    (about k times less memory than a stack an item), and every item still reads as its env's own."""
    config = replay_config.ReplayConfig(alpha=1.0, epsilon=0.0, capacity=1000)
    client, replays = servers(config)
    buffer = replay.PrioritizedReplay(client, config, frame_stack=4, chunk_length=3)
    replays.append(buffer)
    written, append = [], replay.TransitionWriter._append

    def counted(writer, frame, step=None):
        written.append(int(frame.flat[0]))
        return append(writer, frame, step)

    monkeypatch.setattr(replay.TransitionWriter, "_append", staticmethod(counted))
    states, added = {0: stack_of([0, 0, 0, 1]), 1: stack_of([0, 0, 0, 101])}, {}
    for j in range(10):
        for stream in (0, 1):
            next_state = np.concatenate([states[stream][1:], stack_of([2 + j + 100 * stream])[-1:]])
            transition = Transition(states[stream], np.int32(0), np.float32(j), np.float32(0), next_state)
            added[buffer.inserted] = transition
            buffer.add_transition(transition, stream)
            states[stream] = next_state
    firsts = [0, 0, 0, 1, 2, 0, 0, 0, 101, 102]  # Each stream's first S_{j-1} whole, and its S_j's new frame.
    assert written == firsts + [frame for j in range(1, 10) for frame in (2 + j, 102 + j)]
    assert_items_are_the_transitions(read_all(buffer, len(added)), added)


def test_frames_survive_a_reverb_checkpoint(servers, tmp_path):
    config = dataclasses.replace(ATARI, envs_per_actor=1)
    client, replays = servers(config.replay_config, tmp_path)
    first = agent_lib.make_replay(config, client)
    replays.append(first)
    added = play(config, first, steps=100)
    first.flush()
    client.checkpoint()
    first.close()
    restored, replays = servers(config.replay_config, tmp_path)  # Loads the latest checkpoint.
    second = agent_lib.make_replay(config, restored)
    replays.append(second)
    second.inserted = first.inserted  # As `ReplayState` restores it.
    more = play(config, second, steps=1, seed=1)  # The first sample needs the columns' spec.
    assert_items_are_the_transitions(read_all(second, len(added) + 1), {**added, **more})


@pytest.mark.parametrize("frame_stack", [1, 4])
def test_items_of_a_checkpoint_from_before_the_window_column_still_read(servers, frame_stack):
    """Before issue #13 an item held S_{j-1} and S_j in two columns: a resumed replay samples them beside new items."""
    config = replay_config.ReplayConfig(alpha=1.0, epsilon=0.0, capacity=100)
    client, replays = servers(config)
    buffer = replay.PrioritizedReplay(client, config, flush_every=3, frame_stack=frame_stack, chunk_length=3)
    replays.append(buffer)
    shape = [frame_stack, 2, 3] if frame_stack > 1 else [2, 3]
    states = [np.full(shape, i, np.uint8) for i in range(9)]
    transitions = [Transition(states[i], np.int32(i), np.float32(i), np.float32(0), states[i + 1]) for i in range(8)]
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    for i, t in enumerate(transitions[:4]):  # The old layout: [step, S_{j-1}, S_j], one step each.
        writer.append({"step": np.array([i, t.action, t.reward, t.terminal], np.float64),
                       "observation": t.observation, "next_observation": t.next_observation})  # fmt: skip
        writer.create_item("replay", 1.0, [writer.history[c][-1] for c in ("step", "observation", "next_observation")])
    writer.flush()
    writer.close()
    buffer.count_inserts(4)
    for t in transitions[4:]:
        buffer.add_transition(t)
    assert_items_are_the_transitions(read_all(buffer, 8), dict(enumerate(transitions)))


def test_a_table_of_other_observations_is_refused(servers):
    config = replay_config.ReplayConfig(capacity=100)
    client, replays = servers(config)
    buffer = replay.PrioritizedReplay(client, config, flush_every=1)
    replays.append(buffer)
    buffer.add_transition(
        Transition(np.zeros(3, np.uint8), np.int32(0), np.float32(0), np.float32(0), np.ones(3, np.uint8))
    )
    buffer.expect_transitions(np.zeros([2, 3], np.uint8))  # Say, a checkpoint of another env's replay.
    with pytest.raises(ValueError, match=r"shape \(3,\) and dtype uint8; this run's are \(2, 3\), uint8"):
        buffer.sample(4, beta=0.0)


@pytest.mark.parametrize("min_replay_size, update_period, chunk", [(160, 16, 1), (20, 2, 6), (500, 2, 16)])
def test_chunks_shrink_to_what_the_rate_limiter_tolerates_and_the_loop_runs(min_replay_size, update_period, chunk):
    """Unflushed transitions hold samples back: chunks fit the limiter's tolerance; the sampler is 1-2 batches ahead."""
    config = dataclasses.replace(
        PRESETS["toy"], min_replay_size=min_replay_size, update_period=update_period, replay_capacity=2_000
    )
    assert agent_lib.chunk_length(config) == chunk
    server = reverb_server.make_server([agent_lib.replay_table(config)])
    agent = agent_lib.DqnAgent(config, reverb.Client(f"localhost:{server.port}"))
    agent.start()

    def loop():
        while agent.steps < 30:
            agent.step()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    thread.join(timeout=120)
    # Blocked in a sample the limiter will never allow: leave the server up (stopping it under a client crashes).
    assert not thread.is_alive(), f"the loop blocked after {agent.steps} updates"
    # The sampler draws at most a batch ahead of the batches used (two when it overlaps): what a checkpoint
    # loses, yet the limiter counts.
    drawn = agent.client.server_info()[agent_lib.REPLAY_TABLE].rate_limiter_info.sample_stats.completed
    ahead = 2 if agent_lib.overlaps_acting(config) else 1
    assert drawn - config.batch_size * agent.steps <= ahead * config.batch_size
    agent.close()
    server.stop()


# Priorities, keys and IS weights, as tests/test_per.py checks them for `add`. -----------


@pytest.fixture
def make_replay(servers):
    """(None, replay) of single-observation transitions [i] -> [i + 1]: batch.data[0][:, 0] is the item."""

    def make(config, **options):
        client, replays = servers(config)
        replays.append(replay.PrioritizedReplay(client, config, flush_every=4, chunk_length=4, **options))
        return None, replays[-1]

    return make


def fill(buffer, n):
    for i in range(buffer.inserted, buffer.inserted + n):
        buffer.add_transition(
            Transition(np.array([i], np.int32), np.int32(0), np.float32(0), np.float32(0), np.array([i + 1], np.int32))
        )


# tests/test_per.py's statistical checks of `add`'s items, each run again on transitions.
REUSED = [
    (test_per.test_reverb_proportional_sampling_matches_p_alpha, {"alpha": 0.6}),
    (test_per.test_reverb_rank_based_sampling_matches_rank_power_law, {"alpha": 0.7}),
    (test_per.test_reverb_rank_based_sampling_follows_ranks_with_the_default_rerank_interval, {}),
    *(
        (test_per.test_reverb_is_weights_follow_the_priorities_set, {"variant": v, "overlap": o})
        for v in ("proportional", "rank")
        for o in (False, True)  # True: drawn and decoded in a thread.
    ),
    *((test_per.test_global_min_weights_match_a_float64_computation, {"variant": v}) for v in ("proportional", "rank")),
    (test_per.test_zero_td_errors_give_finite_weights, {"variant": "rank", "normalization": "global_min"}),
]


@pytest.mark.parametrize(
    "check, kwargs", REUSED, ids=["-".join([check.__name__[5:], *map(str, kw.values())]) for check, kw in REUSED]
)
def test_priorities_keys_and_is_weights_behave_as_with_one_step_items(check, kwargs, make_replay, monkeypatch):
    monkeypatch.setattr(test_per, "fill", fill)  # The check's items are transitions [i] -> [i + 1].
    check(make_replay=make_replay, **kwargs)


def test_new_transitions_enter_at_the_running_maximum_priority(make_replay):
    _, buffer = make_replay(replay_config.ReplayConfig(capacity=100))
    fill(buffer, 4)
    keys = keys_by_item(buffer, 4)
    buffer.update(keys, np.array([0.5, 7.0, 0.25, 2.0]))
    fill(buffer, 1)
    buffer.flush()
    samples = list(buffer.client.sample("replay", num_samples=2000, emit_timesteps=False))
    by_item = {int(s.data[0][0]): s.info.priority for s in samples}  # Column 0: [id, action, reward, terminal].
    assert by_item[4] == pytest.approx(7.0 + 1e-6)  # Not 1.0.
    assert by_item[1] == pytest.approx(7.0 + 1e-6) and by_item[0] == pytest.approx(0.5 + 1e-6)


def test_a_replay_holds_one_layout(make_replay):
    _, buffer = make_replay(replay_config.ReplayConfig(capacity=100))
    fill(buffer, 1)
    with pytest.raises(ValueError, match="not both"):
        buffer.add([np.array([0], np.int32)])


@pytest.mark.parametrize("variant", ["proportional", "rank"])
def test_an_actors_items_age_from_their_first_sample_and_no_live_one_is_forgotten(servers, variant):
    """Other writers' items carry UNKNOWN_INSERTION; the learner counts the table's inserts and bounds their age.

    What forgets items: the rank tracker, and for proportional replay with global_min weights the live minimum.
    """
    config = replay_config.ReplayConfig(
        variant=variant, capacity=64, alpha=0.7, rerank_interval=10**9, weight_normalization="global_min"
    )
    client, replays = servers(config)
    actor = replay.PrioritizedReplay(client, config, flush_every=4, chunk_length=4, sole_writer=False)
    learner = replay.PrioritizedReplay(client, config)
    learner.expect_transitions(np.array([0], np.int32))
    replays += [actor, learner]
    rng, first_sampled, true_index, written = np.random.default_rng(0), {}, {}, {}
    for _ in range(8):
        fill(actor, 24)  # The observation [i] is the item's true insertion index (one writer here).
        actor.flush()
        learner.count_inserts(24)
        batch = learner.sample(16, beta=0.0)
        for key, item in zip(batch.keys.tolist(), batch.data[0][:, 0].tolist()):
            age = learner._inserted_at[key]
            assert item < age <= learner.inserted  # An upper bound: at least the count after its insert.
            assert age == (first_sampled.get(key, age) if variant == "rank" else learner.inserted)
            first_sampled.setdefault(key, age)
            true_index[key] = item
        abs_delta = rng.random(16)
        learner.update(batch.keys, abs_delta)
        written.update(zip(batch.keys.tolist(), abs_delta + config.epsilon))  # p = |delta| + epsilon, the last.
    if variant == "proportional":
        smallest = learner.live_minimum.minimum(learner.inserted)  # Drops the entries it judges evicted.
        live = {key for key in written if true_index[key] >= learner.inserted - config.capacity}  # In Reverb.
        assert live and live <= set(learner.live_minimum.written)
        assert smallest <= min(written[key] for key in live)
    if variant == "rank":
        learner.rerank()
        oldest_live = learner.inserted - config.capacity  # FIFO: Reverb holds the items from here on.
        for key, age in first_sampled.items():
            # Forgotten `capacity` inserts after its first sampling (an upper bound on its true index,
            # checked above): so never while Reverb still holds it.
            assert (key in learner._rank._delta) == (age >= oldest_live)
        assert len(learner._rank._delta) < len(first_sampled)  # Some were forgotten.


def test_a_sample_the_rate_limiter_holds_back_times_out_and_the_next_one_draws(servers):
    """The Ape-X learner's sampler: None after `sample_timeout_ms` without items (Ctrl-C can be seen), then on."""
    config = replay_config.ReplayConfig(capacity=100)
    client, replays = servers(config)
    actor = replay.PrioritizedReplay(client, config, flush_every=4, chunk_length=4, sole_writer=False)
    learner = replay.PrioritizedReplay(client, config, sample_timeout_ms=300)
    learner.expect_transitions(np.array([0], np.int32))
    replays += [actor, learner]
    start = time.monotonic()
    assert learner.sample(8, beta=0.0) is None  # An empty table: the limiter allows no sample.
    assert 0.3 <= time.monotonic() - start < 10
    fill(actor, 8)
    actor.flush()
    batch = learner.sample(8, beta=0.0)
    assert batch is not None and set(batch.data[0][:, 0].tolist()) <= set(range(8))
