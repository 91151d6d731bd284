"""`per.benchmark_replay`: the rows it sets side by side, and the Reverb API floor it measures them against.

Each check runs in its own interpreter (`in_own_process`): the module's absl flags may be defined once per
process, and its --env is also `per.benchmark_agent`'s, which tests/test_cli.py imports.
"""

import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def in_own_process(check: str) -> None:
    command = [sys.executable, "-c", f"from tests.test_per_benchmark_replay import {check}; {check}()"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]


def transitions(n: int) -> list:
    frame = np.zeros([10, 10, 4], np.uint8)
    return [(frame, i % 3, float(i), False, frame) for i in range(n)]


def test_the_floor_writes_back_the_priorities_of_the_items_it_sampled():
    in_own_process("check_the_floor_writes_back_the_priorities_of_the_items_it_sampled")


def check_the_floor_writes_back_the_priorities_of_the_items_it_sampled():
    from per import benchmark_replay, replay

    floor = benchmark_replay.ReverbFloor(size=40)
    try:
        for transition in transitions(40):
            floor.add(transition)
        floor.flush()
        drawn = []
        sampler = floor._client._client.NewSampler("replay", replay.UNLIMITED, 8)

        class Recording:  # The floor's own sampler, noting each key it hands over.
            def GetNextTrajectory(self):  # noqa: N802 (Reverb's pybind name)
                trajectory = sampler.GetNextTrajectory()
                drawn.append(int(trajectory[0]))
                return trajectory

        class NewPriorities:  # Not 1.0, and large enough that 4,000 draws see every item (~50 times).
            @staticmethod
            def exponential(size):
                return np.linspace(0.3, 1.9, size)

        floor._sampler = Recording()
        floor.sample_and_update(8, NewPriorities())
        # A key drawn twice takes its last value, as `mutate_priorities` applies a dict.
        expected = dict(zip(drawn, np.linspace(0.3, 1.9, 8).round(5).tolist()))
        assert len(drawn) == 8
        # One item per key, at its priority: the table's 40 items are at 1.0 except exactly the keys drawn.
        seen = {}
        for sample in floor._client.sample("replay", num_samples=4000):
            info = sample[0].info
            seen[int(info.key)] = round(float(info.priority), 5)
        assert len(seen) == 40
        assert {k: p for k, p in seen.items() if k in expected} == expected
        assert all(p == 1.0 for k, p in seen.items() if k not in expected)
    finally:
        floor.close()


@pytest.mark.skipif(importlib.util.find_spec("cpprb") is None, reason="cpprb is a benchmark-only dependency")
def test_every_replay_is_timed_against_cpprb_and_the_reverb_ones_against_the_floor():
    in_own_process("check_every_replay_is_timed_against_cpprb_and_the_reverb_ones_against_the_floor")


def check_every_replay_is_timed_against_cpprb_and_the_reverb_ones_against_the_floor():
    from per import benchmark_replay

    rows = benchmark_replay.measure_size(64, "minatar:breakout", 16, iterations=20, rounds=2, batch_size=8)
    by_variant = {r["variant"]: r for r in rows}
    assert list(by_variant) == ["proportional", "rank", "cpprb", "floor"]
    floor_us = by_variant["floor"]["us_per_iteration"]
    for variant in benchmark_replay.REVERB_VARIANTS:
        row = by_variant[variant]
        assert row["ratio_to_floor"] == pytest.approx(row["us_per_iteration"] / floor_us, abs=0.02)
    assert by_variant["cpprb"]["ratio_to_cpprb"] == 1.0 and by_variant["cpprb"]["ratio_to_floor"] == ""
    # The floor's items hold one number each: no memory or insert rate is reported for it.
    assert by_variant["floor"]["rss_marginal_bytes_per_transition"] == by_variant["floor"]["insert_per_s"] == ""


def test_the_report_judges_the_target_and_says_where_the_floor_stands():
    in_own_process("check_the_report_judges_the_target_and_says_where_the_floor_stands")


def check_the_report_judges_the_target_and_says_where_the_floor_stands():
    from per import benchmark_replay

    def row(variant: str, us: float) -> dict:
        return {
            "items": 100_000, "variant": variant, "insert_per_s": 1000, "us_per_iteration": us,
            "rank_overhead_vs_proportional": 0.1, "ratio_to_cpprb": round(us / 70.0, 2),
            "ratio_to_floor": round(us / 400.0, 2) if variant in ("proportional", "rank") else "",
            "cpu_us_per_iteration": us, "rss_bytes_per_transition": 1000, "rss_marginal_bytes_per_transition": 900,
            "array_bytes_per_transition": "",
        }  # fmt: skip

    rows = [row("proportional", 800.0), row("rank", 880.0), row("cpprb", 70.0), row("floor", 400.0)]
    rows[3].update(insert_per_s="", rss_bytes_per_transition="", rss_marginal_bytes_per_transition="")
    config = {"batch_size": 32, "rounds": 5, "chunk_length": 16}
    text = benchmark_replay.markdown(rows, "minatar:breakout", config, 10.0)
    assert "| 100,000 | Reverb proportional | 800.0 | 11.43 | 2.00 | 800.0 | 1,000 | 1,000 | 900 |  |" in text
    assert "| 100,000 | Reverb API floor | 400.0 | 5.71 |  | 400.0 |  |  |  |  |" in text
    assert "Reverb proportional is 11.43x cpprb: it misses the issue's target of 3x." in text
    assert "Reverb's API floor is 400.0 µs, 5.71x cpprb: above the target on its own." in text
    fast = [row("proportional", 140.0), row("cpprb", 70.0), row("floor", 105.0)]  # 2.00x and 1.50x.
    text = benchmark_replay.markdown(fast, "minatar:breakout", config, 10.0)
    assert "Reverb proportional is 2.00x cpprb: it meets the issue's target of 3x." in text
    assert "Reverb's API floor is 105.0 µs, 1.50x cpprb: within the target on its own." in text
    alone = [{**row("proportional", 800.0), "ratio_to_cpprb": ""}]  # No cpprb measured: no ratio, no verdict.
    text = benchmark_replay.markdown(alone, "minatar:breakout", config, 10.0)
    assert "| 100,000 | Reverb proportional | 800.0 | n/a |" in text and "target" not in text
