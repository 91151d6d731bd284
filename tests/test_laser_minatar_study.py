"""`reproduce.laser.minatar`'s arms, scores and bad input (the studies' runs are long: not run here)."""

import dataclasses
import json
import pathlib
import shutil
import sys

import pytest

from common import config as config_lib
from common.errors import UsageError
from impala.config import PRESETS as IMPALA_PRESETS
from laser.config import PRESETS, sweep_members
from reproduce import _runs
from reproduce.laser import _studies
from tests.test_cli import AGAINST_ROOT, REPO, assert_one_line_usage_error, run


def resolve(arm: _studies.Arm):
    request = config_lib.Request(preset=arm.preset, overrides=arm.overrides)
    return config_lib.resolve(PRESETS, arm.preset, request, "laser config")


@pytest.mark.parametrize("name", list(_studies.ARMS))
def test_every_arm_is_a_valid_config_that_changes_only_its_overrides(name):
    arm = _studies.ARMS[name]
    config, preset = resolve(arm), PRESETS[arm.preset]
    changed = {f.name for f in dataclasses.fields(config) if getattr(config, f.name) != getattr(preset, f.name)}
    assert changed <= {o.split("=")[0] for o in arm.overrides}
    if arm.sweep:
        assert len(sweep_members(config, _studies.SCALES["full"].sweep_agents)) == 9


def test_the_arms_set_what_the_papers_compare():
    config = {name: resolve(arm) for name, arm in _studies.ARMS.items()}
    fractions = [config[a].replay_fraction for a in _studies.STUDIES["fig2_replay_fraction"].arms]
    assert fractions == [0.0, 0.5, 0.875, 1.0]  # Fig. 2 left.
    capacities = [config[a].replay_capacity for a in _studies.STUDIES["fig2_capacity"].arms]
    assert capacities == sorted(capacities) and len(set(capacities)) == 3
    assert {config[a].replay_fraction for a in _studies.STUDIES["fig2_capacity"].arms} == {0.875}
    no_replay, shared, shared_tr = (config[a] for a in _studies.STUDIES["fig3_shared_sweep"].arms)
    assert (no_replay.replay_fraction, shared.trust_region, shared_tr.trust_region) == (0.0, False, True)
    # §5.1: the sweeps' learning rates are constant; the regular (no-replay) agents keep IMPALA's batch.
    sweeps = [name for name, arm in _studies.ARMS.items() if arm.sweep]
    assert not any(config[a].anneal_learning_rate for a in sweeps)
    assert no_replay.batch_size == IMPALA_PRESETS["minatar"].batch_size < shared.batch_size == shared_tr.batch_size
    baseline, *rho_arms = _studies.STUDIES["figA4_rho_bar"].arms
    assert baseline == "sweep_no_replay"  # App. Fig. 4 left: "worse than pure online learning".
    rho = [(config[a].clip_rho_threshold, config[a].clip_pg_rho_threshold, config[a].trust_region) for a in rho_arms]
    assert rho == [(1.0, 1.0, False), (2.0, 2.0, False), (4.0, 4.0, False)]
    table2 = [config[a] for a in _studies.STUDIES["impala_table2"].arms]
    assert {(c.correction, c.replay_fraction) for c in table2} == {
        (correction, fraction)
        for correction in ("vtrace", "one_step_is", "epsilon", "none")
        for fraction in (0.0, 0.5)  # IMPALA §5.2.2: 50% of each batch from replay.
    }
    assert not any(c.trust_region for c in table2)
    a2 = [config[a] for a in _studies.STUDIES["figA4_prioritized"].arms]
    assert [(c.replay_fraction, c.replay_priority) for c in a2] == [
        (0.0, "uniform"), (0.5, "uniform"), (0.5, "critic_loss"), (0.5, "critic_loss")
    ]  # fmt: skip
    assert [c.importance_sampling_exponent for c in a2[2:]] == [0.5, 1.0]  # App. A.2: partial and full correction.
    assert len(_studies.STUDIES["impala_table2"].games) >= 3


def test_best_curve_takes_the_best_member_in_each_bucket():
    members = [
        {"curve": [{"frames": 0, "mean_return": 1.0}, {"frames": 10, "mean_return": 5.0}]},
        {
            "curve": [
                {"frames": 0, "mean_return": 2.0},
                {"frames": 10, "mean_return": 3.0},
                {"frames": 20, "mean_return": 0.5},
            ]
        },
    ]
    assert _studies.best_curve(members) == [
        {"frames": 0, "mean_return": 2.0},
        {"frames": 10, "mean_return": 5.0},
        {"frames": 20, "mean_return": 0.5},
    ]


def test_sittings_count_an_agents_starts_from_its_provenance():
    segments = [{"frames_at_start": 0}, {"frames_at_start": 30_760}, {"frames_at_start": 420_520}]
    assert _runs.sittings({"run_provenance": {"segments": segments}}) == 3  # Resumed twice.
    assert _runs.sittings({"run_provenance": {"segments": segments[:1]}}) == 1
    assert _runs.sittings({"run_provenance": None}) == 1  # A run that recorded none started once.
    budgets = [{**s, "total_frames": b} for s, b in zip(segments, (2_000_000, 2_000_000, 5_000_000))]
    # A resume that only finished 2M is one of 2M's sittings, as earlier_budgets counts its wall time there.
    assert [_runs.sittings({"run_provenance": {"segments": budgets}}, b) for b in (2_000_000, 5_000_000)] == [2, 3]


@pytest.mark.parametrize(
    "flag, fragments",
    [
        ("--studies=fig9", ["--studies: unknown study 'fig9'", "fig2_replay_fraction"]),
        ("--games=pong", ["--games: unknown minatar game 'pong'", "breakout"]),
        ("--seeds=0", ["--seeds=0", "not a positive integer"]),
        ("--summarise_only --fresh", ["--summarise_only trains nothing, --fresh trains: pass one of them"]),
        (
            "--summarise_only --games=breakout --seed=1 --seeds=2",
            ["present; --games, --seed, --seeds choose or shape runs to train: drop them"],
        ),
        ("--summarise_only --seeds=2", ["every summary present; --seeds chooses or shapes runs to train: drop it"]),
    ],
)
def test_bad_input_is_one_line_exit_2(flag, fragments):
    assert_one_line_usage_error(run(sys.executable, "-m", "reproduce.laser.minatar", *flag.split()), *fragments)


# `--summarise_only` against a results directory (argv[1]) in place of the repository's, with training
# disabled. A subprocess: this script's flags share names with `reproduce.per.minatar`'s, which tests import.
SUMMARISE_ONLY = """
import pathlib, sys
import common.results, reproduce
from common import cli
results = pathlib.Path(sys.argv.pop(1))
reproduce.RESULTS = common.results.RESULTS = results
from reproduce.laser import minatar
minatar.run_job = None  # Training would call it.
cli.run(minatar.main)
"""


def summarise_only(results: pathlib.Path, *flags: str):
    return run(sys.executable, "-c", SUMMARISE_ONLY, str(results), "--profile=full", "--summarise_only", *flags)


def test_summarise_only_tables_every_seed_present_and_trains_nothing(tmp_path):
    """A second seed's summary adds rows to its study; the default --seeds (1) used to leave it out."""
    committed = REPO / "results" / "laser" / "full" / "minatar_runs"
    summaries_dir = tmp_path / "laser" / "full" / "minatar_runs"
    summaries_dir.mkdir(parents=True)
    for arm in _studies.STUDIES["fig2_replay_fraction"].arms:
        shutil.copy(committed / f"{arm}_breakout_s0.json", summaries_dir)
    seed_1 = {**json.loads((committed / "replay50_breakout_s0.json").read_text()), "seed": 1, "last100": 12.34}
    (summaries_dir / "replay50_breakout_s1.json").write_text(json.dumps(seed_1))
    result = summarise_only(tmp_path, "--studies=fig2_replay_fraction")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "laser" / "full" / "fig2_replay_fraction.md").read_text()
    assert "| breakout | 50% replay | 1 | 1,000,000 | 12.34 |" in text
    assert "| breakout | 50% replay | 0 | 1,000,000 |" in text
    assert "Not run yet: replay0_breakout_s1, replay87_breakout_s1, replay100_breakout_s1." in text


def test_summarise_only_keeps_a_clean_record_of_unchanged_tables(tmp_path):
    """Rebuilding unchanged tables rewrote their records with a new commit and date (seen on the committed six),
    so `git status` was dirty after a command that changed nothing."""
    summaries_dir = tmp_path / "laser" / "full" / "minatar_runs"
    summaries_dir.mkdir(parents=True)
    for arm in _studies.STUDIES["fig2_replay_fraction"].arms:
        shutil.copy(REPO / "results" / "laser" / "full" / "minatar_runs" / f"{arm}_breakout_s0.json", summaries_dir)
    assert summarise_only(tmp_path, "--studies=fig2_replay_fraction").returncode == 0
    path = tmp_path / "laser" / "full" / "fig2_replay_fraction.provenance.json"
    # As if an earlier clean commit had written it: only that commit's code made these bytes.
    earlier = {**json.loads(path.read_text()), "commit": "a" * 40, "dirty": False, "date_utc": "2026-01-01"}
    path.write_text(json.dumps(earlier, indent=2) + "\n")
    assert set(earlier["outputs"]) == {f"fig2_replay_fraction.{e}" for e in ("csv", "md", "png")}
    result = summarise_only(tmp_path, "--studies=fig2_replay_fraction")
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text()) == earlier
    assert "wrote " in result.stdout and path.name not in result.stdout


def test_summarise_only_with_no_summaries_is_refused_before_any_directory_is_made(tmp_path):
    result = summarise_only(tmp_path / "results")
    assert_one_line_usage_error(result, "--summarise_only: no job summaries in ", "/full/minatar_runs/")
    assert not (tmp_path / "results").exists()


def test_a_study_keeps_the_seeds_and_games_present_beside_those_a_command_trains():
    study = _studies.STUDIES["impala_table2"]
    summaries = [{"arm": "vtrace_replay", "game": "freeway", "seed": 0},
                 {"arm": "replay50", "game": "seaquest", "seed": 3}]  # fmt: skip
    games, seeds = _studies.tabled(study, summaries, ["breakout"], [1])  # As `--games breakout --seed 1` trains.
    assert (games, seeds) == (["breakout", "freeway"], [0, 1])  # Not replay50's: that arm is not the study's.
    # The study's own games first, in its order, whichever command asks: a rebuild does not reorder a table.
    assert _studies.tabled(study, summaries, ["freeway", "space_invaders", "breakout"], [0])[0] == [
        "breakout", "space_invaders", "freeway"
    ]  # fmt: skip


def test_a_summary_trained_with_other_settings_than_its_arm_now_gives_is_refused(tmp_path):
    """The committed runs hold today's presets; a member whose settings differ is refused, named once per change."""
    from reproduce import _runs

    scale, configs = _studies.SCALES["full"], {}
    for name, arm in (("replay87_breakout_s0", "replay87"), ("sweep_shared_tr_breakout_s0", "sweep_shared_tr")):
        committed = REPO / "results" / "laser" / "full" / "minatar_runs" / f"{name}.json"
        (tmp_path / committed.name).write_text(committed.read_text())
        configs[name] = _studies.job_configs(_studies.ARMS[arm], "breakout", 0, scale)
    assert [len(c) for c in configs.values()] == [1, 9]
    _runs.check_settings(tmp_path, configs)
    sweep = json.loads((tmp_path / "sweep_shared_tr_breakout_s0.json").read_text())
    for agent in sweep["agents"]:  # Every member, as a changed preset would.
        agent["config"]["discount"] = 0.9
    sweep["agents"][3]["config"]["trust_region"] = False
    (tmp_path / "sweep_shared_tr_breakout_s0.json").write_text(json.dumps(sweep))
    with pytest.raises(UsageError) as refused:
        _runs.check_settings(tmp_path, configs)
    assert "sweep_shared_tr_breakout_s0.json was trained with other settings than its preset now gives " in str(
        refused.value
    )
    assert "(discount 0.9 -> 0.99; trust_region False -> True); pass --fresh" in str(refused.value)
    configs["sweep_shared_tr_breakout_s0"] = configs["sweep_shared_tr_breakout_s0"][:2]  # Another sweep size.
    with pytest.raises(UsageError, match=r"\(9 runs -> 2\); pass --fresh"):
        _runs.check_settings(tmp_path, configs)


# Training against a repository root (argv[1]: its results/ and runs/) in place of this one; a job that would
# train prints its name and ends the command instead.
TRAINING = (
    AGAINST_ROOT
    + """
from reproduce.laser import minatar
def run_job(arm, game, seed, scale, run_dir, fresh):
    sys.exit(print(f"trains {run_dir.name}, fresh={fresh}"))
minatar.run_job = run_job
cli.run(minatar.main)
"""
)


def test_a_retraining_stopped_before_it_replaced_the_summary_goes_on_without_fresh(tmp_path):
    """`--fresh` set a job's run aside and trained anew; stopped, the command without --fresh resumes it, as the stop
    says (`_runs.resume_hint`), though its preset changed since the summary. Before, the old summary was kept and
    the new run was never resumed."""
    summaries_dir = tmp_path / "results" / "laser" / "full" / "minatar_runs"
    summaries_dir.mkdir(parents=True)
    for arm in _studies.STUDIES["fig2_replay_fraction"].arms:
        shutil.copy(REPO / "results" / "laser" / "full" / "minatar_runs" / f"{arm}_breakout_s0.json", summaries_dir)
    summary = json.loads((summaries_dir / "replay50_breakout_s0.json").read_text())
    summary["agents"][0]["config"]["discount"] = 0.9  # As a preset changed since would: kept, it is refused.
    (summaries_dir / "replay50_breakout_s0.json").write_text(json.dumps(summary))
    run_dir = tmp_path / "runs" / "reproduce" / "laser_minatar_full" / "replay50_breakout_s0"
    run_dir.mkdir(parents=True)
    flags = _studies.job_flags(_studies.ARMS["replay50"], "breakout", 0, _studies.SCALES["full"])
    command = " ".join(["python -m laser.train", *flags, f"--run_dir={run_dir}"])
    # Its summary's run started 2026-11-22: a run in its directory that started before is not its successor.
    for started, trains in (("2026-11-21T00:00:00+00:00", False), ("2026-12-01T00:00:00+00:00", True)):
        record = {"commit": "abc1234567890", "command": command, "date_utc": started}
        (run_dir / "provenance.json").write_text(json.dumps(record))
        result = run(sys.executable, "-c", TRAINING, str(tmp_path), "--profile=full", "--studies=fig2_replay_fraction")
        if not trains:
            assert_one_line_usage_error(result, "replay50_breakout_s0.json was trained with other settings", "--fresh")
    assert result.returncode == 0, result.stderr
    assert "trains replay50_breakout_s0, fresh=False" in result.stdout
    assert "replay0_breakout_s0: summarised earlier, kept" in result.stdout
    assert f"replay50_breakout_s0: run {run_dir} (commit abc1234567) started after the run of" in result.stdout


# The study's `main` with every job's training a line (stopped, exit 130, at the job argv[2] names) and its
# summary the committed one.
TRAINING_EACH = (
    AGAINST_ROOT
    + """
stop_at = sys.argv.pop(1)
from reproduce.laser import minatar
def run_job(arm, game, seed, scale, run_dir, fresh):
    print(f"trains {run_dir.name}, fresh={fresh}, anew={minatar._runs.retrains_anew(run_dir, fresh)}", flush=True)
    if run_dir.name == stop_at:
        sys.exit(130)
    return [run_dir]
def summarise(arm, game, seed, run_dirs, scale):
    committed = pathlib.Path(minatar.__file__).parents[2] / "results" / "laser" / "full" / "minatar_runs"
    return json.loads((committed / f"{minatar.job_name(arm, game, seed)}.json").read_text())
minatar.run_job, minatar.summarise = run_job, summarise
cli.run(minatar.main)
"""
)


def test_a_fresh_study_stopped_part_way_retrains_the_jobs_it_had_not_reached_without_fresh(tmp_path):
    """`--fresh` is remembered per job (`_runs.ask_fresh`) until its summary is replaced: run again without it
    (as the stop says, so that the stopped run resumes), the jobs not reached retrain rather than keep their
    old summaries. A job two studies share (replay87) trains once: before, `--fresh` trained it twice."""
    summaries_dir = tmp_path / "results" / "laser" / "full" / "minatar_runs"
    summaries_dir.mkdir(parents=True)
    arms = ("capacity20k", "capacity100k", "replay87", "replay0", "replay50", "replay100")
    for arm in arms:
        shutil.copy(REPO / "results" / "laser" / "full" / "minatar_runs" / f"{arm}_breakout_s0.json", summaries_dir)
    runs = tmp_path / "runs" / "reproduce" / "laser_minatar_full"
    study = ["--profile=full", "--studies=fig2_capacity,fig2_replay_fraction", "--games=breakout"]
    fresh = run(sys.executable, "-c", TRAINING_EACH, str(tmp_path), "replay50_breakout_s0", *study, "--fresh")
    assert fresh.returncode == 130, fresh.stderr
    trained = [line.split(",")[0] for line in fresh.stdout.splitlines() if line.startswith("trains ")]
    assert trained == [f"trains {arm}_breakout_s0" for arm in arms[:5]]  # replay87 once, then stopped in replay50.
    assert sorted(p.name for p in runs.glob("*.fresh")) == ["replay100_breakout_s0.fresh", "replay50_breakout_s0.fresh"]
    again = run(sys.executable, "-c", TRAINING_EACH, str(tmp_path), "none", *study)
    assert again.returncode == 0, again.stderr
    trained = [line for line in again.stdout.splitlines() if line.startswith("trains ")]
    # No run started in replay50's directory here (the stand-in made none): it too starts anew.
    assert trained == [f"trains {arm}_breakout_s0, fresh=False, anew=True" for arm in ("replay50", "replay100")]
    assert "replay100_breakout_s0: --fresh asked at " in again.stdout and "it trains anew, and its" in again.stdout
    assert "replay87_breakout_s0: summarised earlier, kept" in again.stdout
    assert not list(runs.glob("*.fresh"))


def test_a_sweeps_retraining_is_a_member_started_after_every_summarised_agent(tmp_path, capsys):
    """A sweep's members record their learner's command, not the job's flags: their start dates decide."""
    name = "sweep_shared_breakout_s0"
    summary = json.loads((REPO / "results" / "laser" / "full" / "minatar_runs" / f"{name}.json").read_text())
    for agent in summary["agents"]:  # As a preset changed since would: a kept summary is refused.
        agent["config"]["discount"] = 0.9
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(summary))
    scale = _studies.SCALES["full"]
    flags = _studies.job_flags(_studies.ARMS["sweep_shared"], "breakout", 0, scale)
    configs = {name: _studies.job_configs(_studies.ARMS["sweep_shared"], "breakout", 0, scale)}
    sweep = tmp_path / name
    for directory in (sweep / "configs", sweep / "member_0", sweep / "member_8"):
        directory.mkdir(parents=True)
    learner = "python -m laser.train --role=learner --replay_address=localhost:1 --run_dir=member_8"
    # Its agents started between 2026-11-23T02:34 and 04:14 (each resumed twice): 03:00 is not after them all.
    # None: stopped before any member's learner started (its configs written): every summarised member had.
    for started, kept in ((None, False), ("2026-11-23T03:00:00+00:00", True), ("2026-12-01T00:00:00+00:00", False)):
        if started:
            record = {"commit": "abc1234567890", "command": learner, "date_utc": started}
            (sweep / "member_8" / "provenance.json").write_text(json.dumps(record))
        assert _runs.summary_kept(path, False, flags, run_dir=sweep) is kept
        if kept:
            with pytest.raises(UsageError, match=r"\(discount 0.9 -> 0.99\); pass --fresh"):
                _runs.check_settings(tmp_path, configs, tmp_path, {name: flags})
        else:  # Not refused for the summary it will replace.
            _runs.check_settings(tmp_path, configs, tmp_path, {name: flags})
    # Named by its first started member's commit: the sweep's directory records none of its own.
    assert f"{name}: run {sweep} (commit abc1234567) started after the run of" in capsys.readouterr().out


# The study's `main` with each job's training a printed line, and no summary or table written.
JOBS = (
    AGAINST_ROOT
    + """
from reproduce.laser import minatar
def run_job(arm, game, seed, scale, run_dir, fresh):
    print(f"trains {run_dir.name}", flush=True)
    return [run_dir]
minatar.run_job = run_job
minatar.summarise = lambda arm, game, seed, run_dirs, scale: {"agents": []}
minatar.write_study = lambda *args: None
cli.run(minatar.main)
"""
)


def trained(tmp_path: pathlib.Path, *flags: str) -> list[str]:
    result = run(sys.executable, "-c", JOBS, str(tmp_path), *flags)
    assert result.returncode == 0, result.stderr
    return [line.removeprefix("trains ") for line in result.stdout.splitlines() if line.startswith("trains ")]


def test_an_empty_games_list_is_refused_not_read_as_the_default(tmp_path):
    """`--games=` trained each study's own games, where `--studies=` is refused."""
    result = run(sys.executable, "-c", JOBS, str(tmp_path), "--profile=full", "--studies=fig2_capacity", "--games=")
    assert_one_line_usage_error(result, "--games= names no ", "; accepted:")
    assert "trains " not in result.stdout


def test_the_quick_profile_trains_a_studys_first_game(tmp_path):
    jobs = trained(tmp_path, "--profile=quick", "--studies=impala_table2")  # IMPALA Table 2 has three games.
    assert all(job.endswith("_breakout_s0") for job in jobs)
    assert len(jobs) == len(_studies.STUDIES["impala_table2"].arms)


def test_the_full_profile_runs_every_study_by_default(tmp_path):
    jobs = trained(tmp_path, "--profile=full")
    assert {arm for arm in _studies.ARMS if any(job.startswith(f"{arm}_") for job in jobs)} == set(_studies.ARMS)


def test_seed_and_seeds_train_seed_to_seed_plus_seeds_minus_1(tmp_path):
    jobs = trained(tmp_path, "--profile=full", "--studies=fig2_capacity", "--seed=2", "--seeds=2")
    arms = ("capacity20k", "capacity100k", "replay87")
    assert sorted(jobs) == sorted(f"{arm}_breakout_s{seed}" for arm in arms for seed in (2, 3))


def test_a_job_two_studies_share_trains_once_with_fresh(tmp_path):
    """Fig. 2's replay87 is in both its studies; with `--fresh` keeping no summary it trained twice."""
    jobs = trained(tmp_path, "--profile=full", "--studies=fig2_capacity,fig2_replay_fraction", "--fresh")
    assert jobs.count("replay87_breakout_s0") == 1 and len(jobs) == len(set(jobs)) == 6


# `summarise` and `study_rows` on agents made from argv[2] (JSON: per agent its returns, wall time and number
# of starts) in run directories under argv[1]; prints the summary and its table row.
SUMMARISE = """
import json, pathlib, sys
from reproduce.laser import _studies, minatar
root, agents = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
scale = _studies.SCALES["quick"]
dirs = []
for i, agent in enumerate(agents):
    d = root / f"member_{i}"
    d.mkdir()
    returns = agent["returns"]
    frames = [round((k + 1) * scale.frames / len(returns)) for k in range(len(returns))]
    lines = ["frames,episode_return"] + [f"{f},{r}" for f, r in zip(frames, returns)]
    (d / "episodes.csv").write_text("\\n".join(lines) + "\\n")
    (d / "config.json").write_text(json.dumps({"learning_rate": 0.001 * (i + 1), "entropy_cost": 0.01}))
    final = {"frames": scale.frames, "wall_time_s": agent["wall"]}
    (d / "final.json").write_text(json.dumps({**final, **agent.get("final", {})}))
    segments = [{"frames_at_start": 1000 * k} for k in range(agent["starts"])]
    (d / "provenance.json").write_text(json.dumps({"commit": "abc", "segments": segments}))
    dirs.append(d)
arm = "sweep_shared" if len(dirs) > 1 else "replay50"
summary = minatar.summarise(arm, "breakout", 0, dirs, scale)
study = _studies.STUDIES["fig3_shared_sweep" if len(dirs) > 1 else "fig2_replay_fraction"]
rows = minatar.study_rows(study, {minatar.job_name(arm, "breakout", 0): summary}, ["breakout"], [0])
print("RESULT " + json.dumps({"summary": summary, "row": rows[0]}))
"""


def summarise(tmp_path: pathlib.Path, agents: list[dict]) -> dict:
    result = run(sys.executable, "-c", SUMMARISE, str(tmp_path), json.dumps(agents))
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def test_a_sweeps_row_is_its_member_with_the_best_last100(tmp_path):
    """Not the best mean return; the row's mean return, sittings and wall times from the right members."""
    agents = [
        {"returns": [9.0] * 150 + [1.0] * 100, "wall": 30.0, "starts": 1},  # Best mean return, poor last 100.
        {"returns": [0.0] * 150 + [5.0] * 100, "wall": 10.0, "starts": 3},  # Best last 100.
        {"returns": [2.0] * 250, "wall": 20.0, "starts": 2},
    ]
    got = summarise(tmp_path, agents)
    summary, row = got["summary"], got["row"]
    assert summary["best_agent"] == 1 and summary["last100"] == 5.0
    assert summary["mean_return"] == row["mean_return"] == 2.0  # Member 1's: (150 * 0 + 100 * 5) / 250.
    assert row["learning_rate"] == 0.002
    assert (row["wall_time_min_s"], row["wall_time_max_s"]) == (10.0, 30.0)
    assert row["sittings"] == 3  # The most any member was started.


def test_last100_is_the_last_hundred_episodes(tmp_path):
    got = summarise(tmp_path, [{"returns": [0.0] * 100 + [4.0] * 100, "wall": 1.0, "starts": 1}])
    assert got["summary"]["last100"] == 4.0 and got["summary"]["mean_return"] == 2.0


def test_an_agents_summary_keeps_the_share_of_replay_its_trust_region_accepted(tmp_path):
    """final.json's `replay_accepted_mean`, where the run had one (a trust region on replay); nothing otherwise."""
    agents = [
        {"returns": [1.0] * 100, "wall": 1.0, "starts": 1, "final": {"replay_accepted_mean": 0.9375}},
        {"returns": [1.0] * 100, "wall": 1.0, "starts": 1},
    ]
    summary = summarise(tmp_path, agents)["summary"]
    assert summary["agents"][0]["replay_accepted_mean"] == 0.9375
    assert "replay_accepted_mean" not in summary["agents"][1]


def test_a_two_member_sweeps_curve_is_the_best_member_in_each_bucket(tmp_path):
    """The quick profile's two-member sweep, not its first member's curve alone."""
    agents = [
        {"returns": [1.0] * 50 + [0.0] * 50, "wall": 1.0, "starts": 1},
        {"returns": [0.0] * 50 + [3.0] * 50, "wall": 1.0, "starts": 1},
    ]
    summary = summarise(tmp_path, agents)["summary"]
    first, second = ([p["mean_return"] for p in a["curve"]] for a in summary["agents"])
    assert [p["mean_return"] for p in summary["curve"]] == [max(a, b) for a, b in zip(first, second)]
    assert first[0] > second[0] and first[-1] < second[-1]  # Each member is best somewhere.


# `run_job` for the quick profile's sweep_shared job in argv[1]/sweep, without --fresh, the sweep's command
# recorded rather than run and its members then finished; prints the commands and the members returned.
RUN_JOB = """
import json, pathlib, sys
from reproduce.laser import _studies, minatar
run_dir = pathlib.Path(sys.argv[1]) / "sweep"
scale, commands = _studies.SCALES["quick"], []
def run_to_completion(command, directory, finished, fresh=False):
    commands.append(command[1:])
    (directory / "configs").mkdir(parents=True, exist_ok=True)
    for i in range(scale.sweep_agents):
        (directory / f"member_{i}").mkdir(parents=True, exist_ok=True)
        (directory / f"member_{i}" / "final.json").write_text("{}")
    assert finished()
minatar._runs.run_to_completion = run_to_completion
members = minatar.run_job(_studies.ARMS["sweep_shared"], "breakout", 0, scale, run_dir, False)
print("RESULT " + json.dumps({"commands": commands, "members": [m.name for m in members]}))
"""


def run_job(tmp_path: pathlib.Path) -> dict:
    result = run(sys.executable, "-c", RUN_JOB, str(tmp_path))
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def _member(sweep: pathlib.Path, i: int, finished: bool):
    (sweep / f"member_{i}").mkdir(parents=True)
    if finished:
        (sweep / f"member_{i}" / "final.json").write_text("{}")


def test_a_new_sweep_starts_with_its_flags_and_a_started_one_resumes(tmp_path):
    (command,) = run_job(tmp_path)["commands"]
    assert command[:2] == ["-m", "laser.sweep"] and "--agents=2" in command and "--actors=1" in command
    assert "--resume" not in command and "--env=minatar:breakout" in command
    (tmp_path / "sweep" / "member_1" / "final.json").unlink()  # Stopped before member 1 finished.
    (command,) = run_job(tmp_path)["commands"]
    assert command == ["-m", "laser.sweep", f"--sweep_dir={tmp_path / 'sweep'}", "--resume"]


def test_a_sweep_is_finished_only_when_each_of_its_members_is(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "configs").mkdir(parents=True)
    _member(sweep, 0, finished=True)  # Member 1 not started yet.
    result = run_job(tmp_path)
    assert [c[-1] for c in result["commands"]] == ["--resume"]
    assert result["members"] == ["member_0", "member_1"]
    assert run_job(tmp_path)["commands"] == []  # Both members finished now: the sweep is kept.


def test_a_sweep_fresh_asked_earlier_is_set_aside_without_fresh(tmp_path):
    """A stopped `--fresh` study's later jobs, asked by `ask_fresh`, kept their old finished sweeps."""
    sweep = tmp_path / "sweep"
    (sweep / "configs").mkdir(parents=True)
    _member(sweep, 0, finished=True)
    _member(sweep, 1, finished=True)
    _runs.ask_fresh([sweep])
    commands = run_job(tmp_path)["commands"]
    assert len(commands) == 1, "the old finished sweep was kept"
    assert "--resume" not in commands[0] and "--agents=2" in commands[0]
    assert len(list(tmp_path.glob("sweep.old-*"))) == 1


def test_a_sweeps_members_are_described_as_the_grid_or_its_first_few():
    """The quick profile's 2-member sweep was described as the whole {1/2, 1, 2} x {1/2, 1, 2} grid."""
    assert _studies.members_text(9) == (
        "9 members (constant learning rate x entropy cost, {1/2, 1, 2} x the preset's, §5.1)"
    )
    text = _studies.members_text(2)
    assert text.startswith("2 members, the first 2 of §5.1's 9 (") and text.endswith("centre first")
    assert [(m.learning_rate, m.entropy_cost) for m in sweep_members(PRESETS["minatar_laser"], 2)][0] == (
        PRESETS["minatar_laser"].learning_rate,
        PRESETS["minatar_laser"].entropy_cost,
    )  # The centre is the first member, as the text says.
