"""The learning check's parts: the committed yardstick, our runs' summaries, the comparison and its report.

No flags here, so tests can import it (`__main__` holds the command).
"""

from __future__ import annotations

import csv
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import reproduce  # noqa: E402
from common.errors import UsageError  # noqa: E402
from reproduce import _runs  # noqa: E402

CHECKPOINTS = 5  # Points of training at which the curves are compared (the last is the end).
SPREAD_SDS = 2.0  # "Within the spread": at most this many of our seeds' standard deviations from their mean.


def committed(results: pathlib.Path, profile: str, game: str) -> tuple[dict, dict[int, float]]:
    """The committed `reproduce.impala.minatar` row for `game`, with where it came from, and its binned curve.

    The curve is {bin start: mean training return in the bin}. The row gains
    `source`: the commit that trained the run, or, for a run older than
    per-run provenance, the commit the study was assembled at.
    """
    directory = results / "impala" / profile
    if not (directory / "minatar.csv").exists():
        raise UsageError(f"no committed {directory / 'minatar.csv'}: run reproduce.impala.minatar --profile {profile}")
    with open(directory / "minatar.csv", newline="") as f:
        rows = {r["game"]: r for r in csv.DictReader(f)}
    if game not in rows:
        raise UsageError(f"--game={game}: {directory / 'minatar.csv'} has no row for it; it has: {', '.join(rows)}")
    with open(directory / "minatar_curves.csv", newline="") as f:
        curve = {int(r["frames"]): float(r["mean_return"]) for r in csv.DictReader(f) if r["run"] == game}
    study = json.loads((directory / "minatar.provenance.json").read_text())
    run = (study.get("run_provenance") or {}).get(game)
    source = (
        f"trained at {run['commit'][:10]}"
        if run
        else f"in the study assembled at {str(study.get('commit'))[:10]}; the run predates per-run provenance"
    )
    return {**rows[game], "source": source}, curve


def bin_frames(curve: dict[int, float]) -> int:
    """The committed curve's bin width (its first two bin starts are one bin apart)."""
    first, second = sorted(curve)[:2]
    return second - first


def checkpoints(frames: int, width: int) -> list[int]:
    """Start frames of the bins that end at 1/CHECKPOINTS, 2/CHECKPOINTS, ... of the run."""
    return [frames * k // CHECKPOINTS - width for k in range(1, CHECKPOINTS + 1)]


def within_spread(reference: float, ours: list[float]) -> dict:
    """Mean, sd (n - 1), min and max of `ours`, and whether `reference` is within SPREAD_SDS sd of the mean."""
    values = np.asarray(ours, dtype=float)
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    return {
        "reference": reference, "mean": round(mean, 3), "sd": round(sd, 3),
        "min": float(values.min()), "max": float(values.max()),
        "within": bool(abs(reference - mean) <= SPREAD_SDS * sd),
    }  # fmt: skip


def comparison_rows(reference_last100: float, reference_curve: dict[int, float], summaries: list[dict]) -> list[dict]:
    """One row per checkpoint bin and one for the last-100 return: the committed value against our seeds'."""
    frames = summaries[0]["frames"]
    width = bin_frames(reference_curve)
    rows = []
    for start in checkpoints(frames, width):
        ours = [s["curve"][str(start)] for s in summaries if str(start) in s["curve"]]
        if start in reference_curve and len(ours) == len(summaries):
            measure = f"mean return, frames {start:,}-{start + width:,}"
            rows.append({"measure": measure, **within_spread(reference_curve[start], ours)})
    last100 = within_spread(reference_last100, [s["last100"] for s in summaries])
    rows.append({"measure": f"last-100 training return at {frames:,} frames", **last100})
    return rows


def summarise(run_dir: pathlib.Path, game: str, seed: int, final: dict, width: int) -> dict:
    """One finished run: its last-100 return, its binned curve {bin start: mean return} and its provenance."""
    episode_frames, returns = _runs.read_episodes(run_dir)
    curve = _runs.binned_curve(game, episode_frames, returns, final["frames"], width)
    return {
        "game": game, "seed": seed, "frames": final["frames"], "episodes": len(returns),
        "last100": round(float(returns[-100:].mean()), 3), "wall_time_s": final.get("wall_time_s"),
        "curve": {str(r["frames"]): r["mean_return"] for r in curve},
        "config": json.loads((run_dir / "config.json").read_text()),
        "run_provenance": _runs.run_provenance(run_dir),
    }  # fmt: skip


def markdown(game: str, reference: dict, summaries: list[dict], rows: list[dict], profile: str) -> str:
    lines = [
        reproduce.heading(f"IMPALA learning check: MinAtar {game}, {len(summaries)} seeds at this commit", profile),
        "",
        f"The yardstick: the committed `reproduce.impala.minatar` run (seed {reference['seed']},",
        f"{reference['source']}). Ours: the same command at the commits below.",
        f'"Within": the committed value is at most {SPREAD_SDS:g} standard deviations (n - 1) of our seeds',
        "from their mean.",
        "",
        "| measure | committed | ours: mean | sd | min-max | within |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['measure']} | {r['reference']:.2f} | {r['mean']:.2f} | {r['sd']:.2f} | {r['min']:.2f}-{r['max']:.2f} "
        f"| {'yes' if r['within'] else 'NO'} |"
        for r in rows
    ]
    lines += ["", "| seed | frames | last-100 | wall time | commit |", "| --- | --- | --- | --- | --- |"]
    for s in summaries:
        record = s["run_provenance"] or {}
        segments = record.get("segments") or [record]
        commits = " then ".join(dict.fromkeys(str(g.get("commit"))[:10] for g in segments))
        commits += " (uncommitted edits)" if any(g.get("dirty") for g in segments) else ""
        minutes = (s["wall_time_s"] or 0.0) / 60
        lines.append(f"| {s['seed']} | {s['frames']:,} | {s['last100']:.2f} | {minutes:.1f} min | {commits} |")
    verdict = rows[-1]
    lines += [
        "",
        f"The committed last-100 return is {'within' if verdict['within'] else 'OUTSIDE'} our seeds' spread "
        f"({verdict['reference']:.2f} against {verdict['mean']:.2f} ± {SPREAD_SDS:g} × {verdict['sd']:.2f}).",
    ]
    return "\n".join(lines) + "\n"


def plot(game: str, reference_curve: dict[int, float], summaries: list[dict], path: pathlib.Path) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    starts = [f for f in sorted(reference_curve) if f < summaries[0]["frames"]]
    ax.plot(starts, [reference_curve[f] for f in starts], color="k", lw=1.5, label="committed (seed 0)")
    for colour, s in enumerate(summaries):
        ours = sorted(int(f) for f in s["curve"])
        label = f"this commit, seed {s['seed']}"
        ax.plot(ours, [s["curve"][str(f)] for f in ours], color=f"C{colour}", lw=1, label=label)
    ax.set(title=f"IMPALA on MinAtar {game}: learning check", xlabel="frames", ylabel="mean training return per bin")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
