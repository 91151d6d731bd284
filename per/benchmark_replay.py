"""Benchmark: prioritized replay throughput on Reverb, proportional vs rank-based.

    python -m per.benchmark_replay [--sizes 10000,100000,1000000] [--iterations 2000]

For each table size, fills a fresh in-process Reverb table, then times
iterations of sample(32) + update(32 new TD errors), for both variants in the
same run. Rank-based pays for its client-side ranking (binary searches, plus a
full re-rank every `rerank_interval` updates); its overhead is reported
relative to proportional. Results: stdout and results/per/benchmarks/.
"""

from __future__ import annotations

import time

import numpy as np
import reverb
from absl import flags

from common import cli, provenance
from common.results import output_dir, write_csv
from per import replay

flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "Table sizes to fill.")
flags.DEFINE_integer("iterations", 2000, "Timed sample+update iterations per size and variant.")
flags.DEFINE_integer("batch_size", 32, "Items per sample and update (PER: 32).")
FLAGS = flags.FLAGS


def fill(buffer: replay.PrioritizedReplay, size: int) -> float:
    payload = [np.zeros(4, np.float32)]
    start = time.perf_counter()
    for _ in range(size):
        buffer.add(payload)
    return size / (time.perf_counter() - start)


def timed(buffer: replay.PrioritizedReplay, iterations: int, batch_size: int, rng: np.random.Generator) -> float:
    """Mean microseconds per sample(B) + update(B)."""
    start = time.perf_counter()
    for _ in range(iterations):
        batch = buffer.sample(batch_size, beta=0.5)
        buffer.update(batch.keys, rng.exponential(size=batch_size))
    return 1e6 * (time.perf_counter() - start) / iterations


def main(argv: list[str]) -> None:
    start = time.time()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'items':>9} {'variant':>13} {'insert/s':>10} {'µs per sample+update of 32':>28}")
    for size in map(int, FLAGS.sizes):
        result = {}
        for variant in ("proportional", "rank"):
            config = replay.PRESETS[variant]
            config = replay.ReplayConfig(**{**config.__dict__, "capacity": size})
            server = reverb.Server([replay.table(config)])
            buffer = replay.PrioritizedReplay(reverb.Client(f"localhost:{server.port}"), config)
            inserts = fill(buffer, size)
            timed(buffer, 50, FLAGS.batch_size, rng)  # Warm-up.
            micros = timed(buffer, FLAGS.iterations, FLAGS.batch_size, rng)
            buffer.close()
            server.stop()
            result[variant] = micros
            rows.append(
                {
                    "items": size,
                    "variant": variant,
                    "insert_per_s": round(inserts),
                    "us_per_iteration": round(micros, 1),
                }
            )
            print(f"{size:>9} {variant:>13} {inserts:>10,.0f} {micros:>28.1f}")
        overhead = result["rank"] / result["proportional"] - 1
        print(f"{size:>9} rank-based overhead over proportional: {100 * overhead:+.0f}%")
        for row in rows[-2:]:
            row["rank_overhead_vs_proportional"] = round(overhead, 3)
    out = output_dir("per", "benchmarks")
    write_csv(out / "replay.csv", rows)
    provenance.write(
        out, "replay.provenance.json", config={"sizes": FLAGS.sizes, "iterations": FLAGS.iterations,
        "batch_size": FLAGS.batch_size}, seeds=[0], frames=None, wall_time_s=time.time() - start, scale="benchmark",
    )  # fmt: skip


if __name__ == "__main__":
    cli.run(main)
