"""Benchmark: V-trace µs per call, ours (XLA while-loop) vs a plain `tf.scan`.

    python -m impala.benchmark_vtrace [--calls 300]

The baseline is the same maths with `tf.scan` in a graph-mode `tf.function`,
as in IMPALA's original release. Both are timed in this run on this machine;
results go to stdout and to `results/impala/benchmarks/`.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf
from absl import flags

from common import cli, provenance
from common.results import check_keeps_measurement, chosen_dir, write_csv
from impala import vtrace

flags.DEFINE_integer("calls", 300, "Timed calls per configuration (after warm-up).", lower_bound=1)
flags.DEFINE_integer("repeats", 5, "Timing repeats; the median is reported.", lower_bound=1)
flags.DEFINE_string(
    "out",
    None,
    "Output directory (default results/impala/benchmarks, where a measurement under other flags is refused).",
)
FLAGS = flags.FLAGS

SHAPES = ((20, 32), (20, 256), (100, 32), (100, 256))


def scan_vtrace(log_rhos, discounts, rewards, values, bootstrap_value):
    """The baseline: eq. (1) by `tf.scan` in reverse, c_bar = rho_bar = 1."""
    rhos = tf.exp(log_rhos)
    clipped_rhos = tf.minimum(1.0, rhos)
    cs = tf.minimum(1.0, rhos)
    values_t_plus_1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
    vs_minus_v = tf.scan(
        lambda acc, item: item[2] + item[0] * item[1] * acc,
        (discounts, cs, deltas),
        initializer=tf.zeros_like(bootstrap_value),
        parallel_iterations=1,
        reverse=True,
    )
    vs = values + vs_minus_v
    vs_t_plus_1 = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    return vs, clipped_rhos * (rewards + discounts * vs_t_plus_1 - values)


def ours(log_rhos, discounts, rewards, values, bootstrap_value):
    return tuple(vtrace.from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value))


def time_per_call(fn, args, repeats: int, calls: int) -> float:
    fn(*args)  # Trace and compile.
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        out[0].numpy()
        samples.append((time.perf_counter() - start) / calls)
    return 1e6 * float(np.median(samples))


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    out = chosen_dir("--out", FLAGS.out, "impala", "benchmarks")
    check_keeps_measurement(out, "vtrace", "out")
    start = time.time()
    candidates = {
        "ours_xla_while_loop": tf.function(ours, jit_compile=True),
        "tf_scan_baseline": tf.function(scan_vtrace),
    }
    rows = []
    print(f"{'T':>4} {'B':>4} " + " ".join(f"{name:>22}" for name in candidates) + "  speed-up")
    for T, B in SHAPES:
        rng = np.random.default_rng(0)
        args = [tf.constant(rng.standard_normal((T, B)), tf.float32) for _ in range(4)]
        args[1] = tf.constant(0.99 * (rng.random((T, B)) > 0.01), tf.float32)
        args.append(tf.constant(rng.standard_normal(B), tf.float32))
        micros = {name: time_per_call(fn, args, FLAGS.repeats, FLAGS.calls) for name, fn in candidates.items()}
        speedup = micros["tf_scan_baseline"] / micros["ours_xla_while_loop"]
        rows.append(
            {
                "T": T,
                "B": B,
                **{f"{k}_us": round(v, 1) for k, v in micros.items()},
                "speedup": round(speedup, 2),
            }
        )
        print(f"{T:>4} {B:>4} " + " ".join(f"{v:>20.1f}µs" for v in micros.values()) + f"  {speedup:7.2f}x")
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "vtrace.csv", rows)
    provenance.write(
        out, "vtrace.provenance.json", config={"calls": FLAGS.calls, "repeats": FLAGS.repeats},
        seeds=[0], frames=None, wall_time_s=time.time() - start, scale="benchmark",
    )  # fmt: skip


if __name__ == "__main__":
    cli.run(main)
