"""Benchmark: the prioritized Double DQN agent's throughput, in one process and with an actor process.

    python -m per.benchmark_agent [--env minatar:breakout] [--seconds 15] [--warmup_s 5] [--envs_per_actor 1,4]
                                  [--repeats 3]

Measured in one run of `--repeats` rounds, each row in a fresh (spawned)
process, one after the other; the report gives each rate's median over the
rounds and its range (a short row's rate moved by 20-30% between runs on
this shared machine):

1. `env`: the raw env rate, the preset's batched env stepped with uniform
   random actions (no network, no replay), in agent steps/s;
2. `learner`: `per.learner.Learner.update` alone on one fixed minibatch of the
   env's transitions, in updates/s; times `update_period`, the agent steps/s
   it could serve at PER's replay ratio;
3. `acting`, at each `--envs_per_actor` count: what the actor does without a
   learner, the epsilon-greedy policy's forward pass, the env step and the
   replay's inserts (into a table of the same kind that nothing samples, so no
   rate limiter holds it back), in agent steps/s;
4. end to end, for uniform, rank-based and proportional replay (the env
   family's Double DQN presets): the learner acting itself (`--actors 0`,
   `DqnAgent`), and with one actor process (`--actors 1`: `ApexAgent`, the
   actor started by `common.launch.ActorSupervisor` as training starts it).
   The replay fills to `--min_replay_size`, the learner runs `--warmup_s`,
   then over `--seconds`: agent steps/s (transitions the table received),
   updates/s, bytes per transition (the learner process's resident-memory
   growth per transition received: the Reverb server, the replay's client and
   the rank tracker are in it; rough, over a short window), and the rank
   tracker's own Python memory per item it knows (`RankTracker.bytes_per_item`).

`--envs_per_actor` (default: the preset's, and 4) repeats the end-to-end rows
with each actor (or the learner acting itself) stepping that many envs
together: one forward pass per N agent steps, the lever against the policy's
per-call cost at batch 1. The env and learner rows stay at the preset's envs
per actor. Results named by the flag's counts when it is given.

Acting uses a fixed epsilon, the preset's final one, so the network picks most
actions as it does for most of training (at epsilon 1 it is never called).
Every row runs at PER's replay ratio, one update per 4 agent steps, the
issue's; the MinAtar presets update every step (Young & Tian's). A row's
process has the preset's TF threads (`learner_threads`), as training's.

Reported: rank-based's cost over proportional (agent steps/s; target <= 5%),
and each end-to-end rate against 1/(1/env + 1/(learner x update_period)), the
rate of stepping the env then learning with nothing else (target >= 80%). The
bound counts neither the policy nor the inserts, so each rate is also set
against 1/(1/acting + 1/(learner x update_period)) at its envs per actor: what
acting and learning in turn allow, leaving sampling, priority writes and the
processes' contention as the rest of the gap.

Results: stdout and results/per/benchmarks/agent.{csv,md} (the medians),
agent_runs.csv (every round's rows), provenance beside them (other envs:
agent_<family>_<game>.*; given counts: agent_envs_1_4.*).
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
import os
import pathlib
import tempfile
import time

import numpy as np
import reverb
from absl import flags

from common import cli, envs, launch, provenance
from common import config as config_lib
from common.errors import UsageError
from common.results import check_keeps_measurement, chosen_dir, write_csv
from common.reverb import server as reverb_server
from common.reverb import tables
from per import agent, networks
from per.actor import Actor, store
from per.config import PRESETS, PerConfig
from per.learner import FIELDS, Learner

flags.DEFINE_string("env", "minatar:breakout", "The env, FAMILY:NAME (minatar or atari).")
flags.DEFINE_string(
    "out", None, "Output directory (default results/per/benchmarks, where a measurement under other flags is refused)."
)
flags.DEFINE_float("seconds", 15, "Timed seconds of each end-to-end row, after the fill and the warm-up.")
flags.DEFINE_float("warmup_s", 5, "Seconds each end-to-end row learns before its timed window.")
flags.DEFINE_float("alone_s", 5, "Timed seconds of the env and learner rows.")
flags.DEFINE_integer("min_replay_size", 2_000, "Transitions before learning starts (the fill before the warm-up).")
flags.DEFINE_integer("repeats", 3, "Rounds of every row; the report gives each rate's median and range.")
flags.DEFINE_list(
    "envs_per_actor", None, "End-to-end rows at these envs per actor, e.g. 1,4 (default: the preset's, and 4)."
)
FLAGS = flags.FLAGS

VARIANTS = {"uniform": "ddqn", "rank": "ddqn_rank", "proportional": "ddqn_prop"}
COLUMNS = ("measurement", "replay", "actors", "envs_per_actor")
RATES = ("agent_steps_per_s", "updates_per_s", "bytes_per_transition", "rank_tracker_bytes_per_item")
# Issue #12's targets hold at PER's replay ratio, one update of 32 per 4 agent steps (8 samples per insert).
PER_UPDATE_PERIOD = 4
RANK_OVERHEAD_TARGET = 0.05
BOUND_TARGET = 0.80


def benchmark_config(env: str, variant: str, min_replay_size: int, envs_per_actor: int | None = None) -> PerConfig:
    """The family's preset for `variant` at PER's ratio, acting at its final epsilon, learning after the fill."""
    family, _ = envs.parse(env)
    name = f"{family}_{VARIANTS[variant]}"
    if name not in PRESETS:
        # The toy preset has no rank-based and proportional pair (`VARIANTS`) to set side by side.
        raise UsageError(
            f"--env={env}: the benchmark measures PER's minatar and atari presets; use minatar:GAME or atari:GAME"
        )
    preset = PRESETS[name]
    return dataclasses.replace(
        preset, env=env, epsilon_start=preset.epsilon_end, min_replay_size=min_replay_size,
        replay_capacity=max(preset.replay_capacity, min_replay_size),
        envs_per_actor=envs_per_actor or preset.envs_per_actor,
        update_period=PER_UPDATE_PERIOD,  # The MinAtar presets update every step (Young & Tian's ratio).
    )  # fmt: skip


def rss_bytes() -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc: this benchmark needs Linux")


def env_rate(config: PerConfig, seconds: float) -> dict:
    """Agent steps/s of the batched env alone, uniform random actions."""
    env = envs.make_batched(config.env, config.envs_per_actor, seed=0, **dict(config.env_options))
    env.reset(seed=0)
    rng, num_actions, steps = np.random.default_rng(0), env.num_actions, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(rng.integers(num_actions, size=config.envs_per_actor))
        steps += config.envs_per_actor
    env.close()
    return {"agent_steps_per_s": steps / (time.perf_counter() - start)}


def learner_rate(config: PerConfig, seconds: float) -> dict:
    """Updates/s of `Learner.update` alone, on one minibatch of the env's transitions at epsilon 1."""
    space, num_actions = agent.spaces(config)
    online, target = (networks.make(config, space, num_actions, name=n) for n in ("q_network", "target_q_network"))
    env = envs.make_batched(config.env, config.envs_per_actor, seed=0, **dict(config.env_options))
    actor, transitions = Actor(online, env, seed=0), []
    while len(transitions) < config.batch_size:
        transitions += actor.step(1.0)[0]
    batch = {name: np.stack([getattr(t, name) for t in transitions[: config.batch_size]]) for name in FIELDS}
    weights = np.ones(config.batch_size, np.float32)
    learner = Learner(config, online, target)
    learner.restored()
    for _ in range(20):  # Traces and warms the compiled update.
        learner.update(batch, weights)
    updates, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        learner.update(batch, weights)
        updates += 1
    return {"updates_per_s": updates / (time.perf_counter() - start)}


def acting_rate(config: PerConfig, seconds: float) -> dict:
    """Agent steps/s of acting alone: `Actor.step` at the fixed epsilon and every transition's insert, no learner.

    The table is the replay's, prioritized with the preset's exponent, but
    limited by its size alone: with nothing sampling, the replay ratio's
    limiter would block the inserts.
    """
    table = tables.prioritized_replay(
        agent.REPLAY_TABLE, config.replay_capacity, config.replay_config.selector_exponent
    )
    server = reverb_server.make_server([table])
    client = reverb.Client(f"localhost:{server.port}")
    replay = agent.make_replay(config, client)
    space, num_actions = agent.spaces(config)
    network = networks.make(config, space, num_actions, name="q_network")
    env = envs.make_batched(config.env, config.envs_per_actor, seed=0, **dict(config.env_options))
    actor = Actor(network, env, seed=0)

    def act_for(seconds: float) -> int:
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            transitions, _ = actor.step(config.epsilon_end)
            store(replay, transitions)
            steps += len(transitions)
        return steps

    warmup = act_for(min(1.0, seconds))  # Traces the policy and opens the writers.
    start = time.perf_counter()
    steps = act_for(seconds)
    elapsed = time.perf_counter() - start
    replay.flush()
    stored = client.server_info()[agent.REPLAY_TABLE].current_size
    if stored != min(warmup + steps, config.replay_capacity):  # The rate counts transitions the table holds.
        raise RuntimeError(f"acting stepped {warmup + steps:,} transitions, the table holds {stored:,}")
    replay.close()
    env.close()
    server.stop()
    return {"agent_steps_per_s": steps / elapsed}


def learn_for(learner: agent.PrioritizedDqn, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        learner.step()


def end_to_end(config: PerConfig, warmup_s: float, seconds: float) -> dict:
    """Agent steps/s, updates/s and bytes per transition of training, with `config.num_actors` actor processes."""
    server = reverb_server.make_server(agent.agent_tables(config))
    address = f"localhost:{server.port}"
    client = reverb.Client(address)
    learner = agent.make_agent(config, client, address, pathlib.Path())
    learner.start()
    with tempfile.TemporaryDirectory() as directory:
        actors = None
        if config.num_actors:
            config_path = pathlib.Path(directory) / "config.json"
            config_path.write_text(config_lib.to_json(config))
            actors = launch.ActorSupervisor("per.train", config_path, address, config.num_actors, config_path.parent)
            actors.start()
        while learner.steps == 0:  # The fill.
            learner.step()
        learn_for(learner, warmup_s)

        def counts():
            info = client.server_info()[agent.REPLAY_TABLE].rate_limiter_info
            return time.perf_counter(), info.insert_stats.completed, learner.steps, rss_bytes()

        before = counts()
        learn_for(learner, seconds)
        after = counts()
        if actors is not None:
            actors.stop()
    learner.close()
    server.stop()
    elapsed, transitions, updates, rss = (b - a for a, b in zip(before, after))
    rank = learner.replay._rank
    return {
        "agent_steps_per_s": transitions / elapsed,
        "updates_per_s": updates / elapsed,
        "bytes_per_transition": rss / transitions,
        "rank_tracker_bytes_per_item": rank.bytes_per_item() if rank else 0.0,
    }


def _child(measure, args, results) -> None:
    launch.use_threads(args[0])  # The config's threads, as training sets them.
    results.put(measure(*args))


def in_fresh_process(measure, *args) -> dict:
    """`measure(*args)` in a spawned process: its own TF, allocator and resident memory."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_child, args=(measure, args, results))
    process.start()
    row = results.get(timeout=1_800)
    process.join(timeout=60)
    return row


def measure_all(
    env: str,
    min_replay_size: int,
    seconds: float,
    warmup_s: float,
    alone_s: float,
    envs_per_actor: list[int],
    repeats: int,
) -> list[dict]:
    """Every row `repeats` times, one round of all of them after another, so that a slow spell hits every row alike."""
    base = benchmark_config(env, "proportional", min_replay_size)
    rows = []
    for run in range(repeats):
        rows.append({"measurement": "env", "run": run, **in_fresh_process(env_rate, base, alone_s)})
        learner = in_fresh_process(learner_rate, base, alone_s)
        learner["agent_steps_per_s"] = learner["updates_per_s"] * base.update_period
        rows.append({"measurement": "learner", "run": run, **learner})
        for n in envs_per_actor:
            config = benchmark_config(env, "proportional", min_replay_size, n)
            rows.append({"measurement": "acting", "run": run, "envs_per_actor": n,
                         **in_fresh_process(acting_rate, config, alone_s)})  # fmt: skip
        for n, actors, variant in itertools.product(envs_per_actor, (0, 1), VARIANTS):
            config = dataclasses.replace(benchmark_config(env, variant, min_replay_size, n), num_actors=actors)
            row = in_fresh_process(end_to_end, config, warmup_s, seconds)
            rows.append(
                {"measurement": "end_to_end", "run": run, "replay": variant, "actors": actors, "envs_per_actor": n,
                 **row}
            )  # fmt: skip
            print(f"run {run}: {variant}, {actors} actor(s), {n} env(s): {row['agent_steps_per_s']:.0f} agent steps/s",
                  flush=True)  # fmt: skip
    return rows


def medians(runs: list[dict]) -> list[dict]:
    """One row per measurement and layout: each rate's median over the runs, agent steps/s' range beside it.

    `of_bound` is the median end-to-end rate against the bound from the
    median env and learner rates; `of_acting_bound` against the bound from
    the median acting rate at the row's envs per actor and the learner's.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in runs:
        groups.setdefault(tuple(row.get(name, "") for name in COLUMNS), []).append(row)
    rows = []
    for group in groups.values():
        row = {name: group[0].get(name, "") for name in COLUMNS}
        for name in RATES:
            row[name] = float(np.median([r[name] for r in group])) if name in group[0] else ""
        rates = [r["agent_steps_per_s"] for r in group]
        row["agent_steps_per_s_min"], row["agent_steps_per_s_max"], row["runs"] = min(rates), max(rates), len(group)
        rows.append(row)
    env, learner = (next(r for r in rows if r["measurement"] == name) for name in ("env", "learner"))
    bound = serial_bound(env, learner)
    acting = {r["envs_per_actor"]: r for r in rows if r["measurement"] == "acting"}
    for row in rows:
        end = row["measurement"] == "end_to_end"
        row["of_bound"] = row["agent_steps_per_s"] / bound if end else ""
        row["of_acting_bound"] = (
            row["agent_steps_per_s"] / serial_bound(acting[row["envs_per_actor"]], learner) if end else ""
        )
    return [{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()} for row in rows]


def serial_bound(first: dict, learner: dict) -> float:
    """1/(1/first + 1/learner) agent steps/s: doing `first`'s work, then the learner's, with nothing else."""
    return 1 / (1 / first["agent_steps_per_s"] + 1 / learner["agent_steps_per_s"])


def run_rows(runs: list[dict]) -> list[dict]:
    """Every round's rows with the same columns (a CSV's), "" where a measurement has no such rate."""
    columns = ("run", *COLUMNS, *RATES)
    return [{name: round(v, 3) if isinstance(v := row.get(name, ""), float) else v for name in columns} for row in runs]


def rank_overhead(rows: list[dict], actors: int, envs_per_actor: int) -> float:
    """1 - rank-based / proportional agent steps/s."""
    rate = {
        r["replay"]: r["agent_steps_per_s"]
        for r in rows
        if (r["actors"], r["envs_per_actor"]) == (actors, envs_per_actor)
    }
    return 1 - rate["rank"] / rate["proportional"]


def rate_range(row: dict) -> str:
    """`lo–hi` agent steps/s over the runs, when there were several."""
    if row.get("runs", 1) < 2:
        return ""
    return f"{row['agent_steps_per_s_min']:,.0f}–{row['agent_steps_per_s_max']:,.0f}"


def markdown(rows: list[dict], config: PerConfig, seconds: float, load: tuple, wall_time_s: float, stem: str) -> str:
    """The report from `medians`' rows (env, learner, acting at each envs count, then the end-to-end rows)."""
    env, learner = (next(r for r in rows if r["measurement"] == name) for name in ("env", "learner"))
    acting = [r for r in rows if r["measurement"] == "acting"]
    ends = [r for r in rows if r["measurement"] == "end_to_end"]
    runs = env.get("runs", 1)
    bound = serial_bound(env, learner)
    machine = provenance.machine()
    lines = [
        f"# PER agent throughput ({config.env}, benchmark scale, {machine['cores']} CPU cores)",
        "",
        f"Produced by `{provenance.command()}` (see its docstring and `{stem}.provenance.json`), in one run",
        f"of {runs} round(s), each row in a fresh process; each rate is the median over the rounds, `range`",
        "its spread (every round's rows: the `_runs.csv` beside this).",
        provenance.describe_load(*load),
        f"Presets: `{config.env.split(':')[0]}_ddqn*` at epsilon {config.epsilon_end} (fixed), "
        f"{config.samples_per_insert:g} samples per insert (a batch of",
        f"{config.batch_size} per {config.update_period} agent steps), learning after "
        f"{config.min_replay_size:,} transitions; each end-to-end row timed over {seconds:g} s.",
        f"`envs/actor`: envs an actor steps together, one forward pass for all (the preset: {config.envs_per_actor});",
        "the env and learner rows, and so the bound, are at the preset's.",
        "`bytes/transition`: the learner process's resident-memory growth per transition received (Reverb",
        "server in it) over the timed window: rough, allocator noise is of its order here; `per.benchmark_memory`",
        "measures the server alone. `tracker B/item`: the rank tracker's Python memory per item it knows,",
        "which a rank-based replay adds to the server's bytes (x 10^6 for a full Atari replay).",
        "",
        f"- env alone (uniform random actions): {env['agent_steps_per_s']:,.0f} agent steps/s {rate_range(env)}",
        f"- learner update alone: {learner['updates_per_s']:,.1f} updates/s = {learner['agent_steps_per_s']:,.0f} "
        f"agent steps/s at {config.update_period} agent steps per update {rate_range(learner)}",
        f"- bound 1/(1/env + 1/learner): {bound:,.0f} agent steps/s",
    ]
    counts = sorted({r["envs_per_actor"] for r in ends})
    for r in acting:
        lines.append(
            f"- acting alone{envs_label(r['envs_per_actor'], counts)} (the policy's forward pass, the env, the "
            f"replay's inserts): {r['agent_steps_per_s']:,.0f} agent steps/s{(' ' + rate_range(r)).rstrip()}; "
            f"acting bound 1/(1/acting + 1/learner): {serial_bound(r, learner):,.0f}"
        )
    lines += [
        "",
        "| replay | actor processes | envs/actor | agent steps/s | range | updates/s | bytes/transition "
        "| tracker B/item | of bound | of acting bound |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in ends:
        lines.append(
            f"| {r['replay']} | {r['actors']} | {r['envs_per_actor']} | {r['agent_steps_per_s']:,.0f} "
            f"| {rate_range(r)} | {r['updates_per_s']:,.1f} "
            f"| {r['bytes_per_transition']:,.0f} | {r['rank_tracker_bytes_per_item']:,.0f} | {r['of_bound']:.0%} "
            f"| {r['of_acting_bound']:.0%} |"
        )
    lines.append("")
    for n, actors in itertools.product(counts, (0, 1)):
        overhead = rank_overhead(ends, actors, n)
        # Judged at the precision printed: 1 - 285/300 is 0.050000000000000044, and "5.0%" meets "<= 5%".
        verdict = "meets" if round(overhead, 3) <= RANK_OVERHEAD_TARGET else "misses"
        lines.append(
            f"- {actors} actor process(es){envs_label(n, counts)}: rank-based costs {overhead:.1%} of proportional's "
            f"agent steps/s ({verdict} the <= {RANK_OVERHEAD_TARGET:.0%} target)."
        )
    for n, variant in itertools.product(counts, VARIANTS):
        single, split = (next(r for r in ends if (r["replay"], r["actors"], r["envs_per_actor"]) == (variant, a, n))
                         for a in (0, 1))  # fmt: skip
        lines.append(
            f"- {variant}{envs_label(n, counts)}: one actor process runs "
            f"{split['agent_steps_per_s'] / single['agent_steps_per_s']:.2f}x the single process's agent steps/s; "
            f"of the bound {single['of_bound']:.0%} and {split['of_bound']:.0%} (target >= {BOUND_TARGET:.0%}); "
            f"of the acting bound {single['of_acting_bound']:.0%} and {split['of_acting_bound']:.0%}."
        )
    lines += ["", f"Wall time {wall_time_s:.0f} s.", ""]
    return "\n".join(lines)


def envs_label(n: int, counts: list[int]) -> str:
    """`, N env(s) per actor` when the run measured more than one count."""
    return f", {n} env(s) per actor" if len(counts) > 1 else ""


def envs_counts(config: PerConfig) -> list[int]:
    """`--envs_per_actor` as numbers (default the preset's), each checked against the preset's update period."""
    given = FLAGS.envs_per_actor if FLAGS["envs_per_actor"].present else [str(config.envs_per_actor), "4"]
    counts = cli.positive_integers("--envs_per_actor", given, "1,4")
    for n in counts:
        dataclasses.replace(config, envs_per_actor=n)  # The config's own checks (update_period).
    return list(dict.fromkeys(counts))


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    for name in ("seconds", "warmup_s", "alone_s", "repeats"):
        if not FLAGS[name].value > 0:
            raise UsageError(f"--{name}={FLAGS[name].value}: must be > 0")
    config = benchmark_config(FLAGS.env, "proportional", FLAGS.min_replay_size)
    agent.validate(config)
    counts = envs_counts(config)
    family, game = envs.parse(FLAGS.env)
    stem = "agent" if FLAGS.env == "minatar:breakout" else f"agent_{family}_{game}"
    if FLAGS["envs_per_actor"].present:
        stem += "_envs_" + "_".join(map(str, counts))
    out = chosen_dir("--out", FLAGS.out, "per", "benchmarks")
    check_keeps_measurement(out, stem, "out")
    start, load = time.time(), [os.getloadavg()[0]]
    runs = measure_all(
        FLAGS.env, FLAGS.min_replay_size, FLAGS.seconds, FLAGS.warmup_s, FLAGS.alone_s, counts, FLAGS.repeats
    )
    rows = medians(runs)
    wall_time, load = time.time() - start, (load[0], os.getloadavg()[0])
    report = markdown(rows, config, FLAGS.seconds, load, wall_time, stem)
    print(report)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"{stem}.csv", rows)
    write_csv(out / f"{stem}_runs.csv", run_rows(runs))
    (out / f"{stem}.md").write_text(report)
    provenance.write(
        out, f"{stem}.provenance.json", seeds=[config.seed], frames=None, wall_time_s=wall_time, scale="benchmark",
        config={"env": FLAGS.env, "seconds": FLAGS.seconds, "warmup_s": FLAGS.warmup_s, "alone_s": FLAGS.alone_s,
                "min_replay_size": FLAGS.min_replay_size, "epsilon": config.epsilon_end,
                "params_period": agent.PARAMS_PERIOD, "envs_per_actor": counts, "repeats": FLAGS.repeats},
        extra={"load_average_1min": {"start": load[0], "end": load[1]}},
    )  # fmt: skip


if __name__ == "__main__":
    cli.run(main)
