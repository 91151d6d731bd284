"""Benchmark: LASER's learner at 0 and 87.5% replay, and one shared replay against N separate ones.

    python -m laser.benchmark [--preset minatar_laser] [--seconds 30] [--agents 9] [--capacity_observations 20000]
                              [--replay_fractions 0,0.875]

Measured in one run, side by side (the details are in laser/benchmarking.py):

1. learner throughput at each replay fraction: a real `MixedLearner` on an
   in-process Reverb server with `agent_tables`, its queue pre-filled (and
   topped up with the clock stopped) by a feeder writing unrolls of the
   preset's env under random actions, recorded once, through the actors'
   `unroll_adder` to `actor_tables`; timed over --seconds of learner steps
   after a warm-up. Learner steps/s, fresh frames/s (dequeued unrolls x T x
   frames per step), unrolls learned/s, and how often the learner waited;
2. replay memory: --agents writers filling ONE replay of
   --capacity_observations observations (`laser.sweep`'s layout) against
   --agents replays of that capacity, one per writer, each full; each layout's
   server in a fresh process whose resident-memory growth over the fill is
   the measurement. Bytes per observation, the ratio separate / shared, and
   the extrapolation to the paper's 10M observations per replay.

Results: stdout and results/laser/benchmarks/benchmark.{csv,md} (other presets:
benchmark_<preset>.*), with the provenance beside them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import tempfile
import time

from absl import flags

from common import cli, provenance
from common.errors import UsageError
from common.results import check_keeps_measurement, chosen_dir, write_csv
from laser import benchmarking
from laser.config import MAX_SWEEP, PRESETS, LaserConfig

flags.DEFINE_enum("preset", "minatar_laser", list(PRESETS), "The LASER preset measured (laser/config.py).")
flags.DEFINE_string(
    "out",
    None,
    "Output directory (default results/laser/benchmarks, where a measurement under other flags is refused).",
)
flags.DEFINE_float("seconds", 30, "Timed learner seconds per replay fraction, after a warm-up.")
flags.DEFINE_integer("agents", MAX_SWEEP, f"Agents sharing one replay, against as many replays (1 to {MAX_SWEEP}).")
flags.DEFINE_integer(
    "capacity_observations", 20_000, "Capacity C in observations of the shared replay and of each separate one."
)
flags.DEFINE_list("replay_fractions", ["0", "0.875"], "Replay fractions of the throughput rows, e.g. 0,0.5,0.875.")
FLAGS = flags.FLAGS

DEFAULT_PRESET = "minatar_laser"


def replay_fractions(values: list[str], base: LaserConfig) -> list[float]:
    """The flag's fractions, each a valid mix of the preset's batch (`LaserConfig` checks)."""
    if not values:
        raise UsageError("--replay_fractions is empty; give at least one, e.g. 0,0.875")
    fractions = []
    for text in values:
        try:
            fraction = float(text)
        except ValueError:
            raise UsageError(f"--replay_fractions: {text!r} is not a number; e.g. 0,0.875") from None
        try:
            dataclasses.replace(base, replay_fraction=fraction)  # LaserConfig checks the mix.
        except UsageError as error:
            raise UsageError(f"--replay_fractions: {error}") from None
        fractions.append(fraction)
    return fractions


def checked_flags() -> tuple[LaserConfig, list[float]]:
    base = PRESETS[FLAGS.preset]
    if not (math.isfinite(FLAGS.seconds) and FLAGS.seconds > 0):
        raise UsageError(f"--seconds={FLAGS.seconds}: must be > 0 (timed learner seconds per replay fraction)")
    if not 1 <= FLAGS.agents <= MAX_SWEEP:  # They are a sweep's first members (`laser.config.sweep_members`).
        raise UsageError(f"--agents={FLAGS.agents}: 1 to {MAX_SWEEP} agents share the replay (a sweep's members)")
    smallest = base.unroll_length * base.replay_batch_size
    if FLAGS.capacity_observations < smallest:
        raise UsageError(
            f"--capacity_observations={FLAGS.capacity_observations}: must be >= {smallest}, one replay batch of "
            f"{base.replay_batch_size} unrolls of T={base.unroll_length} ({FLAGS.preset})"
        )
    return base, replay_fractions(FLAGS.replay_fractions, base)


def long_rows(throughput: list[dict], memory: list[dict], comparison: dict) -> list[dict]:
    """One CSV row per number: part, configuration, metric, value."""
    rows = []
    for row in throughput:
        name = f"replay_fraction={row['replay_fraction']}"
        rows += [{"part": "throughput", "configuration": name, "metric": k, "value": v} for k, v in row.items()]
    for row in memory:
        rows += [{"part": "memory", "configuration": row["layout"], "metric": k, "value": v} for k, v in row.items()]
    rows += [{"part": "memory", "configuration": "separate/shared", "metric": k, "value": v}
             for k, v in comparison.items()]  # fmt: skip
    return rows


def compare(shared: dict, separate: dict) -> dict:
    return {
        "rss_growth_ratio": round(separate["rss_growth_bytes"] / max(shared["rss_growth_bytes"], 1), 2),
        "checkpoint_ratio": round(separate["checkpoint_bytes"] / max(shared["checkpoint_bytes"], 1), 2),
        "shared_gb_at_paper_capacity": shared["gb_at_paper_capacity"],
        "separate_gb_at_paper_capacity": separate["gb_at_paper_capacity"],
    }


def markdown(base, preset, command, throughput, memory, comparison, load, wall_time_s) -> str:
    machine = provenance.machine()
    accelerator = "no accelerator" if machine["accelerator"] == "none" else machine["accelerator"]
    shared, separate = memory
    C, N = shared["capacity_observations_per_table"], shared["agents"]
    lines = [
        f"# LASER benchmark: a measurement on a {machine['cores']}-core CPU machine ({accelerator}), "
        f"{preset} ({base.env}), benchmark scale",
        "",
        f"Command: `{command}`",
        f"(one run; provenance in `{command_stem(preset)}.provenance.json`).",
        provenance.describe_load(*load),
        "The rows of each table ran in the same run, one after the other.",
        "",
        "## Learner throughput",
        "",
        "A real `MixedLearner` (`laser.agent`) on an in-process Reverb server with `agent_tables`. Its queue is",
        "pre-filled by a feeder that writes unrolls of the preset's env under random actions (recorded once,",
        "then cycled) through the actors' `unroll_adder` to `actor_tables` (queue and replay, each unroll once).",
        "The clock runs during `MixedLearner.step` calls only (dequeue, replay sample, update, parameter",
        f"publish), after {benchmarking.WARMUP_STEPS} warm-up steps; `top-ups`: times the feeder refilled the queue "
        "with the clock stopped.",
        "The feeder does not write during the window: one unroll costs about as much CPU to write as to learn",
        "from (`feeder ms/unroll`: this process's CPU per unroll written), so a feeder beside the learner would",
        "starve the queue at replay fraction 0. `one-writer bound`: the steps/s one such writer could feed on a",
        "core of its own. `waits`: steps that found no data (`step()` returned None). Fresh frames = dequeued",
        "unrolls x T x frames per agent step; unrolls learned = the whole batch, online and replayed.",
        "",
        "| replay fraction | batch: online + replayed | learner steps/s | fresh frames/s | unrolls learned/s "
        "| waits | top-ups | process CPU cores | feeder ms/unroll | one-writer bound steps/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in throughput:
        lines.append(
            f"| {r['replay_fraction']} | {r['online_unrolls']} + {r['replayed_unrolls']} "
            f"| {r['learner_steps_per_s']:.1f} | {r['fresh_frames_per_s']:,} | {r['learned_unrolls_per_s']:,.0f} "
            f"| {r['waits']} | {r['top_ups']} | {r['process_cpu_cores']:.2f} | {r['feeder_ms_per_unroll']:.1f} "
            f"| {r['feeder_bound_steps_per_s']:.1f} |"
        )
    lines += [
        "",
        f"Each row: {throughput[0]['seconds']:.0f} s of learner steps (`--seconds`); T = {base.unroll_length}, "
        f"{base.frames_per_step} frame(s) per agent step.",
        "",
        f"## Replay memory: one shared replay against {N} separate ones",
        "",
        f"{N} agents, each writing through its own `unroll_adder` ({shared['streams_per_agent']} envs each), "
        f"fill ONE replay of C = {C:,}",
        f"observations (`laser.sweep`'s server, `sweep_tables`), against {N} replays of C each, one per agent,",
        "each full. Each layout's Reverb server runs in a fresh spawned process that only serves: the writers",
        "are elsewhere, and the layouts share no allocator state. Measured: that process's resident memory",
        "(VmRSS) with the replays empty and again when they are full. `RSS growth` = full - empty: compressed",
        "chunks, items, indexes, gRPC buffers and what the allocator keeps. `marginal`: the growth per",
        "observation over the second half of the fill. `checkpoint`: the tables' Reverb checkpoint on disk",
        "(serialized chunks and items, a lower bound). `raw`: one step's fields as uncompressed arrays.",
        f"Before the baseline every writer wrote {shared['warmup_unrolls_per_agent']} unrolls into a sink table "
        "that keeps them, so",
        "that Reverb's auto-tuned chunk lengths had settled (a fresh writer's first rounds cost several times",
        "more memory per observation; actors write for hours) and the fill could not reuse freed memory.",
        "",
        "| layout | replays x capacity | observations held | RSS growth MB | B/obs (growth) | B/obs (marginal) "
        "| checkpoint B/obs | raw B/obs | GB at 10M obs per replay |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in memory:
        lines.append(
            f"| {r['layout']} | {r['replay_tables']} x {r['capacity_observations_per_table']:,} "
            f"| {r['observations_held']:,} | {r['rss_growth_mb']:.1f} | {r['bytes_per_observation']:,.0f} "
            f"| {r['marginal_bytes_per_observation']:,.0f} | {r['checkpoint_bytes_per_observation']:,.0f} "
            f"| {r['raw_bytes_per_observation']:,} | {r['gb_at_paper_capacity']:,.1f} |"
        )
    lines += [
        "",
        f"Separate / shared, measured at C = {C:,}: {comparison['rss_growth_ratio']:.2f}x the RSS growth "
        f"({separate['rss_growth_mb']:.1f} MB against",
        f"{shared['rss_growth_mb']:.1f} MB) and {comparison['checkpoint_ratio']:.2f}x the checkpoint bytes, "
        f"for {N}x the observations held.",
        "At the paper's 10M observations per replay (the marginal bytes per observation times 10M, a linear",
        f"extrapolation, not measured at that size): one shared replay {comparison['shared_gb_at_paper_capacity']:,.1f}"
        f" GB, {N} separate ones {comparison['separate_gb_at_paper_capacity']:,.1f} GB.",
        f"Wall time {wall_time_s:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def command_stem(preset: str) -> str:
    return "benchmark" if preset == DEFAULT_PRESET else f"benchmark_{preset}"


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    base, fractions = checked_flags()
    out, stem = chosen_dir("--out", FLAGS.out, "laser", "benchmarks"), command_stem(FLAGS.preset)
    check_keeps_measurement(out, stem, "out")
    started, load_start = time.time(), os.getloadavg()[0]
    recording = benchmarking.record(base)
    print(f"recorded {recording['action'].shape[0]} steps x {recording['action'].shape[1]} envs of {base.env} "
          "under random actions", flush=True)  # fmt: skip
    throughput = []
    for fraction in fractions:
        row = benchmarking.learner_throughput(base, fraction, FLAGS.seconds, recording)
        print(f"replay fraction {fraction}: {row['learner_steps_per_s']:.1f} learner steps/s, "
              f"{row['fresh_frames_per_s']:,} fresh frames/s, {row['learned_unrolls_per_s']:,.0f} unrolls learned/s, "
              f"{row['waits']} waits", flush=True)  # fmt: skip
        throughput.append(row)
    memory = []
    with tempfile.TemporaryDirectory() as directory:
        for layout in benchmarking.LAYOUTS:
            row = benchmarking.replay_memory(
                base, FLAGS.agents, FLAGS.capacity_observations, layout, recording, pathlib.Path(directory)
            )
            tables = f"{row['replay_tables']} x {row['capacity_observations_per_table']:,} observations"
            print(f"{layout} replay ({tables}): {row['rss_growth_mb']:.1f} MB RSS growth, "
                  f"{row['bytes_per_observation']:,.0f} B/observation", flush=True)  # fmt: skip
            memory.append(row)
    comparison = compare(*memory)
    wall_time, load_end = time.time() - started, os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"{stem}.csv", long_rows(throughput, memory, comparison))
    path = provenance.write(
        out, f"{stem}.provenance.json", config=dataclasses.asdict(base), seeds=[base.seed], frames=None,
        wall_time_s=wall_time, scale="benchmark",
        extra={"preset": FLAGS.preset, "seconds": FLAGS.seconds, "agents": FLAGS.agents,
               "capacity_observations": FLAGS.capacity_observations, "replay_fractions": fractions,
               "load_average_1min": [load_start, load_end]},
    )  # fmt: skip
    command = json.loads(path.read_text())["command"]
    text = markdown(base, FLAGS.preset, command, throughput, memory, comparison,
                    (load_start, load_end), wall_time)  # fmt: skip
    (out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    cli.run(main)
