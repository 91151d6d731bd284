"""Benchmark: an analogue of IMPALA Table 1 on this machine (frames per second).

    python -m impala.benchmark_throughput [--seconds 60] [--actors 1,2,4] [--publish_every 1] [--output_dir DIR]

Measured in the same run, on Pong with the shallow model (preset atari_shallow):

1. raw env: ale-py's AtariVectorEnv stepping random actions (the ceiling);
2. learner alone: learner steps on batches from a pre-filled Reverb queue, with
   the network through TF's graph executor (`xla=losses`, what `auto` picks on
   CPU) and, as the baseline, with the whole step under XLA (`xla=all`);
3. the env+learner limit, 1 / (1 / raw env + 1 / learner alone (xla=losses)):
   what one machine could reach if acting cost only the env and learning
   only the learner step, the two sharing its cores;
4. end to end: the real `python -m impala.train --preset atari_shallow
   --actors K` for each K (and each `--publish_every` k), read from its
   progress lines after a warm-up, with its fraction of the limit and the
   actors' mean policy lag (learner steps, `impala.trajectories.PolicyLag`).

Frames are environment frames (4 per agent step). Results: stdout and
`--output_dir`/throughput.{csv,md} (default results/impala/benchmarks).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np
import reverb
import tensorflow as tf
from absl import flags

from common import cli, envs, provenance
from common.results import REPO_ROOT, check_keeps_measurement, chosen_dir, write_csv
from common.reverb import server as reverb_server
from common.reverb import tables
from common.reverb import variables as reverb_variables
from impala import networks, trajectories
from impala.config import PRESETS
from impala.learner import Learner

flags.DEFINE_integer("seconds", 60, "Measuring time per configuration.", lower_bound=1)
flags.DEFINE_list("actors", ["1", "2", "4"], "Actor process counts for the end-to-end runs.")
flags.DEFINE_integer("raw_envs", 8, "Envs in the raw AtariVectorEnv measurement.", lower_bound=1)
flags.DEFINE_list("publish_every", ["1"], "Learner steps between parameter publishes, one end-to-end run per value.")
flags.DEFINE_string("output_dir", None, "Where to write throughput.{csv,md} (default results/impala/benchmarks).")
FLAGS = flags.FLAGS

CONFIG = PRESETS["atari_shallow"]
FRAME_SKIP = CONFIG.frames_per_step


def raw_env_fps(seconds: float, num_envs: int) -> float:
    env = envs.make_batched(CONFIG.env, num_envs, seed=0, num_threads=2)
    env.reset()
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(rng.integers(env.num_actions, size=num_envs))
        steps += num_envs
    return FRAME_SKIP * steps / (time.perf_counter() - start)


def learner_fps(seconds: float, xla: str) -> float:
    """Learner steps on real Reverb batches of random Pong-shaped unrolls."""
    config = dataclasses.replace(CONFIG, xla=xla)
    env = envs.make(config.env)
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    spec = trajectories.step_spec(shape, tf.uint8, num_actions)
    batches = 8
    queue = tables.queue(trajectories.QUEUE_TABLE, config.batch_size * batches + 1)
    server = reverb_server.make_server([queue, tables.variables()])
    address = f"localhost:{server.port}"
    client = reverb.Client(address)
    rng = np.random.default_rng(0)
    writer = trajectories.unroll_adder(client, spec, config.batch_size, config.unroll_length)
    network = networks.make(config, env.observation_space, num_actions)
    learner = Learner(config, network)
    dataset = iter(trajectories.batches(address, spec, config.unroll_length, config.batch_size, wait_ms=-1))
    n = config.batch_size
    frames, elapsed, first = 0, 0.0, True
    while elapsed < seconds:
        for _ in range(config.unroll_length * batches + (1 if first else 0)):  # Refill.
            writer.append({
                "observation": rng.integers(0, 255, (n, *shape), np.uint8), "first": np.zeros(n, bool),
                "action": rng.integers(num_actions, size=n), "behaviour_logits": np.zeros((n, num_actions)),
                "reward": np.zeros(n), "terminal": np.zeros(n, bool), "episode_return": np.full(n, np.nan),
                "episode_length": np.zeros(n),
            })  # fmt: skip
        for _ in range(batches):
            batch = next(dataset)
            if first:  # Build and compile outside the timing.
                learner.build(batch)
                learner.step(batch)
                first = False
                continue
            start = time.perf_counter()
            learner.step(batch)
            reverb_variables.publish(client, network.trainable_variables)
            elapsed += time.perf_counter() - start
            frames += config.batch_size * config.unroll_length * FRAME_SKIP
    del dataset
    writer.close()
    return frames / elapsed


def end_to_end_fps(actors: int, seconds: float, publish_every: int) -> tuple[float, float]:
    """(frames/s, mean policy lag) of the real command, averaged over progress lines after the first."""
    with tempfile.TemporaryDirectory() as run_dir:
        command = [
            sys.executable, "-m", "impala.train", "--preset=atari_shallow", f"--actors={actors}",
            f"--run_dir={run_dir}/run", "--config_override=log_every_s=5",
            f"--config_override=publish_every={publish_every}",
        ]  # fmt: skip
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        rates, lags, start = [], [], None
        for line in process.stdout:
            match = re.search(r"\| ([\d,]+) frames/s", line)
            if not match:
                continue
            if start is None:  # The first line covers start-up; measure after it.
                start = time.monotonic()
                continue
            rates.append(float(match.group(1).replace(",", "")))
            if lag := re.search(r"\| policy_lag ([\d.]+) ", line):
                lags.append(float(lag.group(1)))
            if time.monotonic() - start >= seconds:
                break
        process.send_signal(2)
        process.wait(timeout=120)
    if not rates:  # It failed, or printed one progress line at most: nothing to report.
        sys.exit(f"{shlex.join(command)} gave no progress line after start-up (exit status {process.returncode}); "
                 "run it alone to see why")  # fmt: skip
    return float(np.mean(rates)), float(np.mean(lags)) if lags else float("nan")


def row(configuration: str, fps: float, raw: float, limit: float, policy_lag: float = float("nan")) -> dict:
    return {
        "configuration": configuration, "frames_per_s": round(fps), "ratio_to_raw": round(fps / raw, 3),
        "ratio_to_limit": round(fps / limit, 3), "policy_lag": round(policy_lag, 2),
    }  # fmt: skip


def limit_fps(raw: float, learner: float) -> float:
    """The env+learner limit: frames/s if each frame cost one raw env frame and one learner frame, in turn."""
    return 1.0 / (1.0 / raw + 1.0 / learner)


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    started = time.time()
    out = chosen_dir("--output_dir", FLAGS.output_dir, "impala", "benchmarks")
    actor_counts = cli.positive_integers("--actors", FLAGS.actors, "1,2,4")
    publish_periods = cli.positive_integers("--publish_every", FLAGS.publish_every, "1,4")
    check_keeps_measurement(out, "throughput", "output_dir")
    raw = raw_env_fps(FLAGS.seconds / 2, FLAGS.raw_envs)
    print(f"raw AtariVectorEnv ({FLAGS.raw_envs} envs, 2 threads): {raw:,.0f} frames/s", flush=True)
    learners = {}
    for xla in ("losses", "all"):
        learners[xla] = learner_fps(FLAGS.seconds / 2, xla)
        print(f"learner alone (B={CONFIG.batch_size}, T={CONFIG.unroll_length}, shallow, xla={xla}): "
              f"{learners[xla]:,.0f} frames/s", flush=True)  # fmt: skip
    limit = limit_fps(raw, learners["losses"])  # The learner end to end runs: `auto` is `losses` on CPU.
    print(f"env+learner limit: {limit:,.0f} frames/s", flush=True)
    rows = [
        row(f"raw AtariVectorEnv, {FLAGS.raw_envs} envs", raw, raw, limit),
        row("learner alone, pre-filled queue, network on TF's executor (xla=losses)", learners["losses"], raw, limit),
        row("learner alone, pre-filled queue, whole step under XLA (xla=all)", learners["all"], raw, limit),
        row("env+learner limit, 1 / (1 / raw env + 1 / learner alone (xla=losses))", limit, raw, limit),
    ]
    for actors in actor_counts:
        for publish_every in publish_periods:
            fps, lag = end_to_end_fps(actors, FLAGS.seconds, publish_every)
            what = f"end to end, {actors} actors x {CONFIG.envs_per_actor} envs"
            what += f" (impala.train, publish_every={publish_every})"
            print(f"{what}: {fps:,.0f} frames/s ({100 * fps / limit:.0f}% of the limit), policy lag {lag:.2f}",
                  flush=True)  # fmt: skip
            rows.append(row(what, fps, raw, limit, lag))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "throughput.csv", rows)
    command = provenance.command()
    lines = [
        "# IMPALA throughput on this machine (an analogue of IMPALA Table 1)",
        "",
        "Pong, shallow model, preset atari_shallow (end to end with `xla=auto`, here `losses`: no GPU);",
        "frames = 4 x agent steps; the limit is 1 / (1 / raw env + 1 / learner alone), the policy lag the",
        f"mean learner steps between an unroll's parameters and its update. One run of `{command}`;",
        "see the provenance file.",
        "",
        "| configuration | frames/s | fraction of raw env | fraction of the limit | policy lag |",
        "| --- | --- | --- | --- | --- |",
        *[
            f"| {r['configuration']} | {r['frames_per_s']:,} | {100 * r['ratio_to_raw']:.0f}% | "
            f"{100 * r['ratio_to_limit']:.0f}% | {'' if np.isnan(r['policy_lag']) else r['policy_lag']} |"
            for r in rows
        ],
    ]
    (out / "throughput.md").write_text("\n".join(lines) + "\n")
    provenance.write(
        out, "throughput.provenance.json", config=dataclasses.asdict(CONFIG), seeds=[CONFIG.seed], frames=None,
        wall_time_s=time.time() - started, scale="benchmark",
        extra={"seconds": FLAGS.seconds, "actors": FLAGS.actors, "publish_every": FLAGS.publish_every},
    )  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    cli.run(main)
