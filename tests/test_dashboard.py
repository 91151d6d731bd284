"""`reproduce.dashboard`: the committed dashboard is current, and headlines are read from the files (no training)."""

import hashlib
import json
import pathlib

import pytest

from common.errors import UsageError
from common.results import write_csv
from reproduce import dashboard
from reproduce.benchmarks.learning_check import compare


def test_committed_dashboard_is_what_the_results_generate():
    committed = (dashboard.RESULTS / "README.md").read_text()
    assert committed == dashboard.render(), (
        "results/README.md is stale (a result file changed, or reproduce/dashboard.py did): "
        "run `python -m reproduce.dashboard` and commit results/README.md"
    )


def test_committed_dashboard_record_names_the_records_it_was_read_from():
    committed = json.loads((dashboard.RESULTS / "README.provenance.json").read_text())
    assert committed["config"]["sources"] == dashboard.sources(), "rerun `python -m reproduce.dashboard`"
    assert committed["command"] == "python -m reproduce.dashboard" and committed["frames"] is None


def test_every_committed_record_was_written_from_a_clean_commit():
    # A record written from a dirty tree names code no commit holds, so its result cannot be regenerated.
    # Runs' own segments may be dirty (the dashboard marks them); the record that assembled them may not.
    dirty = [
        str(path.relative_to(dashboard.RESULTS))
        for path in sorted(dashboard.RESULTS.rglob("*.provenance.json"))
        if json.loads(path.read_text()).get("dirty", False)
    ]
    assert not dirty, f"written from a dirty tree: {dirty}; rerun their commands from a clean checkout"


def test_the_dashboards_record_is_kept_while_its_sources_hold_and_rewritten_if_it_was_dirty(tmp_path):
    path, record = dashboard.write(tmp_path)
    first, page = json.loads(record.read_text()), path.read_text()
    assert first["config"]["sources"] == {}  # No study has a record here.
    assert first["outputs"] == {"README.md": hashlib.sha256(path.read_bytes()).hexdigest()}
    for dirty in (False, True):
        write(record, json.dumps({**first, "command": "an earlier one", "dirty": dirty}))
        dashboard.write(tmp_path)
        assert (json.loads(record.read_text())["command"] == "an earlier one") == (not dirty)
    assert path.read_text() == page  # Rewritten with its record or not, the page is the same bytes.


def test_the_dashboards_record_lists_only_studies_with_a_record(tmp_path):
    first, second = dashboard.STUDIES[0].stem, dashboard.STUDIES[1].stem
    write(tmp_path / f"{first}.provenance.json", record("0123456789abcdef"))
    write(tmp_path / f"{second}.csv", "a\n1\n")  # Files, but no record: not run.
    assert dashboard.sources(tmp_path) == {f"{first}.provenance.json": "`0123456`"}


def write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def record(commit: str, dirty: bool = False, **extra) -> str:
    return json.dumps({"commit": commit, "dirty": dirty, **extra})


def study(stem: str) -> dashboard.Study:
    return next(s for s in dashboard.STUDIES if s.stem == stem)


def measured_cell(tmp_path: pathlib.Path, stem: str, table: str) -> str:
    """The dashboard's "ours" cell for a study whose table is `table` (recorded at a clean commit)."""
    write(tmp_path / f"{stem}.csv", table)
    write(tmp_path / f"{stem}.provenance.json", record("a" * 40))
    return dashboard.cells(study(stem), tmp_path)[0]


def test_impala_minatar_headline_and_per_run_commits(tmp_path):
    write(
        tmp_path / "impala/full/minatar.csv",
        "game,frames,episodes,impala_last100,ac_lambda_0.8,dqn,at_or_above_ac,seed\n"
        "asterix,5000000,10,30.5,19.7,16.7,True,0\n"
        "breakout,5000000,10,12.25,17.3,10.3,False,0\n",
    )
    runs = {"asterix": None, "breakout": {"commit": "b" * 40, "dirty": True}}
    write(tmp_path / "impala/full/minatar.provenance.json", record("a" * 40, run_provenance=runs))
    ours, paper, commits = dashboard.cells(study("impala/full/minatar"), tmp_path)
    assert ours == "at/above AC(λ) on 1 of 2 games; last-100 return: asterix 30.5, breakout 12.25"
    assert paper == "Young & Tian AC(λ=0.8), 5M frames: asterix 19.7, breakout 17.3"
    assert commits == "runs: `bbbbbbb` (dirty), 1 unrecorded; assembled: `aaaaaaa`"


def test_per_minatar_counts_the_runs_in_against_those_its_table_names_missing(tmp_path):
    """Both wordings of the count: today's table's (5M here) and the archived studies' (2M)."""
    write(
        tmp_path / "per/full/minatar.csv",
        "game,variant,seed,frames,episodes,last100,young_tian_dqn_5M,frames_to_uniform_final,uniform_final\n"
        "breakout,uniform,0,2000000,9,11.0,10.3,100,11.0\n"
        "breakout,rank,0,2000000,9,9.5,10.3,,11.0\n",
    )
    write(
        tmp_path / "per/full/minatar.md",
        "# table\n\nRuns of 2,000,000 frames at or above Y&T's DQN (at 5M): uniform 1 of 1, rank 0 of 1 games.\n"
        "Runs of 5,000,000 frames at or above Y&T's DQN (at 5M), one per game and seed: proportional 1 of 1.\n"
        "Games run: breakout. Not run yet: asterix/uniform, asterix/rank, seaquest/rank.\n",
    )
    write(tmp_path / "per/full/minatar.provenance.json", record("c" * 40))
    ours, paper, commits = dashboard.cells(study("per/full/minatar"), tmp_path)
    assert ours.startswith(
        "2 of 5 runs in; runs at/above Y&T's DQN: uniform 1 of 1, rank 0 of 1 (runs of 2,000,000 frames); "
        "proportional 1 of 1 (runs of 5,000,000 frames); last-100 return:"
    )
    assert ours.endswith("breakout uniform 11.0, breakout rank 9.5")
    assert (paper, commits) == ("Young & Tian DQN, 5M frames: breakout 10.3", "`ccccccc`")


def test_per_minatar_names_each_pooled_budgets_interquartile_means(tmp_path):
    """From minatar_aggregates.csv: the IQM rows only, per budget and seed set, to two places."""
    write(
        tmp_path / "per/full/minatar.csv",
        "game,variant,seed,frames,last100,young_tian_dqn_5M\nbreakout,rank,1,1000000,4.0,10.3\n",
    )
    write(tmp_path / "per/full/minatar.md", "# table\n")
    write(tmp_path / "per/full/minatar.provenance.json", record("c" * 40))
    write(
        tmp_path / "per/full/minatar_aggregates.csv",
        "frames,seeds,variant,statistic,value,ci_low,ci_high\n"
        "1000000,1 2,uniform,median,0.9,0.8,1.0\n"
        "1000000,1 2,uniform,iqm,0.634,0.5968,0.6723\n"
        "1000000,1 2,rank,iqm,0.38,0.35,0.4\n"
        "2000000,0 1,uniform,iqm,0.85,0.8,0.9\n"
        "2000000,0 1,rank,p_above_uniform,0.2,0.2,0.2\n",
    )
    ours, _, _ = dashboard.cells(study("per/full/minatar"), tmp_path)
    assert ours == (
        "1 of 1 runs in; runs at/above Y&T's DQN: ; "
        "pooled IQM of score / Y&T's DQN at 1M (seeds 1, 2): uniform 0.63 [0.60, 0.67], rank 0.38 [0.35, 0.40]; "
        "pooled IQM of score / Y&T's DQN at 2M (seeds 0, 1): uniform 0.85 [0.80, 0.90]; last-100 return: "
        "breakout rank 4.0"
    )


def test_a_side_study_counts_an_extended_run_once_and_names_each_budgets_score(tmp_path):
    write(
        tmp_path / "per/full/step_size.csv",
        "game,variant,seed,frames,last100\n"
        "breakout,uniform,0,2000000,5.0\n"
        "breakout,uniform_small_step,0,2000000,7.0\n"
        "breakout,uniform_small_step,0,5000000,9.5\n",  # The same run, extended.
    )
    write(tmp_path / "per/full/step_size.provenance.json", record("c" * 40))
    ours, _, _ = dashboard.cells(study("per/full/step_size"), tmp_path)
    assert ours == (
        "2 runs; last-100 return at 2M: breakout uniform 5.0, breakout uniform_small_step 7.0; "
        "at 5M: breakout uniform_small_step 9.5"
    )


def test_laser_study_before_its_table_lists_the_jobs_in(tmp_path):
    runs = tmp_path / "laser/full/minatar_runs"
    summary = {"arm": "replay50", "game": "breakout", "seed": 0, "label": "50% replay", "last100": 6.5}
    write(runs / "replay50_breakout_s0.json", json.dumps(summary))
    write(runs / "replay50_breakout_s0.provenance.json", json.dumps({"agent_0": {"commit": "d" * 40}}))
    ours, paper, commits = dashboard.cells(study("laser/full/fig2_replay_fraction"), tmp_path)
    assert ours == "table not written yet: 1 of 4 jobs in `minatar_runs/`; breakout last-100: 50% replay 6.5"
    assert (paper, commits) == ("", "runs: `ddddddd`")


def test_per_atari_lists_its_runs_before_the_table_then_reads_it_beside_the_paper(tmp_path):
    summary = {"game": "pong", "variant": "uniform", "seed": 0, "frames": 4_000_000, "eval": {"mean_return": -3.5},
               "run_provenance": {"commit": "e" * 40}}  # fmt: skip
    write(tmp_path / "per/full/atari_runs/pong_uniform_s0.json", json.dumps(summary))
    write(tmp_path / "per/full/atari_runs/pong_uniform_s0.provenance.json", record("e" * 40))
    ours, paper, commits = dashboard.cells(study("per/full/atari"), tmp_path)
    assert ours == "table not written yet, runs in `atari_runs/`: pong uniform: eval -3.50 at 4,000,000 frames"
    assert (paper, commits) == ("", "runs: `eeeeeee`")

    write(
        tmp_path / "per/full/atari.csv",
        "game,variant,seed,frames,train_last100,eval_episodes,eval_mean_return,eval_human_normalized,per_200M,"
        "per_200M_normalized\n"
        "pong,uniform,0,4000000,-5.0,30,-3.5,0.4328,19.1,1.11\n"
        "pong,proportional,1,4000000,-4.0,30,2.0,0.597,18.9,1.1\n",
    )
    write(tmp_path / "per/full/atari.provenance.json", record("f" * 40, run_provenance={"pong_uniform_s0": None}))
    ours, paper, commits = dashboard.cells(study("per/full/atari"), tmp_path)
    assert ours == (
        "pong uniform: eval -3.5 (43.3% human, 30 episodes from no-op starts) at 4,000,000 frames; training "
        "last-100 -5.0; pong proportional s1: eval 2.0 (59.7% human, 30 episodes from no-op starts) at 4,000,000 "
        "frames; training last-100 -4.0"
    )
    assert paper == (
        "PER Tables 7 and 6, 200M frames, human starts: pong uniform 19.1 (111.0% human), pong proportional 18.9 "
        "(110.0% human)"
    )
    assert commits == "runs: 1 unrecorded; assembled: `fffffff`"


def test_a_study_without_files_is_not_run_yet(tmp_path):
    assert dashboard.cells(study("impala/full/atari"), tmp_path) == dashboard.Cells("not run yet")
    page = dashboard.render(tmp_path)
    assert page.count("| not run yet | — | — |") == len(dashboard.STUDIES)
    assert dashboard.IMPALA_MINATAR_NOTE in page  # Human notes survive whatever the files say.


def test_suite_before_its_aggregate_counts_the_collected_jobs(tmp_path):
    suite = tmp_path / "suites/impala_minatar"
    write(suite / "suite.json", json.dumps({"games": ["minatar:breakout", "minatar:asterix"], "seeds": [0, 1]}))
    for name, commit in (("breakout_s0", "e"), ("asterix_s1", "f")):
        write(suite / name / "final.json", "{}")
        write(suite / name / "provenance.json", record(commit * 40))
    write(suite / "breakout_s1" / "config.json", "{}")  # Started elsewhere, not collected: not counted.
    ours, paper, commits = dashboard.cells(study("suites/impala_minatar/aggregate"), tmp_path)
    assert ours == "aggregate not written yet: 2 of 4 jobs collected (asterix_s1, breakout_s0)"
    assert (paper, commits) == ("", "runs: `fffffff`, `eeeeeee`")


def test_suite_headline_is_the_aggregates_with_their_intervals(tmp_path):
    suite = tmp_path / "suites/impala_minatar"
    write(
        suite / "aggregate.csv",
        "statistic,value,ci_low,ci_high\nmedian,1.2,0.9,1.5\nmean,1.456,1.0,1.9\niqm,1.3,1.1,1.6\n"
        "mean_capped,1.0,1.0,1.0\n",
    )
    # Seed 2 is evaluated on breakout only: listed per game, left out of the aggregates.
    write(suite / "per_game.csv", "game,seed\nbreakout,0\nbreakout,1\nasterix,0\nasterix,1\nbreakout,2\n")
    runs = {"breakout_s0": {"commit": "b" * 40}}
    write(suite / "aggregate.provenance.json", record("a" * 40, seeds=[0, 1], run_provenance=runs))
    ours, paper, commits = dashboard.cells(study("suites/impala_minatar/aggregate"), tmp_path)
    assert ours == (
        "iqm 1.30 [1.10, 1.60]; median 1.20 [0.90, 1.50]; mean 1.46 [1.00, 1.90] (4 runs, seeds 0, 1; "
        "1.00 = Young & Tian's DQN at 5M frames)"
    )
    assert paper == "Young & Tian's DQN at 5M frames: 1.00 by definition"
    assert commits == "runs: `bbbbbbb`; assembled: `aaaaaaa`"


def test_peers_headline_is_our_mean_over_the_peers_best_mean(tmp_path):
    header = "system,config,run,frames_per_s,window_s,load_1min_start,load_1min_end,steal_pct,started_utc,note\n"
    runs = [("ours", "a", 1, 3000), ("peer", "fast", 1, 2000), ("peer", "slow", 1, 900),
            ("ours", "a", 2, 5000), ("peer", "fast", 2, 3000), ("peer", "slow", 2, 1100)]  # fmt: skip
    body = "".join(f"{s},{c},{r},{fps},90,0,0,0,2026-11-22T00:00:00+00:00,\n" for s, c, r, fps in runs)
    write(tmp_path / "impala/benchmarks/peers.csv", header + body)
    write(tmp_path / "impala/benchmarks/peers.provenance.json", record("c" * 40))
    ours, _, commits = dashboard.cells(study("impala/benchmarks/peers"), tmp_path)
    # Ours 4,000 on average, the peer's best configuration 2,500: 1.6x.
    assert ours == (
        "1.60× peer's best (fast): ours 4,000 frames/s, peer fast 2,500, slow 1,000 (means of 2 alternating runs)"
    )
    assert commits == "`ccccccc`"


def test_learning_check_headline_reads_the_csv_the_check_writes(tmp_path):
    reference_curve = {f: 5.0 for f in range(0, 1_000_000, 100_000)}
    summaries = [
        {"frames": 1_000_000, "last100": last100, "curve": {str(f): v for f in reference_curve}}
        for last100, v in ((18.0, 4.0), (22.0, 6.0))
    ]
    rows = compare.comparison_rows(21.0, reference_curve, summaries)
    (tmp_path / "impala/benchmarks").mkdir(parents=True)
    write_csv(tmp_path / "impala/benchmarks/learning_check.csv", rows)
    write(tmp_path / "impala/benchmarks/learning_check.provenance.json", record("d" * 40))
    ours, _, _ = dashboard.cells(study("impala/benchmarks/learning_check"), tmp_path)
    # Mean 20, sd 2.83: 21 is within; the checkpoints' committed 5.0 is the seeds' mean, within.
    assert ours == (
        "committed 21.00 within ours 20.00 ± 2 × 2.83 (last-100; seeds 18.00–22.00); "
        "the curve within at 5 of 5 checkpoints"
    )


def test_per_agent_benchmark_sets_end_to_end_against_both_bounds_when_the_report_has_acting(tmp_path):
    header = "measurement,replay,actors,envs_per_actor,agent_steps_per_s,of_bound,of_acting_bound\n"
    rows = "env,,,,1000,,\nlearner,,,,500,,\nacting,,,1,400,,\n"
    ends = "end_to_end,uniform,0,1,150,0.45,0.68\nend_to_end,rank,1,1,200,0.6,0.9\n"
    write(tmp_path / "per/benchmarks/agent.csv", header + rows + ends)
    write(tmp_path / "per/benchmarks/agent.md", "of the bound 45% and 60% (target >= 80%).\n")
    write(tmp_path / "per/benchmarks/agent.provenance.json", record("a" * 40))
    headline, _, _ = dashboard.cells(study("per/benchmarks/agent"), tmp_path)
    assert headline == (
        "end to end up to 200 agent steps/s (rank, 1 actor process, 1 env(s) each), 45%–60% of the env+learner "
        "bound (target ≥ 80%: missed), 68%–90% of acting then learning"
    )
    # A report from before the acting row (Atari Pong's): the issue's bound alone.
    before = "".join(line.rsplit(",", 1)[0] + "\n" for line in (header + ends).splitlines())
    write(tmp_path / "per/benchmarks/agent.csv", before)
    headline, _, _ = dashboard.cells(study("per/benchmarks/agent"), tmp_path)
    assert headline.endswith("(target ≥ 80%: missed)")
    # Atari Pong's: the default layout's rows at 77-79%, the others above; not "met" on the best row alone.
    partly = "end_to_end,uniform,0,1,97,0.77\nend_to_end,rank,1,1,106,0.84\nend_to_end,uniform,1,4,119,0.95\n"
    write(tmp_path / "per/benchmarks/agent.csv", header.rsplit(",", 1)[0] + "\n" + partly)
    headline, _, _ = dashboard.cells(study("per/benchmarks/agent"), tmp_path)
    assert headline.endswith("77%–95% of the env+learner bound (target ≥ 80%: met by 2 of its 3 rows)")
    every = partly.replace("0.77", "0.81")
    write(tmp_path / "per/benchmarks/agent.csv", header.rsplit(",", 1)[0] + "\n" + every)
    headline, _, _ = dashboard.cells(study("per/benchmarks/agent"), tmp_path)
    assert headline.endswith("(target ≥ 80%: met)")


def test_vtrace_operator_names_a_case_above_the_bound_by_more_than_rounding(tmp_path: pathlib.Path) -> None:
    """A modulus 1e-9 above Theorem 1's bound is a violation (the study's tolerance is 1e-12), not "never above"."""
    header = "mdp,rho_bar,c_bar,error_to_V_pi_rho_bar,modulus,eta,bound\n"
    ours = measured_cell(tmp_path, "impala/full/vtrace_operator", header + f"0,1.0,1.0,1e-10,0.9,0.9,{0.9 - 1e-9!r}\n")
    assert "ABOVE by up to 1.0e-09 its bound" in ours


def test_learning_check_says_outside_when_the_committed_return_is_outside(tmp_path: pathlib.Path) -> None:
    """The CSV's `within` is the text "False": a truthiness test would always say "within" and hide a regression."""
    header = "frames,reference,mean,sd,min,max,within\n"
    rows = "500000,5.0,5.0,1.0,4.0,6.0,True\n1000000,30.0,20.0,2.0,18.0,22.0,False\n"
    ours = measured_cell(tmp_path, "impala/benchmarks/learning_check", header + rows)
    assert ours == (
        "committed 30.00 OUTSIDE ours 20.00 ± 2 × 2.00 (last-100; seeds 18.00–22.00); "
        "the curve within at 1 of 1 checkpoints"
    )


def test_peers_headline_takes_our_best_configuration(tmp_path: pathlib.Path) -> None:
    """With two of our configurations the ratio is our best mean (4,000) over the peer's (2,500), not our worst."""
    header = "system,config,run,frames_per_s\n"
    runs = [("ours", "a", 1, 3000), ("ours", "b", 1, 1000), ("peer", "fast", 1, 2000),
            ("ours", "a", 2, 5000), ("ours", "b", 2, 2000), ("peer", "fast", 2, 3000)]  # fmt: skip
    table = header + "".join(f"{s},{c},{r},{f}\n" for s, c, r, f in runs)
    ours = measured_cell(tmp_path, "impala/benchmarks/peers", table)
    assert ours == "1.60× peer's best (fast): ours 4,000 frames/s, peer fast 2,500 (means of 2 alternating runs)"


def test_throughput_reads_the_raw_row_wherever_it_is_and_a_table_without_the_limit(tmp_path: pathlib.Path) -> None:
    """The raw env's rate is the row named raw (not the first row); a table from before `ratio_to_limit` still reads."""
    rows = (
        "configuration,frames_per_s,ratio_to_raw\n"
        "learner alone,9000,1.5\n"
        "raw env,6000,1.0\n"
        '"end to end, 1 actor",2000,0.333\n'
        '"end to end, 2 actors",3000,0.5\n'
    )
    ours = measured_cell(tmp_path, "impala/benchmarks/throughput", rows)
    assert ours == "end to end 3,000 frames/s (2 actors), 50.0% of the raw env's 6,000; learner alone up to 9,000"


def test_agent_benchmark_at_exactly_the_target_meets_it(tmp_path: pathlib.Path) -> None:
    """`target >= 80%`: a row at 80% of the bound meets it; a strict comparison would report "missed"."""
    header = "measurement,replay,actors,envs_per_actor,agent_steps_per_s,of_bound\n"
    write(tmp_path / "per/benchmarks/agent.md", "of the bound 80% (target >= 80%).\n")
    ours = measured_cell(tmp_path, "per/benchmarks/agent", header + "end_to_end,uniform,1,1,100,0.8\n")
    assert ours.endswith("80%–80% of the env+learner bound (target ≥ 80%: met)")


def test_replay_benchmark_without_cpprb_names_no_ratio(tmp_path: pathlib.Path) -> None:
    """A replay table without the cpprb column (older, or cpprb not installed) must not print "Nonex cpprb"."""
    header = "items,variant,us_per_iteration,rank_overhead_vs_proportional\n"
    table = header + "10000,proportional,786.9,0.187\n10000,rank,934.4,0.187\n"
    ours = measured_cell(tmp_path, "per/benchmarks/replay", table)
    assert ours == "µs per sample+update, proportional / rank-based: 10,000 items 786.9 / 934.4 (+19%)"


def test_failing_propositions_count_those_that_hold(tmp_path: pathlib.Path) -> None:
    """One failing check of three: "2 of 3 checks hold", naming the failing one (the committed run has none)."""
    rows = "proposition,quantity,value,expected,holds\n1,q1,0,0,True\n2,q2,1,0,False\n3,q3,0,0,True\n"
    ours = measured_cell(tmp_path, "laser/full/propositions", rows)
    assert ours == "2 of 3 checks hold; failing: 2: q2"


def test_laser_minatar_counts_the_missing_jobs_in_its_total(tmp_path: pathlib.Path) -> None:
    """2 jobs in and 2 missing is "2 of 4 jobs in": the committed studies have none missing."""
    stem = "laser/full/fig2_replay_fraction"
    rows = "arm,label,game,seed,last100\nreplay0,0% replay,breakout,0,5.77\nreplay50,50% replay,breakout,0,6.56\n"
    write(tmp_path / f"{stem}.csv", rows)
    jobs = {"jobs": ["replay0_breakout_s0", "replay50_breakout_s0"],
            "missing": ["replay87_breakout_s0", "replay100_breakout_s0"]}  # fmt: skip
    write(tmp_path / f"{stem}.provenance.json", record("a" * 40, **jobs))
    ours, _, _ = dashboard.cells(study(stem), tmp_path)
    assert ours == "2 of 4 jobs in; breakout last-100: 0% replay 5.77; 50% replay 6.56"


def test_suite_before_its_aggregate_counts_games_times_seeds(tmp_path: pathlib.Path) -> None:
    """3 games x 2 seeds is 6 jobs (the existing test's 2 x 2 cannot tell games x seeds from games + seeds)."""
    suite = tmp_path / "suites/impala_minatar"
    games = ["minatar:breakout", "minatar:asterix", "minatar:freeway"]
    write(suite / "suite.json", json.dumps({"games": games, "seeds": [0, 1]}))
    write(suite / "breakout_s0" / "final.json", "{}")
    ours, _, _ = dashboard.cells(study("suites/impala_minatar/aggregate"), tmp_path)
    assert ours == "aggregate not written yet: 1 of 6 jobs collected (breakout_s0)"


def test_a_table_without_its_record_is_not_run_yet(tmp_path: pathlib.Path) -> None:
    """The record is what marks a study run (its table may be half-written): no record, "not run yet", no crash."""
    table = "game,impala_last100,ac_lambda_0.8,at_or_above_ac\nbreakout,1,2,False\n"
    write(tmp_path / "impala/full/minatar.csv", table)
    assert dashboard.cells(study("impala/full/minatar"), tmp_path) == dashboard.Cells("not run yet")


def test_a_record_without_a_commit_is_not_recorded() -> None:
    """A record whose commit is null (written outside git) reads "not recorded", not a crash on None[:7]."""
    assert dashboard.commits({"commit": None}) == "not recorded"
    runs = {"a_s0": {"commit": None}, "b_s0": {"commit": "b" * 40}}
    assert dashboard.commits({"commit": "a" * 40, "run_provenance": runs}) == (
        "runs: `bbbbbbb`, 1 unrecorded; assembled: `aaaaaaa`"
    )


def test_the_dashboard_refuses_an_argument_before_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m reproduce.dashboard extra` is a usage error, and results/README.md is not rewritten."""

    def refuse(results: pathlib.Path) -> None:
        raise AssertionError("the dashboard was written")

    monkeypatch.setattr(dashboard, "write", refuse)
    with pytest.raises(UsageError, match=r"unexpected arguments \['extra'\]"):
        dashboard.main(["reproduce.dashboard", "extra"])


def test_write_renders_the_results_directory_it_is_given(tmp_path: pathlib.Path) -> None:
    """`write(results)` pages `results`' files: an empty directory gives a page of studies not run yet."""
    path, _ = dashboard.write(tmp_path)
    assert path.read_text().count("| not run yet | — | — |") == len(dashboard.STUDIES)


def test_per_atari_names_each_papers_score_once_over_seeds(tmp_path: pathlib.Path) -> None:
    """Two seeds of pong uniform share one published score: listed once, not once per seed."""
    header = ("game,variant,seed,frames,train_last100,eval_episodes,eval_mean_return,eval_human_normalized,per_200M,"
              "per_200M_normalized\n")  # fmt: skip
    rows = "pong,uniform,0,4000000,-5.0,30,-3.5,0.4328,19.1,1.11\npong,uniform,1,4000000,-4.0,30,2.0,0.597,19.1,1.11\n"
    write(tmp_path / "per/full/atari.csv", header + rows)
    write(tmp_path / "per/full/atari.provenance.json", record("f" * 40))
    _, paper, _ = dashboard.cells(study("per/full/atari"), tmp_path)
    assert paper == "PER Tables 7 and 6, 200M frames, human starts: pong uniform 19.1 (111.0% human)"


def test_laser_study_before_its_table_takes_a_summary_without_its_record(tmp_path: pathlib.Path) -> None:
    """A job summary whose provenance file is missing is still counted in; the dashboard does not crash on it."""
    summary = {"arm": "replay50", "game": "breakout", "seed": 0, "label": "50% replay", "last100": 6.5}
    write(tmp_path / "laser/full/minatar_runs/replay50_breakout_s0.json", json.dumps(summary))
    ours, _, _ = dashboard.cells(study("laser/full/fig2_replay_fraction"), tmp_path)
    assert ours == "table not written yet: 1 of 4 jobs in `minatar_runs/`; breakout last-100: 50% replay 6.5"


def test_suite_before_its_aggregate_counts_a_job_without_provenance_as_unrecorded(tmp_path: pathlib.Path) -> None:
    """A collected job from before runs recorded provenance is "1 unrecorded", not a FileNotFoundError."""
    suite = tmp_path / "suites/impala_minatar"
    write(suite / "suite.json", json.dumps({"games": ["minatar:breakout"], "seeds": [0]}))
    write(suite / "breakout_s0" / "final.json", "{}")
    _, _, commits = dashboard.cells(study("suites/impala_minatar/aggregate"), tmp_path)
    assert commits == "runs: 1 unrecorded"
