"""`peers.csv` (one row per run) and `peers.md` (the ratio, a summary, every run)."""

from __future__ import annotations

import pathlib
import statistics
from typing import Sequence

from common.results import write_csv
from reproduce.benchmarks.peers.measure import Measurement

# The evidence target: ours at least this many times the peer's best configuration.
TARGET_RATIO = 1.6
COLUMNS = (
    "system", "config", "run", "frames_per_s", "window_s", "load_1min_start", "load_1min_end", "steal_pct",
    "started_utc", "note",
)  # fmt: skip


def means(rows: Sequence[dict]) -> dict[tuple[str, str], list[float]]:
    """(system, config) -> the frames/s of its runs that produced one, in run order."""
    measured: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        rates = measured.setdefault((row["system"], row["config"]), [])
        if row["frames_per_s"] not in (None, ""):
            rates.append(float(row["frames_per_s"]))
    return measured


def ratio_line(rows: Sequence[dict], peer: str, target: float = TARGET_RATIO) -> str:
    """Ours' mean frames/s over that of the peer's best configuration (by mean), against the target."""
    measured = {key: statistics.mean(rates) for key, rates in means(rows).items() if rates}
    ours = [rate for (system, _), rate in measured.items() if system == "ours"]
    peers = {config: rate for (system, config), rate in measured.items() if system == peer}
    if not ours or not peers:
        missing = "ours" if not ours else peer
        return f"**No ratio: {missing} has no measured run.**"
    best = max(peers, key=peers.get)
    ratio = ours[0] / peers[best]
    verdict = "meets" if ratio >= target else "misses"
    return (
        f"**ours / {peer} (best configuration, {best}): {ratio:.2f}x** "
        f"(ours {ours[0]:,.0f} vs {peers[best]:,.0f} frames/s, means over runs; {verdict} the {target}x target)"
    )


def write(directory: pathlib.Path, rows: Sequence[dict], peer: str, command: str, notes: Sequence[str]) -> None:
    """Writes `peers.csv` and `peers.md` into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    write_csv(directory / "peers.csv", [{column: row.get(column, "") for column in COLUMNS} for row in rows])
    (directory / "peers.md").write_text("\n".join(markdown(rows, peer, command, notes)) + "\n")


def markdown(rows: Sequence[dict], peer: str, command: str, notes: Sequence[str]) -> list[str]:
    return [
        f"# IMPALA throughput against {peer} on this machine",
        "",
        "Pong, matched settings: 84x84 grayscale, frame skip 4, 4 stacked frames, the shallow network",
        "(conv 16 8x8/4, conv 32 4x4/2, FC 256, no LSTM), unroll 20, batch 32 unrolls, 2 acting processes.",
        "Frames are env frames (agent steps x 4) that the learner has trained on: ours from `impala.train`'s",
        'progress lines, sample-factory from its "Total num frames" (learner samples x `env_frameskip`).',
        "Each run's rate is that counter's difference over a fixed window after a warm-up; the systems",
        f"alternate, one run of each per round. One run of `{command}`; see `peers.provenance.json`.",
        *[f"\n{note}" for note in notes],
        "",
        ratio_line(rows, peer),
        "",
        "| system | config | runs | mean frames/s | min | max |",
        "| --- | --- | --- | --- | --- | --- |",
        *_summary_rows(rows),
        "",
        "| system | config | run | frames/s | window (s) | 1-min load, start -> end | steal % | started (UTC) | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *[_run_row(row) for row in rows],
    ]


def _summary_rows(rows: Sequence[dict]) -> list[str]:
    lines = []
    for (system, config), rates in means(rows).items():
        if rates:
            lines.append(
                f"| {system} | {config} | {len(rates)} | {statistics.mean(rates):,.0f} | {min(rates):,.0f} "
                f"| {max(rates):,.0f} |"
            )
        else:
            lines.append(f"| {system} | {config} | 0 | - | - | - |")
    return lines


def _run_row(row: dict) -> str:
    rate = f"{float(row['frames_per_s']):,.0f}" if row["frames_per_s"] not in (None, "") else "-"
    window = f"{float(row['window_s']):.0f}" if row["window_s"] not in (None, "") else "-"
    steal = f"{float(row['steal_pct']):.1f}" if row["steal_pct"] not in (None, "") else "-"
    return (
        f"| {row['system']} | {row['config']} | {row['run']} | {rate} | {window} "
        f"| {float(row['load_1min_start']):.2f} -> {float(row['load_1min_end']):.2f} | {steal} "
        f"| {row['started_utc']} | {str(row['note']).replace('|', '/')} |"
    )


def row(system: str, config: str, run: int, m: Measurement) -> dict:
    """A CSV row of one run; a run without a rate leaves it blank and its note says why."""
    return {
        "system": system, "config": config, "run": run,
        "frames_per_s": "" if m.frames_per_s is None else round(m.frames_per_s),
        "window_s": "" if m.window_s is None else round(m.window_s, 1),
        "load_1min_start": round(m.load_1min_start, 2), "load_1min_end": round(m.load_1min_end, 2),
        "steal_pct": "" if m.steal_pct is None else round(m.steal_pct, 1),
        "started_utc": m.started_utc, "note": m.note,
    }  # fmt: skip
