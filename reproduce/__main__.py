"""Runs every reproduce script: `python -m reproduce --profile quick`.

Scripts are found, not listed: every module `reproduce/<paper>/<study>.py`
whose name does not start with an underscore, except the benchmark-suite
driver in `reproduce/suite/`, which is not a study. Before it starts, it
prints the profile's expected wall time, the sum of `EXPECTED_S`.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import time

from absl import flags

import reproduce
from common import cli
from common.errors import UsageError

flags.DEFINE_enum("profile", "quick", reproduce.PROFILES, "Profile passed to every script.")
flags.DEFINE_string("only", "", "Run only scripts whose module name contains this text.")
FLAGS = flags.FLAGS

# Measured seconds of each script on the project's 2-core machine: (quick, full).
# Quick: `python -m reproduce --profile quick` at 0c99d52 on a loaded machine
# (load ~8, ~45% CPU steal), so an upper bound. Full: the committed results'
# own wall times (their provenance), and for studies still being assembled the
# measured time per job times the jobs.
EXPECTED_S = {
    "reproduce.impala.atari": (242, 5_524),  # Full: results/impala/full/atari (Pong, 50M frames, 30 episodes).
    "reproduce.impala.minatar": (909, 3_586),  # Full: its 5 runs' final.json, 620-894 s each.
    "reproduce.impala.vtrace_operator": (16, 26),
    # Full: Fig. 2 left 4,175 s and right's 2 more jobs ~2,000 s, App. Fig. 4 right
    # 3,772 s (committed); IMPALA Table 2's 24 jobs ~300-1,100 s each (~5 h);
    # 5 nine-agent sweeps (Fig. 3, App. Fig. 4 left) at ~9 x 1,100 s (~14 h).
    "reproduce.laser.minatar": (401, 80_000),
    "reproduce.laser.propositions": (41, 21),
    "reproduce.per.cliffwalk": (46, 635),
    "reproduce.per.minatar": (348, 140_000),  # Full: 15 runs at the committed run's 9,329 s.
    "reproduce.scores.published_tables": (1, 5),
}


def discover() -> list[str]:
    """Module names of all reproduce scripts, sorted."""
    found = []
    for package in pkgutil.iter_modules(reproduce.__path__):
        if not package.ispkg or package.name.startswith("_") or package.name == "suite":
            continue
        path = [f"{reproduce.__path__[0]}/{package.name}"]
        for module in pkgutil.iter_modules(path):
            if not module.ispkg and not module.name.startswith("_"):
                found.append(f"reproduce.{package.name}.{module.name}")
    return sorted(found)


def main(argv: list[str]) -> None:
    scripts = [s for s in discover() if FLAGS.only in s]
    if not scripts:
        raise UsageError(f"no reproduce script matches --only={FLAGS.only!r}; scripts: {', '.join(discover())}")
    print(f"expected wall time: {expected(scripts, FLAGS.profile)}", flush=True)
    failed = []
    for script in scripts:
        print(f"== {script} --profile {FLAGS.profile}", flush=True)
        start = time.monotonic()
        code = subprocess.call([sys.executable, "-m", script, f"--profile={FLAGS.profile}"])
        print(
            f"== {script}: {'ok' if code == 0 else f'FAILED ({code})'} in {time.monotonic() - start:.0f}s",
            flush=True,
        )
        if code:
            failed.append(script)
    if failed:
        print(f"{len(failed)} of {len(scripts)} reproduce scripts failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"all {len(scripts)} reproduce scripts completed; outputs in results/")


def expected(scripts: list[str], profile: str) -> str:
    """The scripts' expected wall time in `profile`, as measured here (`EXPECTED_S`)."""
    column = reproduce.PROFILES.index(profile)
    known = [EXPECTED_S[s][column] for s in scripts if s in EXPECTED_S]
    hours, minutes = divmod(round(sum(known) / 60), 60)
    unknown = [s for s in scripts if s not in EXPECTED_S]
    note = f"; not measured yet: {', '.join(unknown)}" if unknown else ""
    time_ = f"about {hours} h {minutes} min" if hours or minutes else "under a minute"
    return f"{time_} on the project's 2-core machine (reproduce/__main__.py EXPECTED_S){note}"


if __name__ == "__main__":
    cli.run(main)
