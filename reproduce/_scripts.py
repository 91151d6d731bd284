"""The reproduce scripts and how long each takes: found, not listed, and measured.

No flags here (unlike the scripts and `reproduce.__main__`), so tests can import it.
"""

from __future__ import annotations

import pkgutil

import reproduce

# Measured seconds of each script on the project's 2-core machine: (quick, full).
# Quick: `python -m reproduce --profile quick` at 862909f from a fresh clone on an
# idle machine, 9 min 47 s in all, on a slow day for this host (its raw Atari env
# ran at a third of its best speed); loaded (0c99d52: load ~8) it took 33 min.
# Full: the committed results' own wall times (their provenance), and for studies
# still being assembled the measured time per job times the jobs. 0: not measured
# yet, which `expected` names instead of counting.
EXPECTED_S = {
    "reproduce.impala.atari": (68, 5_524),  # Full: results/impala/full/atari (Pong, 50M frames, 30 episodes).
    "reproduce.impala.minatar": (206, 3_586),  # Full: its 5 runs' final.json, 620-894 s each.
    "reproduce.impala.vtrace_operator": (2, 26),
    # Full: the committed jobs' own wall times (results/laser/full/*.csv, each job once, its
    # slowest agent): 34 single-agent jobs (Fig. 2, App. Fig. 4 right, IMPALA Table 2's 24)
    # 5.8 h, and 5 nine-member sweeps (Fig. 3, App. Fig. 4 left; a sweep's members train at
    # once) 7.4 h.
    "reproduce.laser.minatar": (190, 48_000),
    "reproduce.laser.propositions": (8, 21),
    # Quick: `python -m reproduce.per.atari --profile quick` at 383b194, idle: 136 s.
    # Full: 2 runs x 3.2M frames one after the other at ~300 frames/s (one process, idle)
    # plus their 30-episode evaluations: an estimate. Measured side by side (`--jobs 2`
    # would do the same; results/per/full/atari_runs): 13,018 s and 13,104 s each.
    "reproduce.per.atari": (136, 22_000),
    "reproduce.per.cliffwalk": (9, 635),
    # Full: 15 runs at one update per step, about 10,300 s each: the median of this study's 15 runs
    # (results/per/full/minatar_runs: 5,373-23,582 s, several beside another run or other work).
    "reproduce.per.minatar": (105, 154_500),
    "reproduce.scores.published_tables": (1, 5),
}


def discover() -> list[str]:
    """Module names of all reproduce scripts, sorted."""
    found = []
    for package in pkgutil.iter_modules(reproduce.__path__):
        if not package.ispkg or package.name.startswith("_") or package.name in ("suite", "benchmarks"):
            continue
        path = [f"{reproduce.__path__[0]}/{package.name}"]
        for module in pkgutil.iter_modules(path):
            if not module.ispkg and not module.name.startswith("_"):
                found.append(f"reproduce.{package.name}.{module.name}")
    return sorted(found)


def expected(scripts: list[str], profile: str) -> str:
    """The scripts' expected wall time in `profile`, as measured here (`EXPECTED_S`)."""
    seconds = {s: expected_s(s, profile) for s in scripts}
    unknown = [s for s, measured in seconds.items() if not measured]
    note = f"; not measured yet: {', '.join(unknown)}" if unknown else ""
    return f"{duration(sum(seconds.values()))} on the project's 2-core machine (reproduce/_scripts.py EXPECTED_S){note}"


def expected_s(script: str, profile: str) -> int:
    """`script`'s measured seconds in `profile`; 0 if not measured yet."""
    return EXPECTED_S.get(script, (0, 0))[reproduce.PROFILES.index(profile)]


def duration(seconds: float) -> str:
    """`about 1 h 5 min`, or `under a minute`."""
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"about {hours} h {minutes} min" if hours or minutes else "under a minute"
