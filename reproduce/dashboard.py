"""The results dashboard, `results/README.md`, generated from the committed result files (issue #11).

    python -m reproduce.dashboard

A hand-written dashboard drifts from the files it summarises; this one is
rebuilt from them, and `tests/test_dashboard.py` fails when the committed copy
differs from what this module generates. Each study is a `Study` in `STUDIES`:
where its files are, and a short function that reads its headline from them.
The paper's number comes from `results/published/` (often already copied into
the study's CSV) or, where it is only printed in a paper, a constant that
cites the table. Commits come from each study's provenance record. A study
whose files are absent is listed as not run yet.

This module lives outside the paper folders: `python -m reproduce` runs every
`reproduce/<paper>/<study>.py`, and the dashboard is not a study.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import json
import pathlib
import re
import sys
import time
from typing import Callable, Iterable, NamedTuple

from common import cli, provenance
from common.errors import UsageError
from common.results import RESULTS
from reproduce import _runs
from reproduce.laser import _studies as laser_studies
from reproduce.per import _atari as per_atari_study

NOT_RUN = "not run yet"


class Cells(NamedTuple):
    """A study's generated cells: our headline, the published number, the commits it came from."""

    ours: str
    paper: str = ""
    commits: str = ""


@dataclasses.dataclass(frozen=True)
class Study:
    """One dashboard row: what the study is, how to run it, and how to read its headline."""

    section: str
    name: str
    command: str
    outputs: str
    scale: str
    stem: str  # Its files are results/<stem>.{csv,md,provenance.json}.
    headline: Callable[[pathlib.Path], Cells]  # results/<stem> -> our number(s) and the paper's.
    # Before the study's table is written: what is already in (jobs committed one by one), or None.
    pending: Callable[[pathlib.Path], Cells | None] | None = None
    note: str = ""  # Human-written; printed under the section's table.


# ---------------------------------------------------------------- reading files


def sibling(base: pathlib.Path, suffix: str) -> pathlib.Path:
    """`results/<stem>` + suffix (stems may contain dots, so not `with_suffix`)."""
    return base.parent / (base.name + suffix)


def read_csv(base: pathlib.Path) -> list[dict[str, str]]:
    with open(sibling(base, ".csv"), newline="") as f:
        return list(csv.DictReader(f))


def read_md(base: pathlib.Path) -> str:
    return sibling(base, ".md").read_text()


def read_record(base: pathlib.Path) -> dict:
    return json.loads(sibling(base, ".provenance.json").read_text())


def md_table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the markdown table whose header row starts with `| first_header |`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = split_row(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, split_row(line))))
    return rows


def split_row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def percent(fraction: str | float) -> str:
    return f"{float(fraction):.1%}"


def tag(record: dict | None) -> str | None:
    """A provenance record's commit as a short hash, marked when the tree had uncommitted edits."""
    if not record or not record.get("commit"):
        return None
    return f"`{record['commit'][:7]}`" + (" (dirty)" if record.get("dirty") else "")


def commits(record: dict) -> str:
    """The commit that wrote the study and, if it was assembled from runs made elsewhere, each run's."""
    top = tag(record) or "not recorded"
    runs = [tag(r) for r in (record.get("run_provenance") or {}).values()]
    if all(r == top for r in runs):
        return top
    return f"runs: {counted(runs)}; assembled: {top}"


def counted(tags: list[str | None]) -> str:
    """`a ×2, b, 1 unrecorded`: each distinct commit once, with how many runs it trained."""
    counts = collections.Counter(t for t in tags if t)
    parts = [f"{t} ×{n}" if n > 1 else t for t, n in counts.items()]
    if None in tags:
        parts.append(f"{tags.count(None)} unrecorded")
    return ", ".join(parts)


def grouped(rows: Iterable[dict[str, str]], key: Callable[[dict], str], value: str) -> dict[str, str]:
    """`value` per `key`, several (seeds) joined by `/`, in the rows' order."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row[value])
    return {k: "/".join(v) for k, v in groups.items()}


# ---------------------------------------------------------------- IMPALA


def vtrace_operator(base: pathlib.Path) -> Cells:
    """App. A: Theorem 1's bound on every case, and how close the fixed point is to V^{pi_rho_bar}."""
    rows = read_csv(base)
    fixed_point = max(float(r["error_to_V_pi_rho_bar"]) for r in rows)
    eta = max(abs(float(r["modulus"]) - float(r["eta"])) for r in rows)
    above = max(float(r["modulus"]) - float(r["bound"]) for r in rows)
    # The tolerance `reproduce.impala.vtrace_operator` judges "never above the bound" by.
    verdict = "never above" if above <= 1e-12 else f"ABOVE by up to {above:.1e}"
    return Cells(
        f"all {len(rows)} (MDP, ρ̄, c̄) cases: ‖M‖ = Theorem 1's η to {eta:.1e}, {verdict} its bound "
        f"1 − (1 − γ)β; fixed point = V^π_ρ̄ to {fixed_point:.1e}"
    )


def impala_minatar(base: pathlib.Path) -> Cells:
    """Games at or above Young & Tian's AC(λ), and each game's last-100 return."""
    rows = read_csv(base)
    above = sum(r["at_or_above_ac"] == "True" for r in rows)
    # The AC(λ) column is results/published/minatar_young2019_5M.csv's (Young & Tian 2019, 5M frames).
    return Cells(
        f"at/above AC(λ) on {above} of {len(rows)} games; last-100 return: "
        + ", ".join(f"{r['game']} {r['impala_last100']}" for r in rows),
        "Young & Tian AC(λ=0.8), 5M frames: " + ", ".join(f"{r['game']} {r['ac_lambda_0.8']}" for r in rows),
    )


def impala_atari(base: pathlib.Path) -> Cells:
    """The evaluation score beside IMPALA Table C.1's shallow expert."""
    rows = read_csv(base)
    # The paper's column is results/published/impala_table_c1.csv's (IMPALA App. C.1, shallow, 200M frames).
    return Cells(
        "; ".join(
            f"{r['game']}: eval {r['eval_mean_return']} ({percent(r['eval_human_normalized'])} human, "
            f"{r['eval_episodes']} episodes) at {int(r['frames']):,} frames; training last-100 "
            f"{r['train_return_last100']}"
            for r in rows
        ),
        "; ".join(
            f"{r['game']}: {r['impala_shallow_200M']} ({percent(r['impala_shallow_200M_normalized'])} human), "
            f"Table C.1 shallow at {int(r['paper_frames']) // 10**6}M frames"
            for r in rows
        ),
    )


def vtrace_benchmark(base: pathlib.Path) -> Cells:
    """Our V-trace's µs per call and its speed-up over `tf.scan`, over the shapes measured."""
    rows = read_csv(base)
    ours = [float(r["ours_xla_while_loop_us"]) for r in rows]
    speedup = [float(r["speedup"]) for r in rows]
    shapes = ", ".join(f"{r['T']}×{r['B']}" for r in rows)
    return Cells(
        f"{min(ours):.1f}–{max(ours):.1f} µs per call, {min(speedup):.2f}–{max(speedup):.2f}× faster than "
        f"tf.scan (T×B: {shapes})"
    )


def impala_throughput(base: pathlib.Path) -> Cells:
    """The best end-to-end rate against the raw env's and the env+learner limit, and the learner alone."""
    rows = read_csv(base)
    raw = next(r for r in rows if r["configuration"].startswith("raw"))
    end_to_end = max((r for r in rows if r["configuration"].startswith("end to end")), key=rate)
    learner = max((r for r in rows if r["configuration"].startswith("learner alone")), key=rate)
    # Tables from before the limit was measured have no ratio_to_limit column.
    limit = f", {percent(end_to_end['ratio_to_limit'])} of the env+learner limit" if "ratio_to_limit" in raw else ""
    return Cells(
        f"end to end {rate(end_to_end):,} frames/s ({end_to_end['configuration'].removeprefix('end to end, ')}), "
        f"{percent(end_to_end['ratio_to_raw'])} of the raw env's {rate(raw):,}{limit}; learner alone up to "
        f"{rate(learner):,}"
    )


def rate(row: dict[str, str]) -> int:
    return int(row["frames_per_s"])


def peers(base: pathlib.Path) -> Cells:
    """Our mean end-to-end rate against each peer configuration's, and the ratio to the peer's best."""
    rates: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for r in read_csv(base):
        rates[r["system"], r["config"]].append(rate(r))
    means = {key: sum(values) / len(values) for key, values in rates.items()}
    ours = max(v for (system, _), v in means.items() if system == "ours")
    peer = {k: v for k, v in means.items() if k[0] != "ours"}
    (best_system, best_config), best = max(peer.items(), key=lambda item: item[1])
    others = ", ".join(f"{config} {v:,.0f}" for (_, config), v in sorted(peer.items(), key=lambda item: -item[1]))
    runs = max(len(values) for values in rates.values())
    return Cells(
        f"{ours / best:.2f}× {best_system}'s best ({best_config}): ours {ours:,.0f} frames/s, {best_system} "
        f"{others} (means of {runs} alternating runs)"
    )


def learning_check(base: pathlib.Path) -> Cells:
    """The committed MinAtar return against our seeds' spread at the end, and how many checkpoints agree."""
    rows = read_csv(base)
    last = rows[-1]
    within = sum(r["within"] == "True" for r in rows[:-1])
    verdict = "within" if last["within"] == "True" else "OUTSIDE"
    return Cells(
        f"committed {float(last['reference']):.2f} {verdict} ours {float(last['mean']):.2f} ± 2 × "
        f"{float(last['sd']):.2f} (last-100; seeds {float(last['min']):.2f}–{float(last['max']):.2f}); "
        f"the curve within at {within} of {len(rows) - 1} checkpoints"
    )


# ---------------------------------------------------------------- suites


def suite_aggregate(base: pathlib.Path) -> Cells:
    """IQM, median and mean of the normalised scores with their 95% bootstrap intervals."""
    rows = {r["statistic"]: r for r in read_csv(base)}
    seeds = [str(seed) for seed in read_record(base)["seeds"]]  # Those evaluated on every game.
    games = [r for r in read_csv(base.parent / "per_game") if r["seed"] in seeds]
    return Cells(
        "; ".join(
            f"{name} {float(rows[name]['value']):.2f} [{float(rows[name]['ci_low']):.2f}, "
            f"{float(rows[name]['ci_high']):.2f}]"
            for name in ("iqm", "median", "mean")
        )
        + f" ({len(games)} runs, seeds {', '.join(seeds)}; 1.00 = Young & Tian's DQN at 5M frames)",
        "Young & Tian's DQN at 5M frames: 1.00 by definition",
    )


def suite_pending(base: pathlib.Path) -> Cells | None:
    """Before the aggregate: the jobs collected so far (`reproduce.suite.collect`)."""
    suite_dir = base.parent
    done = sorted(path.parent.name for path in suite_dir.glob("*/final.json"))
    if not done:
        return None
    suite = json.loads((suite_dir / "suite.json").read_text())
    total = len(suite["games"]) * len(suite["seeds"])
    runs = [
        tag(json.loads(p.read_text())) if p.exists() else None
        for p in (suite_dir / d / "provenance.json" for d in done)
    ]
    return Cells(
        f"aggregate not written yet: {len(done)} of {total} jobs collected ({', '.join(done)})",
        commits=f"runs: {counted(runs)}",
    )


# ---------------------------------------------------------------- prioritized replay


def cliffwalk(base: pathlib.Path) -> Cells:
    """Median updates of uniform replay and each variant's speed-up over it, as `cliffwalk.md` states them."""
    rows = md_table(read_md(base), "figure")
    size = re.compile(r"([\d,]+) \(size ([\d,]+)\)")
    parts = []
    for representation in dict.fromkeys(r["representation"] for r in rows):
        mine = {r["variant"]: r for r in rows if r["representation"] == representation}  # Fig. 1 = Fig. 2 left.
        updates, largest = size.match(mine.pop("uniform")["median updates at the largest size"]).groups()
        speedups = []
        for variant, r in mine.items():
            reached = size.match(r["median updates at the largest size"]).group(2)
            where = "" if reached == largest else f" (at size {reached})"
            speedups.append(f"{variant} {r['speed-up over uniform at the largest size']}{where}")
        parts.append(f"{representation}: uniform {updates} updates at size {largest}; {', '.join(speedups)}")
    # PER §3.1, Fig. 1 and 2: plotted, no numbers printed.
    return Cells("; ".join(parts), "Fig. 1, 2: plotted only")


def per_replay_benchmark(base: pathlib.Path) -> Cells:
    """µs per sample+update, proportional against rank-based, at each replay size."""
    rows = read_csv(base)
    us = {(r["items"], r["variant"]): r["us_per_iteration"] for r in rows}
    overhead = {r["items"]: float(r["rank_overhead_vs_proportional"]) for r in rows}
    cpprb = {r["items"]: r.get("ratio_to_cpprb") for r in rows if r["variant"] == "proportional"}

    def size(n: str) -> str:
        against = f"; {cpprb[n]}x cpprb" if cpprb.get(n) else ""
        return f"{int(n):,} items {us[n, 'proportional']} / {us[n, 'rank']} ({overhead[n]:+.0%}{against})"

    return Cells("µs per sample+update, proportional / rank-based: " + ", ".join(size(n) for n in overhead))


VERDICTS = {"meet": "meets", "miss": "misses"}  # `per.benchmark_memory`'s words, as a headline says them.


def per_memory(base: pathlib.Path) -> Cells:
    """GB per 10^6 transitions with frames stored once, and the target as `memory*.md` judges it."""
    rows = {r["storage"]: r for r in read_csv(base)}
    once, naive = rows["frames_once"], rows["one_step_items"]
    ratio = float(naive["rss_marginal_bytes_per_transition"]) / float(once["rss_marginal_bytes_per_transition"])
    verdict = re.search(r"\b(meet|miss) the issue's target of ([\d.]+ GB)", read_md(base))
    return Cells(
        f"{once['env']}: frames stored once {once['gb_per_1e6_transitions']} GB per 10^6 transitions, "
        f"{ratio:.1f}× less than one-step items ({naive['gb_per_1e6_transitions']} GB)"
        + (f"; {VERDICTS[verdict.group(1)]} the {verdict.group(2)} target" if verdict else "")
    )


def per_agent_benchmark(base: pathlib.Path) -> Cells:
    """End-to-end agent steps/s against the env+learner bound, and rank-based's cost, with `agent.md`'s targets."""
    ends = [r for r in read_csv(base) if r["measurement"] == "end_to_end"]
    best = max(ends, key=lambda r: float(r["agent_steps_per_s"]))
    of_bound = [float(r["of_bound"]) for r in ends]
    text = read_md(base)
    parts = [
        f"end to end up to {float(best['agent_steps_per_s']):,.0f} agent steps/s ({best['replay']}, "
        f"{processes(best['actors'])}{envs_each(best)}), {min(of_bound):.0%}–{max(of_bound):.0%} of the "
        "env+learner bound"
    ]
    bound_target = re.search(r"\(target >= (\d+)%\)", text)
    if bound_target:  # Judged per row (replay x layout): one that misses it is not hidden by the best.
        target = int(bound_target.group(1))
        met = sum(b >= target / 100 for b in of_bound)
        verdict = (
            "met" if met == len(of_bound) else "missed" if not met else f"met by {met} of its {len(of_bound)} rows"
        )
        parts[0] += f" (target ≥ {target}%: {verdict})"
    of_acting = [float(r["of_acting_bound"]) for r in ends if r.get("of_acting_bound")]  # Since 23c1bd4.
    if of_acting:
        parts[0] += f", {min(of_acting):.0%}–{max(of_acting):.0%} of acting then learning"
    costs = re.findall(
        r"- (\d+) actor process\(es\)(?:, (\d+) env\(s\) per actor)?: rank-based costs (-?[\d.]+%) of "
        r"proportional's agent steps/s "
        r"\((meets|misses) the <= (\d+%) target\)",
        text,
    )
    if costs:
        parts.append(
            "rank-based's cost in agent steps/s over proportional: "
            + ", ".join(
                f"{cost} with {processes(n)}{f' at {envs} envs each' if envs else ''} ({verdict} ≤ {target})"
                for n, envs, cost, verdict, target in costs
            )
        )
    return Cells("; ".join(parts))


def envs_each(row: dict) -> str:
    """`, N envs each` for a benchmark row that names its envs per actor."""
    return f", {row['envs_per_actor']} env(s) each" if row.get("envs_per_actor") else ""


def processes(count: str) -> str:
    return f"{count} actor process" + ("" if count == "1" else "es")


def per_minatar(base: pathlib.Path) -> Cells:
    """Runs in (of the game × variant grid `minatar.md` names), each variant against Young & Tian's DQN per
    budget (`minatar.md`'s own count), each run."""
    rows, text = read_csv(base), read_md(base)
    missing = re.search(r"Not run yet: (.*)\.$", text, re.MULTILINE)
    # Today's line ends "..., one per game and seed: uniform 1 of 2."; the archives' "...: uniform 1 of 2 games.".
    verdict = (
        r"^Runs of ([\d,]+) frames at or above Y&T's DQN \(at 5M\)(?:, one per game and seed)?: (.*?)(?: games)?\.$"
    )
    counted = re.findall(verdict, text, re.MULTILINE)
    runs, scores = minatar_scores(rows)
    total = runs + (len(missing.group(1).split(", ")) if missing else 0)
    dqn = {r["game"]: r["young_tian_dqn_5M"] for r in rows}
    # The DQN column is results/published/minatar_young2019_5M.csv's (Young & Tian 2019, 5M frames).
    return Cells(
        f"{runs} of {total} runs in; runs at/above Y&T's DQN: "
        + "; ".join(f"{counts} (runs of {frames} frames)" for frames, counts in counted)
        + "".join(f"; {pooled}" for pooled in pooled_iqm(base.with_name("minatar_aggregates")))
        + f"; {scores}",
        "Young & Tian DQN, 5M frames: " + ", ".join(f"{game} {score}" for game, score in dqn.items()),
    )


def pooled_iqm(base: pathlib.Path) -> list[str]:
    """Per pooled budget, each variant's IQM of score / Y&T's DQN with its 95% interval (`minatar_aggregates.csv`,
    written only when a budget pools); none without the file."""
    if not sibling(base, ".csv").exists():
        return []
    iqm = [r for r in read_csv(base) if r["statistic"] == "iqm"]
    budgets = {(r["frames"], r["seeds"]): [] for r in iqm}
    for r in iqm:
        budgets[r["frames"], r["seeds"]].append(
            f"{r['variant']} {float(r['value']):.2f} [{float(r['ci_low']):.2f}, {float(r['ci_high']):.2f}]"
        )
    return [
        f"pooled IQM of score / Y&T's DQN at {int(frames) / 1e6:g}M (seeds {seeds.replace(' ', ', ')}): "
        + ", ".join(cells)
        for (frames, seeds), cells in budgets.items()
    ]


def per_arms(base: pathlib.Path) -> Cells:
    """Each arm's last-100 return (a MinAtar side study: App. Fig. 12, the update ratio, the step size)."""
    runs, scores = minatar_scores(read_csv(base))
    return Cells(f"{runs} runs; {scores}")


def minatar_scores(rows: list[dict[str, str]]) -> tuple[int, str]:
    """A MinAtar table's runs, and its last-100 returns per game and arm, grouped by budget if it has several.

    A run extended to a larger budget has a row at each (`reproduce.per.minatar`): one run.
    """
    runs = len({(r["game"], r["variant"], r["seed"]) for r in rows})
    budgets = sorted({int(r["frames"]) for r in rows})

    def scores(of: list[dict[str, str]]) -> str:
        return ", ".join(f"{k} {v}" for k, v in grouped(of, lambda r: f"{r['game']} {r['variant']}", "last100").items())

    if len(budgets) == 1:
        return runs, f"last-100 return: {scores(rows)}"
    at = (f"at {b / 1e6:g}M: {scores([r for r in rows if int(r['frames']) == b])}" for b in budgets)
    return runs, "last-100 return " + "; ".join(at)


def per_atari(base: pathlib.Path) -> Cells:
    """Each run's evaluation return (no-op starts) and frames, beside PER's at 200M frames from human starts."""
    rows = read_csv(base)
    # The paper's columns are results/published/per_table7_raw.csv's and per_table6_normalized.csv's.
    paper = dict.fromkeys((r["game"], r["variant"], r["per_200M"], r["per_200M_normalized"]) for r in rows)
    return Cells(
        "; ".join(
            f"{atari_run(r)}: eval {r['eval_mean_return']} ({percent(r['eval_human_normalized'])} human, "
            f"{r['eval_episodes']} episodes from no-op starts) at {int(r['frames']):,} frames; training last-100 "
            f"{r['train_last100']}"
            for r in rows
        ),
        "PER Tables 7 and 6, 200M frames, human starts: "
        + ", ".join(
            f"{game} {variant} {score} ({percent(normalized)} human)" for game, variant, score, normalized in paper
        ),
    )


def atari_run(summary: dict) -> str:
    """`game variant`, and `sN` for a seed other than 0."""
    seed = int(summary["seed"])
    return f"{summary['game']} {summary['variant']}" + (f" s{seed}" if seed else "")


def per_atari_pending(base: pathlib.Path) -> Cells | None:
    """Before `atari.csv`: the job summaries already in `atari_runs/`."""
    summaries = _runs.load_summaries(base.parent / "atari_runs")
    if not summaries:
        return None
    return Cells(
        "table not written yet, runs in `atari_runs/`: "
        + "; ".join(
            f"{atari_run(s)}: eval {s['eval']['mean_return']:.2f} at {s['frames']:,} frames" for s in summaries
        ),
        commits=f"runs: {counted([tag(s['run_provenance']) for s in summaries])}",
    )


# ---------------------------------------------------------------- LASER


def propositions(base: pathlib.Path) -> Cells:
    """Whether every check of Propositions 1-3 holds."""
    rows = read_csv(base)
    failing = [f"{r['proposition']}: {r['quantity']}" for r in rows if r["holds"] != "True"]
    if not failing:
        return Cells(f"all {len(rows)} checks hold")
    return Cells(f"{len(rows) - len(failing)} of {len(rows)} checks hold; failing: {'; '.join(failing)}")


def laser_minatar(base: pathlib.Path) -> Cells:
    """Jobs in (the provenance record's `jobs` and `missing`) and each arm's last-100 return per game."""
    record = read_record(base)
    done, missing = record["jobs"], record["missing"]
    return Cells(f"{len(done)} of {len(done) + len(missing)} jobs in; " + arm_scores(read_csv(base)))


def arm_scores(rows: Iterable[dict]) -> str:
    """`game: arm 1.23; arm 4.56` per game (last-100 return; a sweep's best member)."""
    by_game: dict[str, list[dict]] = {}
    for row in rows:
        by_game.setdefault(row["game"], []).append(row)
    return "<br>".join(
        f"{game} last-100: " + "; ".join(f"{k} {v}" for k, v in grouped(mine, lambda r: r["label"], "last100").items())
        for game, mine in by_game.items()
    )


def laser_minatar_pending(base: pathlib.Path) -> Cells | None:
    """A LASER study whose table is not written yet: its job summaries already in `minatar_runs/`."""
    study = laser_studies.STUDIES[base.name]
    runs = base.parent / "minatar_runs"
    found = [
        path
        for game in study.games
        for arm in study.arms
        for path in sorted(runs.glob(f"{arm}_{game}_s*.json"))
        if re.fullmatch(rf"{re.escape(arm)}_{game}_s\d+\.json", path.name)
    ]
    if not found:
        return None
    summaries = [json.loads(p.read_text()) for p in found]
    records = [sibling(p.with_suffix(""), ".provenance.json") for p in found]
    agents = [a for r in records if r.exists() for a in json.loads(r.read_text()).values()]
    return Cells(
        f"table not written yet: {len(found)} of {len(study.arms) * len(study.games)} jobs in "
        f"`minatar_runs/`; " + arm_scores({**s, "last100": str(s["last100"])} for s in summaries),
        commits=f"runs: {counted([tag(a) for a in agents])}",
    )


def laser_benchmark(base: pathlib.Path) -> Cells:
    """Learner steps/s at each replay fraction; memory of one shared replay against separate ones."""
    values = {(r["configuration"], r["metric"]): r["value"] for r in read_csv(base)}
    fractions = [c.split("=")[1] for c, m in values if m == "learner_steps_per_s"]
    steps = ", ".join(f"{values[f'replay_fraction={f}', 'learner_steps_per_s']} at {f}" for f in fractions)
    return Cells(
        f"learner steps/s at replay fraction: {steps}; {values['separate', 'agents']} separate replays take "
        f"{values['separate/shared', 'rss_growth_ratio']}× one shared replay's memory "
        f"({values['separate/shared', 'separate_gb_at_paper_capacity']} against "
        f"{values['separate/shared', 'shared_gb_at_paper_capacity']} GB at 10M observations each, extrapolated)"
    )


def laser_minatar_study(stem: str) -> Study:
    """One study of `reproduce.laser.minatar`, described from its entry in `reproduce.laser._studies`."""
    study, scale = laser_studies.STUDIES[stem], laser_studies.SCALES["full"]
    sweep = study.has_sweep
    return Study(
        "LASER",
        f"{study.title}, at MinAtar scale",
        f"`python -m reproduce.laser.minatar --profile full --studies {stem}`",
        f"`laser/full/{stem}.{{csv,md,png}}`, one summary per job in `laser/full/minatar_runs/`",
        f"reduced: MinAtar ({', '.join(study.games)}), {scale.frames:,} fresh frames per agent"
        + (f", sweeps of {scale.sweep_agents} agents" if sweep else "")
        + ", 1 seed; assembled across sessions",
        f"laser/full/{stem}",
        laser_minatar,
        laser_minatar_pending,
    )


# ---------------------------------------------------------------- scores


def published_tables(base: pathlib.Path) -> Cells:
    """The medians recomputed from the per-game tables, beside the printed ones, per source table."""
    medians = [r for r in read_csv(base) if r["statistic"] == "median"]
    sources = dict.fromkeys(r["source"] for r in medians)

    def listed(column: str) -> str:
        return "; ".join(
            f"{source}: " + ", ".join(f"{r['column']} {percent(r[column])}" for r in medians if r["source"] == source)
            for source in sources
        )

    return Cells(listed("recomputed"), listed("published"))


# ---------------------------------------------------------------- the registry

IMPALA_MINATAR_NOTE = (
    "Notes on `impala/full/minatar`: asterix and breakout were trained by the study's first\n"
    "launch at commit 86ee6a6 (the MinAtar preset), before training runs recorded their own\n"
    "provenance; the later games list their commits in `minatar.md`. The code between those\n"
    "commits changed logging, shutdown and provenance, not the learning maths."
)

STUDIES: tuple[Study, ...] = (
    Study(
        "IMPALA",
        "App. A: the V-trace operator computed exactly on random MDPs (fixed point V^{π_ρ̄}, c̄ sets only the "
        "speed, Theorem 1's bound)",
        "`python -m reproduce.impala.vtrace_operator --profile {quick,full}`",
        "`impala/{quick,full}/vtrace_operator.{csv,md,png}`",
        "exact; 20 MDPs × 20 states (quick), 200 × 50 (full)",
        "impala/full/vtrace_operator",
        vtrace_operator,
    ),
    Study(
        "IMPALA",
        "IMPALA on the 5 MinAtar games beside Young & Tian's AC(λ)",
        "`python -m reproduce.impala.minatar --profile {quick,full}`",
        "`impala/{quick,full}/minatar.{csv,md,png}`, `minatar_curves.csv`",
        "reduced: MinAtar, 1 seed; 5M frames per game (full)",
        "impala/full/minatar",
        impala_minatar,
        note=IMPALA_MINATAR_NOTE,
    ),
    Study(
        "IMPALA",
        "IMPALA shallow on Atari Pong beside Table C.1",
        "`python -m reproduce.impala.atari --profile {quick,full}`",
        "`impala/{quick,full}/atari.{csv,md,png}`",
        "reduced: 50M of the paper's 200M frames (full), the learning rate annealed over the run's own budget; "
        "1 seed",
        "impala/full/atari",
        impala_atari,
    ),
    Study(
        "IMPALA",
        "V-trace µs per call, ours (XLA while-loop) vs `tf.scan`",
        "`python -m impala.benchmark_vtrace`",
        "`impala/benchmarks/vtrace.csv`",
        "benchmark",
        "impala/benchmarks/vtrace",
        vtrace_benchmark,
    ),
    Study(
        "IMPALA",
        "Table 1 analogue: raw env, learner alone, end to end with 1/2/4 actors",
        "`python -m impala.benchmark_throughput --publish_every 1,4`",  # The committed measurement's flags.
        "`impala/benchmarks/throughput.{csv,md}`",
        "benchmark",
        "impala/benchmarks/throughput",
        impala_throughput,
    ),
    Study(
        "IMPALA",
        "End to end against sample-factory 2.1.1 (APPO), Pong, matched settings, 2 acting processes",
        "`python -m reproduce.benchmarks.peers --peer sample_factory`",
        "`impala/benchmarks/peers.{csv,md}`",
        "benchmark",
        "impala/benchmarks/peers",
        peers,
    ),
    Study(
        "IMPALA",
        "Learning unchanged by the throughput work: MinAtar Breakout at this commit against the committed run",
        "`python -m reproduce.benchmarks.learning_check --profile full`",
        "`impala/benchmarks/learning_check.{csv,md,png}`",
        "reduced: MinAtar, 3 seeds × 5M frames",
        "impala/benchmarks/learning_check",
        learning_check,
    ),
    Study(
        "Prioritized replay",
        "Blind Cliffwalk, Fig. 1 and Fig. 2 (left: tabular greedy; right: linear rank-based and proportional)",
        "`python -m reproduce.per.cliffwalk --profile {quick,full}`",
        "`per/{quick,full}/cliffwalk.{csv,md}`, `cliffwalk_fig{1,2}.png`",
        "the paper's setup; n = 2..10 (quick), 2..16 (full), 10 seeds",
        "per/full/cliffwalk",
        cliffwalk,
    ),
    Study(
        "Prioritized replay",
        "Replay sample+update throughput by size, proportional vs rank-based vs cpprb (in-process C++ baseline)",
        "`python -m per.benchmark_replay`",
        "`per/benchmarks/replay.{csv,md}`",
        "benchmark",
        "per/benchmarks/replay",
        per_replay_benchmark,
    ),
    Study(
        "Prioritized replay",
        "Replay memory per Atari transition, frames stored once vs stacked copies (Pong)",
        "`python -m per.benchmark_memory`",
        "`per/benchmarks/memory.{csv,md}`",
        "benchmark (20K transitions, extrapolated to 10^6)",
        "per/benchmarks/memory",
        per_memory,
    ),
    Study(
        "Prioritized replay",
        "The same on Ms. Pac-Man",
        "`python -m per.benchmark_memory --env atari:ms_pacman`",
        "`per/benchmarks/memory_atari_ms_pacman.{csv,md}`",
        "benchmark (20K transitions, extrapolated to 10^6)",
        "per/benchmarks/memory_atari_ms_pacman",
        per_memory,
    ),
    Study(
        "Prioritized replay",
        "Agent steps/s, updates/s, bytes per transition: uniform, rank-based, proportional; one process and one "
        "actor process; raw env and learner alone",
        "`python -m per.benchmark_agent`",
        "`per/benchmarks/agent.{csv,md}`",
        "benchmark",
        "per/benchmarks/agent",
        per_agent_benchmark,
    ),
    Study(
        "Prioritized replay",
        "The same on Atari Pong (the Nature network's update dominates)",
        "`python -m per.benchmark_agent --env atari:pong`",
        "`per/benchmarks/agent_atari_pong.{csv,md}`",
        "benchmark",
        "per/benchmarks/agent_atari_pong",
        per_agent_benchmark,
    ),
    Study(
        "Prioritized replay",
        "Uniform, rank-based and proportional Double DQN on the 5 MinAtar games beside Young & Tian's DQN "
        "(PER Fig. 4/7 analogue; App. Fig. 10 from the same runs)",
        "`python -m reproduce.per.minatar --profile full "
        "[--games G --variants V --frames N [--extend] | --summarise_only]`",
        "`per/full/minatar.{csv,md,png}`, `minatar_aggregates.{csv,png}` (pooled over the games), `fig10_<game>.png`, "
        "one summary per run in `per/full/minatar_runs/`",
        "reduced: MinAtar, 2M frames per run (the profile's; `--extend` trains runs on toward Young & Tian's 5M), "
        "seeds 0 and 1 on every game and variant, and runs of 1M (seeds 1 and 2) where the table lists them; "
        "assembled across sessions (the table lists "
        "the runs still missing); restarted at Young & Tian's ratio and optimizer (one update per step, no "
        "momentum), the earlier studies archived below",
        "per/full/minatar",
        per_minatar,
    ),
    Study(
        "Prioritized replay",
        "App. Fig. 12: rank-based replay with full and with no importance-sampling correction, beside uniform and "
        "annealed β",
        "`python -m reproduce.per.minatar --profile full --games G --variants rank_full_is,rank_no_is`",
        "`per/full/fig12.{csv,md,png}`",
        "reduced: MinAtar, the profile's 2M frames per run or fewer (each score names its budget), 1 seed",
        "per/full/fig12",
        per_arms,
    ),
    Study(
        "Prioritized replay",
        "Uniform Double DQN at PER's replay ratio (one update per 4 agent steps) beside Young & Tian's (one per "
        "step, the presets')",
        "`python -m reproduce.per.minatar --profile full --games G --variants uniform_every_4`",
        "`per/full/update_ratio.{csv,md,png}`",
        "reduced: MinAtar, 2M frames per run, 1 seed",
        "per/full/update_ratio",
        per_arms,
    ),
    Study(
        "Prioritized replay",
        "Uniform Double DQN at the prioritized variants' step size (a quarter of uniform's), and the prioritized "
        "variants at uniform's, beside all three variants",
        "`python -m reproduce.per.minatar --profile full --games G --variants "
        "uniform_small_step|rank_full_step|proportional_full_step [--frames N --extend]`",
        "`per/full/step_size.{csv,md,png}`",
        "reduced: MinAtar, the profile's 2M frames per run or fewer (each score names its budget), seed 0, a second "
        "seed where the table lists one",
        "per/full/step_size",
        per_arms,
    ),
    *(
        Study(
            "Prioritized replay",
            f"Archived, superseded: {name}, {why}; `per/archive/{archive}/README.md`)",
            command,
            f"`per/archive/{archive}/{stem}.{{csv,md,png}}`",
            f"reduced: MinAtar, 2M frames per run{extra}, 1 seed; not the current presets",
            f"per/archive/{archive}/{stem}",
            headline,
        )
        for archive, why, command, studies in (
            (
                "rmsprop_momentum",
                "with RMSProp momentum 0.95 (Young & Tian used none",
                "`git checkout e4a0de3`, then `python -m reproduce.per.minatar --profile full` (trains nothing)",
                (
                    (
                        "uniform, rank-based and proportional Double DQN on the 5 MinAtar games",
                        "minatar",
                        per_minatar,
                        "",
                    ),
                    ("App. Fig. 12, rank-based replay with full and with no IS correction", "fig12", per_arms, ""),
                    ("uniform Double DQN at Young & Tian's replay ratio", "update_ratio", per_arms, ""),
                    (
                        "uniform Double DQN at the prioritized variants' step size",
                        "step_size",
                        per_arms,
                        " (two runs also to 5M)",
                    ),
                ),
            ),
            (
                "update_every_4",
                "from the study at PER's one update per 4 agent steps (the presets now update every step, as Young "
                "& Tian",
                "at `b1ea666` with the archived summaries in `per/full/minatar_runs/`, `python -m "
                "reproduce.per.minatar --profile full --games asterix,seaquest --variants uniform,uniform_every_step` "
                "(trains nothing; the archive's README)",
                (
                    ("uniform Double DQN on Asterix and Seaquest", "minatar", per_minatar, ""),
                    (
                        "uniform Double DQN on Asterix at Young & Tian's replay ratio beside PER's",
                        "update_ratio",
                        per_arms,
                        "",
                    ),
                ),
            ),
        )
        for name, stem, headline, extra in studies
    ),
    Study(
        "Prioritized replay",
        "Uniform against proportional (and rank-based) Double DQN on Atari beside PER Tables 6/7: ours from no-op "
        "starts, the paper's from human starts",
        "`python -m reproduce.per.atari --profile full "
        "[--games G --variants V --frames N [--extend] | --summarise_only]`",
        "`per/full/atari.{csv,md,png}`, one summary per run in `per/full/atari_runs/`",
        f"reduced: {per_atari_study.FRAMES['full']:,} (the profile's; `--frames` sets another) of the paper's 200M "
        "frames per run, 1 seed, no-op starts; assembled across sessions, runs trained on with `--extend`",
        "per/full/atari",
        per_atari,
        per_atari_pending,
    ),
    Study(
        "LASER",
        "Propositions 1–3 computed exactly on tabular MDPs (V-trace's fixed point V^π̃; App. C's counterexample; "
        "eq. 13's bound vs the exact flip)",
        "`python -m reproduce.laser.propositions --profile {quick,full}`",
        "`laser/{quick,full}/propositions.{csv,md}`, `propositions_prop{1,2,3}.png`",
        "exact",
        "laser/full/propositions",
        propositions,
    ),
    *(laser_minatar_study(stem) for stem in laser_studies.STUDIES),
    Study(
        "LASER",
        "Learner steps/s at 0% and 87.5% replay; memory of one shared replay vs 9 separate ones",
        "`python -m laser.benchmark`",
        "`laser/benchmarks/benchmark.{csv,md}`",
        "benchmark",
        "laser/benchmarks/benchmark",
        laser_benchmark,
    ),
    Study(
        "Suites",
        "IMPALA on the 5 MinAtar games × 3 seeds, 2M frames each, scored by the suite driver (IQM and "
        "stratified-bootstrap intervals, rliable)",
        "`python -m reproduce.suite --agent impala --preset minatar --suite minatar --seeds 3 --frames 2e6`, then "
        "`reproduce.suite.collect` and `reproduce.suite.aggregate` (README, Benchmark suites)",
        "`suites/impala_minatar/{per_game,aggregate}.csv`, `aggregate.{md,png}`, `per_game.png`, one folder per run",
        "reduced: MinAtar, 2M frames per run, 3 seeds",
        "suites/impala_minatar/aggregate",
        suite_aggregate,
        pending=suite_pending,
    ),
    Study(
        "Scores",
        "The papers' aggregates recomputed from their per-game tables (IMPALA Table 4, PER Table 1, LASER medians)",
        "`python -m reproduce.scores.published_tables`",
        "`scores/published_tables.{csv,md}`",
        "exact (no training)",
        "scores/published_tables",
        published_tables,
    ),
)

# ---------------------------------------------------------------- the page

INTRO = """\
# Results dashboard

Generated by `python -m reproduce.dashboard` from the committed result files: do not edit
it by hand. The studies, and how each headline is read from its files, are listed in
`reproduce/dashboard.py`; `tests/test_dashboard.py` fails when this page is stale.

Everything here was measured by a command in this repository on the project's
2-core, 24 GB, CPU-only machines. Each folder holds a provenance record beside
its outputs: commit (and whether the tree was dirty when the run started),
command, config, seeds, frames, wall time and machine. `results/published/`
holds the papers' own numbers, which we did not measure.

`quick/` folders are written by `make reproduce` (minutes, smoke scale) and are not
tracked by git, so a quick run leaves the tree clean and is never mistaken for a result; `full/`
folders by `make reproduce PROFILE=full` or the script named below (hours).
Reduced-scale runs say so in their own tables.

Columns: `ours` is the headline of the study's `full/` (or `benchmarks/`) files; `published`
the paper's number where one is printed (from `results/published/` or the table named);
`commit` the short hash of the commit the outputs were written at, and, for a study assembled
from runs trained at other commits, each run's commit (×N: how many runs; "dirty": the tree had
uncommitted edits). A study with no files yet says "not run yet".
"""

HEADER = (
    "| study | command | outputs | scale | ours | published | commit |\n| --- | --- | --- | --- | --- | --- | --- |"
)


def cells(study: Study, results: pathlib.Path) -> Cells:
    """The study's generated cells, or "not run yet" when its provenance record is absent."""
    base = results / study.stem
    if sibling(base, ".provenance.json").exists():
        return study.headline(base)._replace(commits=commits(read_record(base)))
    pending = study.pending(base) if study.pending else None
    return pending or Cells(NOT_RUN)


def escape(text: str) -> str:
    """A table cell: `|` would end it, so it is escaped; an empty cell shows a dash."""
    return text.replace("|", "\\|") if text else "—"


def row(study: Study, results: pathlib.Path) -> str:
    ours, paper, commit = cells(study, results)
    fields = (study.name, study.command, study.outputs, study.scale, ours, paper, commit)
    return "| " + " | ".join(escape(f) for f in fields) + " |"


def render(results: pathlib.Path = RESULTS) -> str:
    """The whole dashboard, from the files under `results`."""
    parts = [INTRO]
    for section in dict.fromkeys(s.section for s in STUDIES):
        mine = [s for s in STUDIES if s.section == section]
        parts.append(f"## {section}\n\n{HEADER}\n" + "\n".join(row(s, results) for s in mine) + "\n")
        parts += [s.note + "\n" for s in mine if s.note]
    return "\n".join(parts)


def sources(results: pathlib.Path = RESULTS) -> dict[str, str]:
    """Each provenance record the dashboard reads (path under `results`), with the commits its row names."""
    found = {}
    for study in STUDIES:
        record = sibling(results / study.stem, ".provenance.json")
        if record.exists():
            found[str(record.relative_to(results))] = commits(read_record(results / study.stem))
    return found


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise UsageError(f"unexpected arguments {argv[1:]}: the dashboard takes none")
    path, record = write(RESULTS)
    print(f"wrote {path}; its record: {record}", file=sys.stderr)


def write(results: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Writes `results/README.md` and its record (rewritten only when a source or the page changed); returns both."""
    start = time.time()
    path = results / "README.md"
    path.write_text(render(results))
    # Its own record: no number is measured here, each is copied from a study whose record is listed.
    record = provenance.write_derived(
        results, "README", config={"sources": sources(results)}, seeds=[], frames=None, wall_time_s=0.0,
        scale="derived: the committed results' headlines, nothing trained or timed",
        extra={"assembled_in_s": round(time.time() - start, 1)},
    )  # fmt: skip
    return path, record


if __name__ == "__main__":
    cli.run(main)
