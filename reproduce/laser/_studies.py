"""The arms and studies of `reproduce.laser.minatar`, as data (importable by tests: no flags).

Each arm is the `minatar_laser` preset with `--config_override`s; a study is
a list of arms on some games. Arms with the same name are one job, shared by
every study that lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from common.envs.minatar import GAMES
from laser.config import MAX_SWEEP, PRESETS, LaserConfig, sweep_members
from reproduce import _runs

PRESET = "minatar_laser"
A2_PRESET = "minatar_laser_a2"  # App. A.2's replay settings (Fig. 4 right).


@dataclasses.dataclass(frozen=True)
class Arm:
    label: str
    overrides: tuple[str, ...] = ()  # `--config_override` NAME=VALUE over the preset.
    sweep: bool = False  # A shared-replay sweep (`laser.sweep`) instead of one agent.
    preset: str = PRESET


def _table2_arms() -> dict[str, Arm]:
    """IMPALA Table 2: each correction without replay and with 50% replayed (IMPALA §5.2.2), no trust region."""
    corrections = {"vtrace": "V-trace", "one_step_is": "1-step IS", "epsilon": "epsilon-correction", "none": "none"}
    return {
        f"{name}_{tag}": Arm(
            f"{label}, {tag.replace('_', ' ')}",
            (f"correction={name}", "trust_region=false", f"replay_fraction={fraction}"),
        )  # fmt: skip
        for name, label in corrections.items()
        for tag, fraction in (("no_replay", 0.0), ("replay", 0.5))
    }


_NO_TRUST_REGION = ("trust_region=false",)
# §5.1: "sweeps contain 9 agents with different constant learning rate and entropy cost
# combinations"; the preset, like IMPALA's MinAtar one, anneals the rate to 0.
_SWEEP = ("anneal_learning_rate=false",)
ARMS = {
    "replay0": Arm("0% replay (IMPALA)", ("replay_fraction=0.0",)),
    "replay50": Arm("50% replay", ("replay_fraction=0.5",)),
    "replay87": Arm("87.5% replay, 500K capacity", ()),  # The preset itself.
    "replay100": Arm("100% replay (no online data)", ("replay_fraction=1.0",)),
    "capacity20k": Arm("87.5% replay, 20K capacity", ("replay_capacity=20000",)),
    "capacity100k": Arm("87.5% replay, 100K capacity", ("replay_capacity=100000",)),
    **_table2_arms(),
    # App. A.2 / Fig. 4 right: 50% replay of a smaller replay, uniform or by the critic's loss.
    "a2_no_replay": Arm("no replay", ("replay_fraction=0.0",), preset=A2_PRESET),
    "a2_uniform": Arm("uniform replay", (), preset=A2_PRESET),
    "a2_prioritized_beta05": Arm(
        "prioritized, beta 0.5", ("replay_priority=critic_loss", "importance_sampling_exponent=0.5"), preset=A2_PRESET
    ),
    "a2_prioritized_beta1": Arm(
        "prioritized, beta 1", ("replay_priority=critic_loss", "importance_sampling_exponent=1.0"), preset=A2_PRESET
    ),
    # The no-replay sweep learns from IMPALA's MinAtar batch (B = 8, all online), as atari_laser reads
    # §5.1's "mini-batches of 32 (regular) and 128 (replay)": the regular agents keep IMPALA's batch.
    "sweep_no_replay": Arm("no replay (IMPALA, B = 8)", (*_SWEEP, "replay_fraction=0.0", "batch_size=8"), sweep=True),
    "sweep_shared": Arm("shared replay, no trust region", (*_SWEEP, *_NO_TRUST_REGION), sweep=True),
    "sweep_shared_tr": Arm("shared replay + trust region", _SWEEP, sweep=True),
    "sweep_shared_rho2": Arm(
        "shared replay, rho_bar 2",
        (*_SWEEP, *_NO_TRUST_REGION, "clip_rho_threshold=2.0", "clip_pg_rho_threshold=2.0"),
        sweep=True,
    ),
    "sweep_shared_rho4": Arm(
        "shared replay, rho_bar 4",
        (*_SWEEP, *_NO_TRUST_REGION, "clip_rho_threshold=4.0", "clip_pg_rho_threshold=4.0"),
        sweep=True,
    ),
}


@dataclasses.dataclass(frozen=True)
class Study:
    title: str
    arms: tuple[str, ...]
    games: tuple[str, ...] = ("breakout",)

    @property
    def has_sweep(self) -> bool:
        """Whether an arm is a sweep: its rows are best members and its curves pointwise maxima."""
        return any(ARMS[a].sweep for a in self.arms)


STUDIES = {
    "fig2_replay_fraction": Study(
        "Fig. 2 left: the fraction of each batch replayed", ("replay0", "replay50", "replay87", "replay100")
    ),
    "fig2_capacity": Study(
        "Fig. 2 right: replay capacity at 87.5% replay", ("capacity20k", "capacity100k", "replay87")
    ),
    "fig3_shared_sweep": Study(
        "Fig. 3 left: a sweep sharing one replay", ("sweep_no_replay", "sweep_shared", "sweep_shared_tr")
    ),
    "figA4_rho_bar": Study(
        "App. Fig. 4 left: larger rho_bar instead of a trust region",
        # The no-replay sweep (Fig. 3's, shared) is the figure's reference: "worse than pure online learning".
        ("sweep_no_replay", "sweep_shared", "sweep_shared_rho2", "sweep_shared_rho4"),
    ),
    "figA4_prioritized": Study(
        "App. Fig. 4 right: uniform against prioritized replay",
        ("a2_no_replay", "a2_uniform", "a2_prioritized_beta05", "a2_prioritized_beta1"),
    ),
    "impala_table2": Study(
        "IMPALA Table 2: off-policy corrections without and with replay",
        tuple(_table2_arms()),
        ("breakout", "asterix", "space_invaders"),
    ),
}


@dataclasses.dataclass(frozen=True)
class Scale:
    frames: int  # Fresh frames per agent.
    bin_frames: int  # App. A.3's bucket.
    sweep_agents: int  # Members of a sweep (the paper's Atari sweep: 9).


SCALES = {"quick": Scale(10_000, 2_000, 2), "full": Scale(1_000_000, 50_000, 9)}


def members_text(count: int) -> str:
    """A sweep's members: the 3 x 3 grid (§5.1), or the first `count` of it (`laser.config.sweep_members`)."""
    grid = "constant learning rate x entropy cost, {1/2, 1, 2} x the preset's"
    if count == MAX_SWEEP:
        return f"{count} members ({grid}, §5.1)"
    return f"{count} members, the first {count} of §5.1's {MAX_SWEEP} ({grid}), centre first"


def best_curve(agents: list[dict]) -> list[dict]:
    """App. A.3: the best agent's bucket mean in each bucket."""
    buckets: dict[int, float] = {}
    for agent in agents:
        for point in agent["curve"]:
            buckets[point["frames"]] = max(buckets.get(point["frames"], -np.inf), point["mean_return"])
    return [{"frames": f, "mean_return": r} for f, r in sorted(buckets.items())]


def tabled(study: Study, summaries: Iterable[dict], games: list[str], seeds: list[int]) -> tuple[list, list]:
    """The games and seeds of a study's tables: those asked for, and every other one with a summary of its arms.

    The tables are rebuilt from every summary present, so training a second
    seed (or another game) adds rows to a study rather than replacing it.
    Games come in the study's order, then MinAtar's, whichever command
    wrote the table.
    """
    present = [s for s in summaries if s["arm"] in study.arms]
    order = [*study.games, *(g for g in GAMES if g not in study.games)]
    return sorted(set(games) | {s["game"] for s in present}, key=order.index), sorted(
        set(seeds) | {s["seed"] for s in present}
    )


def job_flags(arm: Arm, game: str, seed: int, scale: Scale) -> list[str]:
    """The flags a job trains with: the preset's, and the arm's `--config_override`s (a sweep's, every member's)."""
    return [
        f"--preset={arm.preset}", f"--env=minatar:{game}", f"--frames={scale.frames}", f"--seed={seed}",
        *(f"--config_override={o}" for o in arm.overrides),
    ]  # fmt: skip


def job_configs(arm: Arm, game: str, seed: int, scale: Scale) -> list[LaserConfig]:
    """The configs a job's agents train with under today's presets: one, or a sweep's members (`laser.sweep`)."""
    config = _runs.job_config(job_flags(arm, game, seed, scale), PRESETS, "laser config")
    return sweep_members(config, scale.sweep_agents) if arm.sweep else [config]
