"""laser.benchmark at a tiny scale: the measuring functions' outputs are sane, bad flags are one line.

The functions live in `laser.benchmarking` (no absl flags), so they run in
process; the entry point runs only as a subprocess.
"""

import dataclasses
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from laser import benchmarking
from laser.config import PRESETS

REPO = pathlib.Path(__file__).resolve().parent.parent
TOY = dataclasses.replace(PRESETS["toy_laser"], envs_per_actor=4)  # T = 9, B = 16.


@pytest.fixture(scope="module")
def recording():
    return benchmarking.record(TOY, steps=40)


def test_the_recording_is_an_actors_steps_of_the_real_env(recording):
    assert recording["observation"].shape == (40, 4, 10, 5, 1)  # Catch's board, [steps, envs, ...].
    assert recording["first"][0].all() and recording["observation"].any()
    assert recording["terminal"].any()  # Catch episodes last 9 steps.
    ended = ~np.isnan(recording["episode_return"])
    assert (recording["terminal"] == ended).all() and set(recording["episode_length"][ended].tolist()) == {9}
    assert ((0 <= recording["action"]) & (recording["action"] < 3)).all()


def test_learner_throughput_at_0_and_87_5_percent_replay(recording):
    rows = [benchmarking.learner_throughput(TOY, fraction, 2.0, recording) for fraction in (0.0, 0.875)]
    for row in rows:
        assert row["steps"] > 0 and row["learner_steps_per_s"] > 0 and row["seconds"] >= 2.0
        # The queue was pre-filled: the learner waits at most rarely (a dataset's timeout under a loaded machine,
        # seen once in CI), where a queue left to the feeder would have it wait for every batch.
        assert row["waits"] <= row["steps"] // 10, row
        per_step = row["dequeued_per_step"] * row["unroll_length"] * row["frames_per_step"]
        assert row["fresh_frames_per_s"] == pytest.approx(row["learner_steps_per_s"] * per_step, rel=0.01, abs=1)
        assert row["learned_unrolls_per_s"] == pytest.approx(row["learner_steps_per_s"] * 16, rel=0.01, abs=0.1)
        assert row["feeder_ms_per_unroll"] > 0
    no_replay, replay = rows
    assert (no_replay["online_unrolls"], no_replay["replayed_unrolls"]) == (16, 0)
    assert (replay["online_unrolls"], replay["replayed_unrolls"]) == (2, 14)
    assert replay["replay_size_at_start"] >= 14  # The replay could serve the first batch.
    assert no_replay["replay_size_at_start"] == 0  # No replay table at fraction 0.


def test_separate_replays_take_more_memory_than_one_shared(recording, tmp_path):
    capacity = 9 * 100  # 100 unrolls of T = 9.
    shared, separate = (
        benchmarking.replay_memory(TOY, 3, capacity, layout, recording, tmp_path, streams=2)
        for layout in benchmarking.LAYOUTS
    )
    assert (shared["replay_tables"], separate["replay_tables"]) == (1, 3)
    assert shared["observations_held"] == capacity and separate["observations_held"] == 3 * capacity  # Full.
    assert shared["unrolls_written"] >= 100 and separate["unrolls_written"] >= 300
    assert separate["rss_growth_bytes"] >= shared["rss_growth_bytes"] > 0
    # The serialized tables hold 3x the observations, with chunk lengths tuned alike: about 3x the bytes.
    assert 2.0 < separate["checkpoint_bytes"] / shared["checkpoint_bytes"] < 4.0
    assert separate["gb_at_paper_capacity"] > shared["gb_at_paper_capacity"] > 0


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--agents", "0"], "--agents=0: 1 to 9 agents share the replay"),  # It spoke of "the lr x entropy grid".
        (["--preset", "nope"], "minatar_laser"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(args, fragment):
    result = subprocess.run(
        [sys.executable, "-m", "laser.benchmark", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr
