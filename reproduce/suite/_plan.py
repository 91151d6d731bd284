"""What a suite is and where it stands: its games, its jobs, their states, its time.

Pure helpers without flags, so tests can import them. Each (game, seed) job is
an ordinary run directory `SUITE_DIR/<game>_s<seed>`; a job is done when the
run has its final.json and the evaluation of its final checkpoint
(`eval_step<learner_steps>.json`, written by `<agent>.evaluate`).

DMLab-30 is one multi-task job per seed (IMPALA §5.3: one agent on all 30
levels, `dmlab:dmlab30`), whose evaluation scores each level; its "games" in
the aggregates are the 30 scored levels (`scored_games`).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import NamedTuple

from common.errors import UsageError, choice_error

# --agent -> the package holding its config, train and evaluate modules.
AGENTS = {"impala": "impala", "ddqn": "per", "laser": "laser"}
SUITES = ("minatar", "atari57", "dmlab30")
# Frames per second of one job on this 2-core machine when the suite has no
# finished run to measure it from: (agent, env family) -> (rate, source).
DEFAULT_RATES = {
    ("impala", "minatar"): (7000.0, "results/impala/full/minatar: 5M frames in 620-894 s"),
    ("impala", "atari"): (9300.0, "results/impala/full/atari: Pong, 50M frames in 5390 s"),
    ("ddqn", "minatar"): (380.0, "results/per/archive/update_every_4/minatar_runs: every step, 2M frames in 5263 s"),
    ("laser", "minatar"): (1600.0, "results/laser/benchmarks/benchmark.md: fresh frames/s at 87.5% replay"),
}
# The one agent that trains on a mixture of levels (IMPALA §5.3).
MULTI_TASK_AGENTS = ("impala",)
# Toy runs are short enough that start-up (TensorFlow, Reverb, actors) dominates.
TOY_RATE = (75.0, "a 3,000-frame impala toy run took 40 s")
UNMEASURED_RATE = (1000.0, "no measurement for this agent and env family: a guess")


class Job(NamedTuple):
    env: str  # FAMILY:GAME
    seed: int

    @property
    def name(self) -> str:
        return f"{game(self.env)}_s{self.seed}"


@dataclasses.dataclass(frozen=True)
class Suite:
    """The suite's own config, saved as SUITE_DIR/suite.json."""

    agent: str
    preset: str
    suite: str
    games: tuple[str, ...]  # Env specs.
    seeds: tuple[int, ...]
    frames: int
    eval_episodes: int  # 0: the agent's evaluation protocol.


def game(env: str) -> str:
    return env.partition(":")[2]


def family(env: str) -> str:
    return env.partition(":")[0]


def resolve_suite(suite: str) -> tuple[str, ...]:
    """Env specs of a named suite or of a comma list `FAMILY:GAME,...`."""
    from common import envs  # Imports gymnasium, ALE and MinAtar: only once the cheap checks passed.

    if suite == "minatar":
        return tuple(f"minatar:{name}" for name in envs.minatar.GAMES)
    if suite == "atari57":
        return tuple(f"atari:{name}" for name in envs.atari.ATARI57)
    if suite == "dmlab30":
        return ("dmlab:dmlab30",)
    specs = tuple(spec.strip() for spec in suite.split(","))
    for spec in specs:
        envs.parse(spec)
    names = [game(spec) for spec in specs]
    if len(set(names)) != len(names):
        raise UsageError(f"--suite={suite}: a game appears twice (run directories are named by game)")
    return specs


def check_installed(games: tuple[str, ...]) -> None:
    """A `UsageError` before a job starts if a game's simulator is missing here (DeepMind Lab): each job would
    fail twice, the reason in its log only."""
    from common import envs

    for env in games:
        envs.check_installed(env)


def check_suite_name(suite: str, agent: str) -> None:
    """The checks on --suite that need no env import."""
    if suite == "dmlab30" and agent not in MULTI_TASK_AGENTS:
        raise UsageError(
            f"--suite dmlab30 trains one agent on all 30 levels (IMPALA §5.3), which only "
            f"{', '.join(MULTI_TASK_AGENTS)} does; use --agent impala --preset dmlab30"
        )
    if suite not in SUITES and ":" not in suite:
        raise choice_error("suite", suite, [*SUITES, "FAMILY:GAME,FAMILY:GAME,..."])


def scored_games(env: str) -> list[tuple[str, str]]:
    """(game, FAMILY:GAME) of each game a job of `env` is scored on: a multi-task job's scored levels."""
    from common import envs

    if not envs.is_suite(env):
        return [(game(env), env)]
    scored = [envs.scored(envs.task_spec(env, task)) for task in envs.tasks(env)]
    return [(game(spec), spec) for spec in scored]


def parse_shard(text: str) -> tuple[int, int]:
    """`"I/N"` -> (I, N), with 0 <= I < N."""
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not int(match[1]) < int(match[2]):
        raise UsageError(f"--shard={text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
    return int(match[1]), int(match[2])


def jobs(suite: Suite, shard: tuple[int, int] = (0, 1)) -> list[Job]:
    """Every N-th job from the I-th, seed-major so that early results cover whole seeds."""
    every = [Job(env, seed) for seed in suite.seeds for env in suite.games]
    index, count = shard
    return every[index::count]


def evaluation_path(run_dir: pathlib.Path) -> pathlib.Path | None:
    """Where the evaluation of the run's final checkpoint is (or will be); None before the run has ended."""
    final = run_dir / "final.json"
    if not final.exists():
        return None
    return run_dir / f"eval_step{json.loads(final.read_text())['learner_steps']}.json"


def evaluation(run_dir: pathlib.Path) -> dict | None:
    """The evaluation of the run's final checkpoint, or None."""
    path = evaluation_path(run_dir)
    return json.loads(path.read_text()) if path is not None and path.exists() else None


def state(run_dir: pathlib.Path) -> str:
    """done (trained and evaluated), partial (started), or todo."""
    if evaluation(run_dir) is not None:
        return "done"
    return "partial" if run_dir.exists() else "todo"


def load_suite(suite_dir: pathlib.Path) -> Suite | None:
    if suite_dir.exists() and not suite_dir.is_dir():
        raise UsageError(f"{suite_dir} is a file, not a suite directory")
    path = suite_dir / "suite.json"
    if not path.exists():
        return None
    try:
        fields = json.loads(path.read_text())
        return Suite(**{**fields, "games": tuple(fields["games"]), "seeds": tuple(fields["seeds"])})
    except (ValueError, TypeError, KeyError) as error:
        raise UsageError(f"{path} is not a suite config ({error})") from None


def check_same(
    saved: Suite | None, requested: Suite, suite_dir: pathlib.Path, remedy: str = "give another --suite_dir"
) -> None:
    """A suite directory holds one agent, preset, frame budget and evaluation, and games of its env families
    (more of them may be added), so its aggregate compares like with like."""
    if saved is None:
        return
    for field in ("agent", "preset", "frames", "eval_episodes"):
        if getattr(saved, field) != getattr(requested, field):
            raise UsageError(
                f"{suite_dir} holds a suite with {field}={getattr(saved, field)}, not {getattr(requested, field)}; "
                + remedy
            )
    held, asked = {family(env) for env in saved.games}, {family(env) for env in requested.games}
    if not asked <= held:
        raise UsageError(
            f"{suite_dir} holds a suite of {', '.join(sorted(held))} games ({saved.suite}), not "
            f"{', '.join(sorted(asked - held))} ({requested.suite}); " + remedy
        )


def merge(saved: Suite | None, requested: Suite) -> Suite:
    """The requested suite extended by the games and seeds already in its directory."""
    if saved is None:
        return requested
    games = saved.games + tuple(g for g in requested.games if g not in saved.games)
    seeds = saved.seeds + tuple(s for s in requested.seeds if s not in saved.seeds)
    return dataclasses.replace(saved, games=games, seeds=seeds)


def save_suite(suite: Suite, suite_dir: pathlib.Path) -> None:
    suite_dir.mkdir(parents=True, exist_ok=True)
    (suite_dir / "suite.json").write_text(json.dumps(dataclasses.asdict(suite), indent=2) + "\n")


def frame_rate(suite: Suite, suite_dir: pathlib.Path) -> tuple[float, str]:
    """Frames per second of one job: measured from the suite's finished runs, else a default."""
    frames = seconds = 0.0
    for job in jobs(suite):
        final = suite_dir / job.name / "final.json"
        if final.exists():
            record = json.loads(final.read_text())
            frames, seconds = frames + record["frames"], seconds + record["wall_time_s"]
    if seconds > 0:
        return frames / seconds, "measured from this suite's finished runs"
    rates = [_default_rate(suite.agent, family(env)) for env in suite.games]
    return min(rates, key=lambda rate: rate[0])  # The slowest family sets the pace of a mixed list.


def _default_rate(agent: str, env_family: str) -> tuple[float, str]:
    if env_family == "toy":
        return TOY_RATE
    return DEFAULT_RATES.get((agent, env_family), UNMEASURED_RATE)


def estimate_s(pending: int, frames: int, rate: float, parallel: int) -> float:
    """Wall time of `pending` jobs of `frames` frames, `parallel` at a time.

    An upper bound for started jobs (counted in full) and optimistic when parallel
    jobs share cores (each is assumed to keep its measured rate)."""
    rounds = -(-pending // parallel)
    return rounds * frames / rate


def remaining_s(finished: list[tuple[float, bool]], remaining: int, parallel: int) -> float | None:
    """The ETA of `remaining` jobs from the finished ones' (seconds, fresh) durations, `parallel` at a time.

    A job resumed from a checkpoint, or only evaluated, takes a fraction of a
    whole job: once a job that started from nothing (fresh) has finished, only
    those set the mean. None before any job has finished.
    """
    seconds = [s for s, fresh in finished if fresh] or [s for s, _ in finished]
    return sum(seconds) / len(seconds) * remaining / parallel if seconds else None


def duration(seconds: float) -> str:
    """`1h05m` or `3m20s`, as the runs print it (`common.run_dir` imports TensorFlow, which the driver avoids)."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
