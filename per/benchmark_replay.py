"""Benchmark: PER sample+update on Reverb against cpprb's in-process C++ buffer (issue #13).

    python -m per.benchmark_replay [--sizes 10000,100000,1000000] [--iterations 2000] [--chunk_length 16]
        [--out DIR]

Three prioritized replays hold the same items, per table size:

* `proportional`, `rank`: the agent's replay
  (`PrioritizedReplay.add_transition`: each frame stored once, in chunks of
  `--chunk_length` steps, the agent's 16; PER's presets, alpha 0.6 and 0.7), on an
  in-process Reverb server, as the agent runs it: sampled by a Reverb sampler
  kept open across samples, priorities set by `mutate_priorities`;
* `cpprb`: cpprb's `PrioritizedReplayBuffer` (alpha 0.6), a
  C++ sum tree over preallocated NumPy arrays, S_{j-1} and S_j each stored
  whole: the in-process baseline the issue compares against;
* `floor`: Reverb's client API alone, the least any replay on it pays (see
  `ReverbFloor`): the proportional table holding one number per item, the
  same sampler, one `mutate_priorities` per batch, nothing decoded.

The items are real transitions: `--env` (default MinAtar Breakout, [10, 10, 4]
uint8 frames) stepped with uniform random actions, recorded once and cycled
to fill each table. One iteration is what the learner does: sample 32 items
with IS weights (beta 0.5) and set the priorities of those 32 from new TD
errors. The replays take turns, `--rounds` times, so a slow spell on a shared
machine hits all of them; each one's number is its median round.

Per replay and size it reports: µs per sample+update and its ratio to cpprb
(the issue's target: at most 3x at 10^5 items); the process's CPU time per
sample+update (all its threads: for Reverb also the sampler's worker and
the server's, whose work a wall-clock time on a busy machine hides or
inflates); inserts per second while filling; and memory per stored
transition, as the process's resident memory growth (the Reverb server's
chunks, items and indexes, or cpprb's arrays and trees): from before the
replay was made to the full table (cpprb allocates its arrays when made),
and over the fill's second half (marginal: Reverb's fixed costs paid); for
cpprb also its arrays' bytes per item. With one frame per observation
(MinAtar) a transition adds one frame, so these are also bytes per stored
frame. Each size runs in its own process, so one size's freed memory does
not hide the next one's growth. `--chunk_length` trades Reverb's memory for
sampling time: to read an item, the sampler decompresses every chunk it
references, whole (measured: 16-step chunks cost less per sample than
32-step ones, and more memory per frame; see `per.agent.CHUNK_LENGTH`).
Without cpprb installed, Reverb alone is measured.

Results: stdout and `--out`/replay.{csv,md} with `replay.provenance.json`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import multiprocessing
import pathlib
import statistics
import time
from typing import Any, Callable, NamedTuple, Protocol

import numpy as np
import reverb
from absl import flags

from common import cli, envs, provenance
from common.config import MAX_TABLE_SIZE
from common.errors import UsageError
from common.results import check_keeps_measurement, chosen_dir, write_csv
from common.reverb import server as reverb_server
from per import replay, replay_config
from per.agent import CHUNK_LENGTH

try:
    import cpprb
except ImportError:  # A benchmark-only dependency (requirements.txt).
    cpprb = None

flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "Table sizes to fill.")
flags.DEFINE_integer("iterations", 2000, "Timed sample+update iterations per size and replay, over all rounds.")
flags.DEFINE_integer("rounds", 5, "Turns the replays take at timing; each replay's number is its median round.")
flags.DEFINE_integer("batch_size", 32, "Items per sample and update (PER: 32).")
flags.DEFINE_integer("chunk_length", CHUNK_LENGTH, "Reverb: steps per chunk of frames (the agent's CHUNK_LENGTH).")
flags.DEFINE_string("env", "minatar:breakout", "The env whose transitions are stored, FAMILY:NAME.")
flags.DEFINE_string("out", None, "Output directory; default results/per/benchmarks.")
FLAGS = flags.FLAGS

BETA = 0.5  # IS-weight exponent of every sample.
CPPRB_ALPHA = 0.6  # PER's proportional alpha (Table 3), as our proportional preset.
RECORDED = 10_000  # Real transitions recorded, cycled to fill a table.
WARMUP = 50  # Untimed iterations before the first round.
TARGET_RATIO = 3.0  # Issue #13: Reverb within 3x of cpprb at 10^5 items.
REVERB_VARIANTS = ("proportional", "rank")
NAMES = {"proportional": "Reverb proportional", "rank": "Reverb rank-based", "cpprb": "cpprb proportional",
         "floor": "Reverb API floor"}  # fmt: skip

Transition = tuple[np.ndarray, int, float, bool, np.ndarray]  # S_{j-1}, A_{j-1}, R_j, terminal_j, S_j.


class Replay(Protocol):
    """What the benchmark times: a store, and the learner's sample+update."""

    def add(self, transition: Transition) -> None: ...

    def flush(self) -> None: ...

    def sample_and_update(self, batch_size: int, rng: np.random.Generator) -> None: ...

    def close(self) -> None: ...


class ReverbReplay:
    """The agent's replay client on an in-process server; `replay.table`'s MinSize limiter never holds a sample back."""

    def __init__(self, variant: str, size: int, chunk_length: int):
        config = dataclasses.replace(replay_config.PRESETS[variant], capacity=size)
        self._server = reverb_server.make_server([replay.table(config)])
        client = reverb.Client(f"localhost:{self._server.port}")
        self._replay = replay.PrioritizedReplay(client, config, flush_every=chunk_length, chunk_length=chunk_length)

    def add(self, transition: Transition) -> None:
        self._replay.add_transition(transition)

    def flush(self) -> None:
        self._replay.flush()

    def sample_and_update(self, batch_size: int, rng: np.random.Generator) -> None:
        batch = self._replay.sample(batch_size, BETA)
        self._replay.update(batch.keys, rng.exponential(size=batch_size))

    def close(self) -> None:
        self._replay.close()
        self._server.stop()


class ReverbFloor:
    """Reverb's client API alone: the least that a replay on it pays per sample+update.

    The proportional replay's table, each item one float32 (a transition's
    reward), sampled by the same kept-open sampler, and one
    `mutate_priorities` call per batch: no chunk to decompress, no frames to
    decode, no IS weights. What is left is per item (the sampler hands items
    over one at a time, each as six NumPy arrays: five of sample info and the
    number) and per update (a gRPC round trip, which Reverb makes even to a
    server in its own process; only samplers bypass gRPC there).
    """

    def __init__(self, size: int):
        config = dataclasses.replace(replay_config.PRESETS["proportional"], capacity=size)
        self._server = reverb_server.make_server([replay.table(config)])
        self._client = reverb.Client(f"localhost:{self._server.port}")
        self._writer = self._client.trajectory_writer(num_keep_alive_refs=1)
        self._sampler = None

    def add(self, transition: Transition) -> None:
        self._writer.append({"reward": np.float32(transition[2])})
        self._writer.create_item("replay", 1.0, {"reward": self._writer.history["reward"][-1:]})

    def flush(self) -> None:
        self._writer.flush()

    def sample_and_update(self, batch_size: int, rng: np.random.Generator) -> None:
        if self._sampler is None:  # As `PrioritizedReplay`: Reverb's pybind sampler, the next batch in flight.
            self._sampler = self._client._client.NewSampler("replay", replay.UNLIMITED, batch_size)
        keys = [int(self._sampler.GetNextTrajectory()[0]) for _ in range(batch_size)]
        self._client.mutate_priorities("replay", updates=dict(zip(keys, rng.exponential(size=batch_size).tolist())))

    def close(self) -> None:
        self._sampler = None
        self._writer.close()
        self._server.stop()


class CpprbReplay:
    """cpprb's `PrioritizedReplayBuffer` holding the same five fields, S_{j-1} and S_j each whole."""

    def __init__(self, size: int, observation: np.ndarray):
        state = {"shape": observation.shape, "dtype": observation.dtype}
        self.fields = {"obs": state, "act": {"dtype": np.int32}, "rew": {"dtype": np.float32},
                       "done": {"dtype": np.float32}, "next_obs": state}  # fmt: skip
        self._buffer = cpprb.PrioritizedReplayBuffer(size, self.fields, alpha=CPPRB_ALPHA, eps=1e-6)

    def add(self, transition: Transition) -> None:
        observation, action, reward, terminal, next_observation = transition
        self._buffer.add(obs=observation, act=action, rew=reward, done=terminal, next_obs=next_observation)

    def flush(self) -> None:
        """Nothing to flush: an add is stored at once."""

    def bytes_per_item(self) -> int:
        """Its arrays' bytes per item: cpprb preallocates each field as [size, *shape]."""
        return sum(int(np.prod(f.get("shape", 1))) * np.dtype(f["dtype"]).itemsize for f in self.fields.values())

    def sample_and_update(self, batch_size: int, rng: np.random.Generator) -> None:
        batch = self._buffer.sample(batch_size, beta=BETA)  # With IS weights, batch["weights"].
        self._buffer.update_priorities(batch["indexes"], rng.exponential(size=batch_size))

    def close(self) -> None:
        self._buffer.clear()


def record(env_spec: str, n: int, seed: int) -> list[Transition]:
    """`n` transitions of `env_spec` under uniform random actions, each array a copy."""
    env = envs.make(env_spec, seed=seed)
    env.action_space.seed(seed)
    observation, _ = env.reset(seed=seed)
    transitions = []
    while len(transitions) < n:
        action = int(env.action_space.sample())
        next_observation, reward, terminated, truncated, _ = env.step(action)
        transitions.append((np.array(observation), action, float(reward), bool(terminated), np.array(next_observation)))
        observation = env.reset()[0] if terminated or truncated else next_observation
    env.close()
    return transitions


def rss_bytes() -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc: this benchmark needs Linux")


class Fill(NamedTuple):
    inserts_per_s: float
    rss_bytes: float  # Resident memory growth per transition from before the replay was made to the full table.
    rss_marginal_bytes: float  # The same over the fill's second half, fixed costs paid.


def fill(make: Callable[[], Replay], transitions: list[Transition], size: int) -> tuple[Replay, Fill]:
    """A new replay holding `size` transitions, and what filling it cost.

    Both memory numbers are needed: cpprb allocates its arrays when made, so
    its second half costs nothing, while Reverb's fixed costs (the server's
    threads) weigh on a small table's total.
    """
    before, seconds, rss = rss_bytes(), 0.0, []
    buffer = make()
    for start, stop in ((0, size // 2), (size // 2, size)):
        begin = time.perf_counter()
        for i in range(start, stop):
            buffer.add(transitions[i % len(transitions)])
        buffer.flush()
        seconds += time.perf_counter() - begin
        rss.append(rss_bytes())
    return buffer, Fill(size / seconds, (rss[1] - before) / size, (rss[1] - rss[0]) / (size - size // 2))


class Timing(NamedTuple):
    wall_us: float  # Median over rounds of the wall-clock µs per sample+update.
    cpu_us: float  # The same in process CPU time, all threads.


def time_rounds(buffers: dict[str, Replay], iterations: int, rounds: int, batch_size: int) -> dict[str, Timing]:
    """Median µs per sample+update of each replay, the replays taking turns each round."""
    rng = np.random.default_rng(0)
    per_round = max(iterations // rounds, 1)
    wall: dict[str, list[float]] = {name: [] for name in buffers}
    cpu: dict[str, list[float]] = {name: [] for name in buffers}
    for buffer in buffers.values():
        for _ in range(WARMUP):
            buffer.sample_and_update(batch_size, rng)
    for _ in range(rounds):
        for name, buffer in buffers.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                buffer.sample_and_update(batch_size, rng)
            wall[name].append(1e6 * (time.perf_counter() - start) / per_round)
            cpu[name].append(1e6 * (time.process_time() - start_cpu) / per_round)
    return {name: Timing(statistics.median(wall[name]), statistics.median(cpu[name])) for name in buffers}


def measure_size(
    size: int, env_spec: str, chunk_length: int, iterations: int, rounds: int, batch_size: int
) -> list[dict[str, Any]]:
    """One table size, in a fresh process: fill each replay, then time them in turns."""
    transitions = record(env_spec, min(size, RECORDED), seed=0)
    makers: dict[str, Callable[[], Replay]] = {
        v: lambda v=v: ReverbReplay(v, size, chunk_length) for v in REVERB_VARIANTS
    }
    if cpprb is not None:
        makers["cpprb"] = lambda: CpprbReplay(size, transitions[0][0])
    makers["floor"] = lambda: ReverbFloor(size)
    buffers, fills = {}, {}
    for name, make in makers.items():  # All stay alive until timed: no fill reuses another's freed memory.
        buffers[name], fills[name] = fill(make, transitions, size)
    timings = time_rounds(buffers, iterations, rounds, batch_size)
    micros = {name: timing.wall_us for name, timing in timings.items()}
    rows = []
    for name, buffer in buffers.items():
        baseline = micros.get("cpprb")
        stores = name != "floor"  # The floor's items hold one number: its fill says nothing of a replay's memory.
        rows.append(
            {  # `variant`, `us_per_iteration` and the rank overhead are what `reproduce.dashboard` reads.
                "items": size,
                "variant": name,
                "insert_per_s": round(fills[name].inserts_per_s) if stores else "",
                "us_per_iteration": round(micros[name], 1),
                "rank_overhead_vs_proportional": round(micros["rank"] / micros["proportional"] - 1, 3),
                "ratio_to_cpprb": round(micros[name] / baseline, 2) if baseline else "",
                "ratio_to_floor": round(micros[name] / micros["floor"], 2) if name in REVERB_VARIANTS else "",
                "cpu_us_per_iteration": round(timings[name].cpu_us, 1),
                "rss_bytes_per_transition": round(fills[name].rss_bytes) if stores else "",
                "rss_marginal_bytes_per_transition": round(fills[name].rss_marginal_bytes) if stores else "",
                "array_bytes_per_transition": buffer.bytes_per_item() if isinstance(buffer, CpprbReplay) else "",
            }
        )
        buffer.close()
    return rows


def cell(value: Any, spec: str = ",") -> str:
    """A table cell: `value` formatted, or empty where the row has none."""
    return "" if value == "" else format(value, spec)


def markdown(rows: list[dict[str, Any]], env_spec: str, config: dict[str, Any], wall_time_s: float) -> str:
    lines = [
        f"# PER sample+update: Reverb vs cpprb ({env_spec} transitions, batch {config['batch_size']}, benchmark scale)",
        "",
        f"Produced by `{provenance.command()}` (see its docstring and `replay.provenance.json`).",
        "Each replay holds the same recorded transitions; one iteration samples a batch with IS weights",
        f"(beta {BETA}) and updates its priorities. `µs`: the median of {config['rounds']} rounds in which the",
        "replays take turns. `RSS B`: resident memory growth per stored transition (one new frame each),",
        "from before the replay was made to the full table, and over the fill's second half (marginal).",
        f"`array B`: cpprb's preallocated arrays per item. Reverb's chunks hold {config['chunk_length']} steps.",
        "`CPU µs`: the process's CPU time per sample+update, all threads (Reverb's sampler and server included).",
        "`Reverb API floor`: the same table and sampler holding one number per item, one `mutate_priorities`",
        "per batch, nothing decoded: what any replay on Reverb's Python client pays (`x floor`: ours against it).",
        "",
        "| items | replay | µs per sample+update | x cpprb | x floor | CPU µs | inserts/s | RSS B | RSS marginal B "
        "| array B |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        ratio = f"{row['ratio_to_cpprb']:.2f}" if row["ratio_to_cpprb"] != "" else "n/a"
        lines.append(
            f"| {row['items']:,} | {NAMES[row['variant']]} | {row['us_per_iteration']:.1f} | {ratio} "
            f"| {cell(row['ratio_to_floor'], '.2f')} | {row['cpu_us_per_iteration']:.1f} | {cell(row['insert_per_s'])} "
            f"| {cell(row['rss_bytes_per_transition'])} | {cell(row['rss_marginal_bytes_per_transition'])} "
            f"| {cell(row['array_bytes_per_transition'])} |"
        )
    lines.append("")
    at_target = [r for r in rows if r["items"] == 100_000 and r["variant"] in REVERB_VARIANTS and r["ratio_to_cpprb"]]
    for row in at_target:
        verdict = "meets" if row["ratio_to_cpprb"] <= TARGET_RATIO else "misses"
        lines.append(
            f"At 10^5 items {NAMES[row['variant']]} is {row['ratio_to_cpprb']:.2f}x cpprb: it {verdict} the issue's "
            f"target of {TARGET_RATIO:.0f}x."
        )
    floor = [r for r in rows if r["items"] == 100_000 and r["variant"] == "floor" and r["ratio_to_cpprb"]]
    for row in floor:
        side = "above" if row["ratio_to_cpprb"] > TARGET_RATIO else "within"
        lines.append(
            f"At 10^5 items Reverb's API floor is {row['us_per_iteration']:.1f} µs, {row['ratio_to_cpprb']:.2f}x "
            f"cpprb: {side} the target on its own."
        )
    if cpprb is None:
        lines.append("cpprb is not installed (`pip install -c constraints.txt cpprb`): Reverb alone was measured.")
    lines += [f"Wall time {wall_time_s:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    sizes = [int(s) for s in FLAGS.sizes if s.isdigit()]
    if not sizes or len(sizes) < len(FLAGS.sizes) or min(sizes) < 2 or max(sizes) > MAX_TABLE_SIZE:
        raise UsageError(
            f"--sizes={','.join(FLAGS.sizes)}: need integers in [2, {MAX_TABLE_SIZE:,}], e.g. 10000,100000"
        )
    if FLAGS.rounds < 1 or FLAGS.iterations < FLAGS.rounds or FLAGS.batch_size < 1 or FLAGS.chunk_length < 1:
        raise UsageError("need --rounds >= 1, --iterations >= --rounds, --batch_size >= 1 and --chunk_length >= 1")
    envs.parse(FLAGS.env)  # A bad name before the measurement's flags are compared with the committed one's.
    out = chosen_dir("--out", FLAGS.out, "per", "benchmarks")
    check_keeps_measurement(out, "replay", "out")
    if cpprb is None:
        print("cpprb is not installed (pip install -c constraints.txt cpprb): measuring Reverb alone.")
    config = {"sizes": sizes, "iterations": FLAGS.iterations, "rounds": FLAGS.rounds,
              "batch_size": FLAGS.batch_size, "env": FLAGS.env, "beta": BETA, "chunk_length": FLAGS.chunk_length,
              "cpprb": importlib.metadata.version("cpprb") if cpprb is not None else None}  # fmt: skip
    start = time.time()
    rows = []
    context = multiprocessing.get_context("spawn")
    for size in sizes:
        with context.Pool(1) as pool:  # A fresh process per size: its memory growth is its own.
            args = (size, FLAGS.env, FLAGS.chunk_length, FLAGS.iterations, FLAGS.rounds, FLAGS.batch_size)
            size_rows = pool.apply(measure_size, args)
        for row in size_rows:
            print(", ".join(f"{key} {value}" for key, value in row.items()))
        rows += size_rows
    wall_time = time.time() - start
    report = markdown(rows, FLAGS.env, config, wall_time)
    print(report)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "replay.csv", rows)
    (out / "replay.md").write_text(report)
    provenance.write(
        out, "replay.provenance.json", config=config, seeds=[0], frames=None, wall_time_s=wall_time,
        scale="benchmark",
    )  # fmt: skip


if __name__ == "__main__":
    cli.run(main)
