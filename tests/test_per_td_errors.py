"""PER App. Fig. 10's log: the last-seen |delta| of the replay's items, sorted, over training."""

import dataclasses
import json

import numpy as np
import pytest
import reverb

from common.reverb import server as reverb_server
from per import agent as agent_lib
from per import config as config_lib
from per import td_errors


def test_sorted_profile_reads_the_decreasing_order_at_evenly_spaced_ranks():
    values = np.array([0.5, 3.0, 0.1, 2.0, 1.0])  # Sorted down: 3, 2, 1, 0.5, 0.1.
    fractions, profile = td_errors.sorted_profile(values, points=3)
    np.testing.assert_array_equal(fractions, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(profile, [3.0, 1.0, 0.1])  # Ranks 0, 2 and 4 of 0..4.
    _, every = td_errors.sorted_profile(values, points=5)
    np.testing.assert_array_equal(every, [3.0, 2.0, 1.0, 0.5, 0.1])


def test_the_log_keeps_the_last_abs_delta_of_live_items_and_snapshots_on_schedule(tmp_path):
    path = tmp_path / "td.jsonl"
    log = td_errors.TdErrorLog(path, every_frames=100, capacity=10)
    log.record(np.array([1, 2, 3]), np.array([-0.5, 2.0, 1.0]), np.array([0, 5, 9]))
    log.record(np.array([1]), np.array([4.0]), np.array([0]))  # Key 1 seen again: |delta| 4 replaces 0.5.
    assert not log.maybe_snapshot(frames=99, inserted=12, table_size=10)
    assert log.maybe_snapshot(frames=130, inserted=12, table_size=10)
    assert not log.maybe_snapshot(frames=150, inserted=12, table_size=10)  # The next is due at 200.
    (snapshot,) = td_errors.read(path)
    # Inserted 12, capacity 10: items inserted before 2 (key 1, at 0) were evicted.
    assert (snapshot["frames"], snapshot["seen"], snapshot["unseen"], snapshot["table_size"]) == (130, 2, 8, 10)
    assert snapshot["abs_td_error"][0] == 2.0 and snapshot["abs_td_error"][-1] == 1.0
    assert log.maybe_snapshot(frames=420, inserted=12, table_size=10)
    assert log.maybe_snapshot(frames=500, inserted=12, table_size=10)  # 420 -> due at 500, not 520.
    assert [s["frames"] for s in td_errors.read(path)] == [130, 420, 500]


def test_a_checkpointed_log_resumes_its_items_and_schedule(tmp_path):
    log = td_errors.TdErrorLog(tmp_path / "a.jsonl", every_frames=100, capacity=10)
    log.record(np.array([7, 8]), np.array([0.25, -3.0]), np.array([1, 2]))
    log.maybe_snapshot(frames=100, inserted=3, table_size=3)
    restored = td_errors.TdErrorLog(tmp_path / "b.jsonl", every_frames=100, capacity=10)
    restored.deserialize(log.serialize())
    assert not restored.maybe_snapshot(frames=199, inserted=3, table_size=3)
    assert restored.maybe_snapshot(frames=200, inserted=3, table_size=3)
    (snapshot,) = td_errors.read(tmp_path / "b.jsonl")
    assert snapshot["abs_td_error"][0] == 3.0 and snapshot["abs_td_error"][-1] == 0.25


def test_read_replaces_the_snapshots_of_a_stretch_abandoned_by_a_resume(tmp_path):
    path = tmp_path / "td.jsonl"
    lines = [{"frames": f, "tag": t} for f, t in ((100, "a"), (200, "old"), (300, "old"), (200, "new"), (300, "new"))]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [(s["frames"], s["tag"]) for s in td_errors.read(path)] == [(100, "a"), (200, "new"), (300, "new")]
    assert td_errors.read(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize("variant", ["uniform", "rank"])
def test_the_agent_logs_exactly_the_sampled_keys_last_abs_delta(tmp_path, variant):
    """Uniform replay writes no priorities back, yet its |delta| are logged all the same.

    The table holds 300 of the 700 transitions: the log must forget the evicted items it saw.
    """
    config = dataclasses.replace(
        config_lib.PRESETS["toy"], replay=variant, alpha=0.0 if variant == "uniform" else 0.7, min_replay_size=100,
        replay_capacity=300, td_error_snapshot_frames=200,
    )  # fmt: skip
    server = reverb_server.make_server([agent_lib.replay_table(config)])
    agent = agent_lib.DqnAgent(config, reverb.Client(f"localhost:{server.port}"), run_dir=tmp_path)
    agent.start()
    last, keys = {}, []
    sample, update = agent.replay.sample, agent.learner.update

    def sample_spy(*args):
        batch = sample(*args)
        keys[:] = batch.keys.tolist()
        return batch

    def update_spy(batch, weights, act_on=None):
        result = update(batch, weights, act_on)
        last.update(zip(keys, np.abs(result.td_error).tolist()))
        return result

    agent.replay.sample, agent.learner.update = sample_spy, update_spy
    try:
        while agent.frames < 700:
            agent.step()
    finally:
        agent.close()
        server.stop()
    kept = agent.td_errors._abs_delta
    assert len(last) > config.replay_capacity  # Items were sampled, then evicted.
    assert set(keys) <= set(kept) and kept == pytest.approx({key: last[key] for key in kept})
    snapshots = td_errors.read(tmp_path / td_errors.FILE)
    assert [s["frames"] // 200 for s in snapshots] == [1, 2, 3]  # One per 200 frames once learning started.
    assert snapshots[-1]["table_size"] == config.replay_capacity  # Full from 300 inserts on.
    # The evicted items forgotten, the live ones kept: all but the newest few were sampled (16 samples
    # per insert; uniform: about 19 of 300 unseen expected).
    assert 0.8 * config.replay_capacity <= snapshots[-1]["seen"] <= config.replay_capacity
