"""LASER's experiments at MinAtar scale (Schmitt, Hessel & Simonyan 2020, §5.3-5.4, App. A.2; IMPALA Table 2).

The paper's figures are DMLab-30 sweeps of billions of frames; these are
their reduced-scale analogues on MinAtar, with the `minatar_laser` preset
(B = 16, 87.5% replay, 500K observations, trust region) and each arm's
changes to it. Every arm trains the same number of fresh frames.

    python -m reproduce.laser.minatar --profile full --studies fig2_replay_fraction
    python -m reproduce.laser.minatar --profile full --studies impala_table2 --games breakout,asterix
    python -m reproduce.laser.minatar --profile quick      # smoke scale: Fig. 2 left and Fig. 3, tiny budgets

Studies (results/laser/<profile>/<stem>.{csv,md,png,provenance.json}):

* `fig2_replay_fraction`: Fig. 2 left, 0 / 50 / 87.5 / 100% of each batch replayed;
* `fig2_capacity`: Fig. 2 right, the replay's capacity at 87.5%;
* `fig3_shared_sweep`: Fig. 3 left, a sweep sharing one replay without and
  with the trust region, and the no-replay sweep; the best member per point;
* `figA4_rho_bar`: App. Fig. 4 left, the shared sweep without trust region at
  rho_bar in {1, 2, 4}, beside the no-replay sweep;
* `figA4_prioritized`: App. Fig. 4 right (preset `minatar_laser_a2`: 50%
  replay), no replay, uniform, and prioritized by the critic's loss at
  beta 0.5 and 1;
* `impala_table2`: IMPALA Table 2, V-trace, 1-step IS, epsilon-correction and
  no correction, without replay and with 50% of each batch replayed.

A study is assembled from jobs (arm x game x seed) that may run in different
sessions or on different machines: each finished job writes a summary (score,
binned curve, config, the run's own provenance) to
results/laser/<profile>/minatar_runs/ (committed for the full profile; the quick
profile's results/laser/quick/ is left out of git) and is not trained again; a
started one is resumed from runs/reproduce/laser_minatar_<profile>/.
Jobs with the same arm are shared between studies (the 87.5% arm is also
Fig. 2 right's 500K capacity). The tables and figures are rebuilt from every
summary present and name the jobs still missing.

Scores follow App. A.3: training returns averaged within buckets of frames,
and for a sweep the best member in each bucket.

The sweeps' choices where the paper is silent or about other scales: members'
learning rates are constant (§5.1; the preset anneals them); the no-replay
sweep keeps IMPALA's MinAtar batch (B = 8), the replay sweeps the preset's 16
(2 online), as `atari_laser` reads §5.1's batches of 32 and 128; the 500K
replay is 5.6% of a sweep's 9M frames (the paper: 10M of 200M, 5%). With
summed losses and the entropy taken on online unrolls only (§5.1), an entropy
cost weighs 8x less against the policy gradient at 87.5% replay than without
replay. The nine members share two cores unpaced, so they do not run "at
identical speed" (§5.1); the tables give the spread of their wall times.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from absl import flags  # noqa: E402

import reproduce  # noqa: E402
from common import cli, provenance  # noqa: E402
from common.envs.minatar import GAMES  # noqa: E402
from common.errors import check_choices  # noqa: E402
from reproduce import _runs  # noqa: E402
from reproduce.laser._studies import (  # noqa: E402
    A2_PRESET,
    ARMS,
    PRESET,
    SCALES,
    STUDIES,
    Arm,
    Scale,
    Study,
    best_curve,
    job_configs,
    job_flags,
    members_text,
    tabled,
)

reproduce.define_flags()
# The quick profile's smoke run covers both paths (lone agents, a shared-replay sweep) in a few minutes.
QUICK_STUDIES = ("fig2_replay_fraction", "fig3_shared_sweep")
flags.DEFINE_list(
    "studies", None, f"Studies to run (default: all; quick: {', '.join(QUICK_STUDIES)}): {', '.join(STUDIES)}."
)
flags.DEFINE_list("games", None, "MinAtar games (default: each study's own; quick: its first).")
flags.DEFINE_integer("seeds", 1, "Seeds per arm and game: seed, seed + 1, ...", lower_bound=1)
flags.DEFINE_bool("summarise_only", False, "Rebuild the studies from the summaries present; train nothing.")
FLAGS = flags.FLAGS
# The flags that choose the jobs to train, which `--summarise_only` (every summary present) refuses.
CHOOSING = ("games", "seed", "seeds")


def job_name(arm: str, game: str, seed: int) -> str:
    return f"{arm}_{game}_s{seed}"


def run_job(arm: Arm, game: str, seed: int, scale: Scale, run_dir: pathlib.Path, fresh: bool) -> list[pathlib.Path]:
    """Trains (or resumes, or keeps) one job; returns its agents' run directories.

    `fresh`: the job's run (or sweep) directory, if any, is moved aside and it
    trains anew; so too without it, if an earlier `--fresh` asked it and its
    retraining has not started (`_runs.retrains_anew`).
    """
    train_flags = job_flags(arm, game, seed, scale)
    if not arm.sweep:
        _runs.train("laser.train", run_dir, train_flags, fresh)
        return [run_dir]
    if _runs.retrains_anew(run_dir, fresh):
        _runs.set_aside(run_dir)
    members = lambda: _runs.sweep_members(run_dir)  # noqa: E731
    finished = lambda: len(members()) == scale.sweep_agents and all((m / "final.json").exists() for m in members())  # noqa: E731
    if not finished():
        command = [sys.executable, "-m", "laser.sweep", f"--sweep_dir={run_dir}"]
        if (run_dir / "configs").exists():
            command += ["--resume"]
        else:
            # One actor process per member (the preset has 2): 9 members' processes fit 2 cores and 24 GB.
            command += [*train_flags, f"--agents={scale.sweep_agents}", "--actors=1"]
        _runs.run_to_completion(command, run_dir, finished, fresh)
    return members()


def summarise_agent(run_dir: pathlib.Path, scale: Scale) -> dict:
    frames, returns = _runs.read_episodes(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    final = json.loads((run_dir / "final.json").read_text())
    return {
        "frames": final["frames"], "wall_time_s": final["wall_time_s"],
        "episodes": len(returns),
        "last100": round(float(returns[-100:].mean()), 3),
        "mean_return": round(float(returns.mean()), 3),  # Over the whole run: data efficiency.
        "learning_rate": config["learning_rate"], "entropy_cost": config["entropy_cost"],
        "curve": _runs.binned_curve("", frames, returns, scale.frames, scale.bin_frames),
        # With a trust region on replay: the share of replayed steps it accepted, over the last sitting's updates.
        **({"replay_accepted_mean": final["replay_accepted_mean"]} if "replay_accepted_mean" in final else {}),
        "config": config,
        "run_provenance": _runs.run_provenance(run_dir),
    }  # fmt: skip


def summarise(arm_name: str, game: str, seed: int, run_dirs: list[pathlib.Path], scale: Scale) -> dict:
    agents = [summarise_agent(d, scale) for d in run_dirs]
    best = max(range(len(agents)), key=lambda i: agents[i]["last100"])
    return {
        "arm": arm_name, "game": game, "seed": seed, "label": ARMS[arm_name].label, "agents": agents,
        "frames": agents[best]["frames"], "last100": agents[best]["last100"], "best_agent": best,
        "mean_return": agents[best]["mean_return"],
        "curve": best_curve(agents) if len(agents) > 1 else [{k: p[k] for k in ("frames", "mean_return")}
                                                              for p in agents[0]["curve"]],
    }  # fmt: skip


def write_job_provenance(directory: pathlib.Path, name: str, summary: dict) -> None:
    """The job's own record (each agent's commit, command, segments), beside its summary."""
    record = {f"agent_{i}": agent["run_provenance"] for i, agent in enumerate(summary["agents"])}
    (directory / f"{name}.provenance.json").write_text(json.dumps(record, indent=1) + "\n")


def study_rows(study: Study, summaries: dict[str, dict], games: list[str], seeds: list[int]) -> list[dict]:
    rows = []
    for game in games:
        for arm in study.arms:
            for seed in seeds:
                s = summaries.get(job_name(arm, game, seed))
                if s is not None:
                    best = s["agents"][s["best_agent"]]
                    wall = [a["wall_time_s"] for a in s["agents"]]
                    rows.append({
                        "arm": arm, "label": s["label"], "game": game, "seed": seed, "frames": s["frames"],
                        "agents": len(s["agents"]), "best_agent": s["best_agent"], "last100": s["last100"],
                        "mean_return": best["mean_return"],
                        "learning_rate": best["learning_rate"], "entropy_cost": best["entropy_cost"],
                        "wall_time_min_s": min(wall), "wall_time_max_s": max(wall),
                        "sittings": max(_runs.sittings(a) for a in s["agents"]),
                    })  # fmt: skip
    return rows


def markdown(stem: str, study: Study, rows: list[dict], missing: list[str], profile: str, scale: Scale) -> str:
    sweep = study.has_sweep
    lines = [
        reproduce.heading(
            f"Reduced scale: LASER {study.title}, MinAtar, {scale.frames:,} fresh frames per agent", profile
        ),
        "",
        f"Each arm is preset `{' / '.join(sorted({ARMS[a].preset for a in study.arms}))}` with its own changes",
        f"(`{PRESET}`: B = 16, 87.5% replay, 500K observations, trust region; `{A2_PRESET}`: 50% replay, 150K).",
        "`last100`: mean return of the agent's last 100 training episodes; `mean_return`: over all its",
        "episodes (data efficiency)."
        + (f" A sweep has {members_text(scale.sweep_agents)} sharing one replay, each run concurrently with"
           " nothing pacing them; a row"
           " is the member with the best last100, with its rate, entropy cost and the members' range of wall"
           " time. The figure's curve is the best member in each bucket, which may change (App. A.3)."
           " `sittings`: the sweep's starts; its shared replay is not checkpointed, so each resume"
           " refilled it from empty (`laser.sweep`)."
           if sweep else ""),
        "",
        "| game | arm | seed | frames | last100 | mean_return |"
        + (" best member | its lr | its entropy cost | members' wall time (s) | sittings |" if sweep else ""),
        "| --- | --- | --- | --- | --- | --- |" + (" --- | --- | --- | --- | --- |" if sweep else ""),
    ]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['game']} | {r['label']} | {r['seed']} | {r['frames']:,} | {r['last100']:.2f} "
            f"| {r['mean_return']:.2f} |"
            + (f" {r['best_agent']} of {r['agents']} | {r['learning_rate']:g} | {r['entropy_cost']:g} "
               f"| {r['wall_time_min_s']:,.0f}-{r['wall_time_max_s']:,.0f} | {r['sittings']} |" if sweep else "")
        )  # fmt: skip
    lines += ["", f"Not run yet: {', '.join(missing)}." if missing else "Every job of this study is in."]
    return "\n".join(lines) + "\n"


def plot(
    study: Study, summaries: dict[str, dict], games: list[str], seeds: list[int], path: pathlib.Path, title: str
) -> None:
    fig, axes = plt.subplots(1, len(games), figsize=(max(6.0, 4.5 * len(games)), 3.8), squeeze=False)
    for ax, game in zip(axes[0], games):
        for colour, arm in enumerate(study.arms):
            runs = [s for s in (summaries.get(job_name(arm, game, seed)) for seed in seeds) if s is not None]
            for i, s in enumerate(runs):  # One legend entry per arm, on its first seed present.
                frames = [p["frames"] for p in s["curve"]]
                returns = [p["mean_return"] for p in s["curve"]]
                ax.plot(frames, returns, color=f"C{colour}", lw=1.2, label=None if i else ARMS[arm].label)
        ax.set(title=game, xlabel="fresh frames")
    sweep = study.has_sweep
    axes[0][0].set_ylabel("training return\n(bucket mean" + (", best member in each)" if sweep else ")"))
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_study(stem: str, study: Study, summaries: dict[str, dict], games: list[str], seeds: list[int],
                out: pathlib.Path, profile: str, scale: Scale) -> None:  # fmt: skip
    """The study's table, figure and provenance from the summaries present; a record that would describe the
    same inputs and outputs is kept (`provenance.write_derived`)."""
    games, seeds = tabled(study, summaries.values(), games, seeds)
    jobs = [job_name(a, g, s) for g in games for a in study.arms for s in seeds]
    done = [j for j in jobs if j in summaries]
    if not done:
        print(f"{stem}: no finished job yet; nothing written", flush=True)
        return
    rows = study_rows(study, summaries, games, seeds)
    reproduce.write_csv(out / f"{stem}.csv", rows)
    missing = [j for j in jobs if j not in summaries]
    text = markdown(stem, study, rows, missing, profile, scale)
    (out / f"{stem}.md").write_text(text)
    title = f"LASER {study.title}\n{profile} profile: MinAtar, {scale.frames:,} fresh frames per agent"
    plot(study, summaries, games, seeds, out / f"{stem}.png", title)
    agents = [(j, i, a) for j in done for i, a in enumerate(summaries[j]["agents"])]
    provenance.write_derived(
        out, stem,
        config={f"{j}/agent_{i}": a["config"] for j, i, a in agents},
        seeds=sorted({summaries[j]["seed"] for j in done}), frames=sum(a["frames"] for _, _, a in agents),
        wall_time_s=sum(a["wall_time_s"] for _, _, a in agents),
        scale=f"reduced ({profile}): MinAtar, {scale.frames:,} frames per agent; {len(done)} of {len(jobs)} jobs",
        extra={"jobs": done, "missing": missing,
               "run_provenance": {f"{j}/agent_{i}": a["run_provenance"] for j, i, a in agents}},
    )  # fmt: skip
    print(text, flush=True)


def studies() -> list[str]:
    if FLAGS.studies is None:
        return list(QUICK_STUDIES if FLAGS.profile == "quick" else STUDIES)
    return FLAGS.studies


def check_flags() -> None:
    check_choices("--studies", "study", studies(), STUDIES)
    if FLAGS.games is not None:
        check_choices("--games", "minatar game", FLAGS.games, GAMES)


def study_games(study: Study) -> list[str]:
    if FLAGS.games:
        return list(FLAGS.games)
    return list(study.games[:1] if FLAGS.profile == "quick" else study.games)


def main(argv: list[str]) -> None:
    cli.flags_only(argv)
    check_flags()
    summaries_dir = reproduce.RESULTS / "laser" / FLAGS.profile / "minatar_runs"
    runs = reproduce.REPO_ROOT / "runs" / "reproduce" / f"laser_minatar_{FLAGS.profile}"
    if FLAGS.summarise_only:  # Before any directory is made: a refusal leaves nothing behind.
        _runs.check_summarise_only(FLAGS.fresh, choosing=CHOOSING)
        _runs.summaries_to_build(summaries_dir, runs)
    scale = SCALES[FLAGS.profile]
    out = reproduce.output_dir("laser", FLAGS.profile)
    summaries_dir.mkdir(exist_ok=True)
    # With --summarise_only (which refuses --seed and --seeds) seed 0: the tables add every seed present (`tabled`).
    seeds = list(range(FLAGS.seed, FLAGS.seed + FLAGS.seeds))
    start = time.time()
    jobs = sorted({(arm, game, seed) for stem in studies() for game in study_games(STUDIES[stem])
                   for arm in STUDIES[stem].arms for seed in seeds})  # fmt: skip
    if FLAGS.fresh:  # Remembered until each job's summary is replaced: a stopped retraining resumes without it.
        _runs.ask_fresh(runs / job_name(*job) for job in jobs)
    elif not FLAGS.summarise_only:
        _runs.check_settings(
            summaries_dir,
            {job_name(*job): job_configs(ARMS[job[0]], *job[1:], scale) for job in jobs},
            runs,
            {job_name(*job): job_flags(ARMS[job[0]], *job[1:], scale) for job in jobs},
        )
    summarised_now = set()  # A job two studies share (Fig. 2's replay87, say) trains once.
    for stem in studies():
        study = STUDIES[stem]
        for game in study_games(study):
            for arm in study.arms:
                for seed in seeds:
                    name = job_name(arm, game, seed)
                    path = summaries_dir / f"{name}.json"
                    if FLAGS.summarise_only or name in summarised_now:
                        continue
                    # Not kept if a stopped --fresh retraining of the job is in `runs`: it goes on. (A LASER
                    # summary records no job flags of its own: `check_settings` compared its settings above.)
                    asked = job_flags(ARMS[arm], game, seed, scale)
                    if _runs.summary_kept(path, FLAGS.fresh, asked, run_dir=runs / name):
                        continue
                    run_dirs = run_job(ARMS[arm], game, seed, scale, runs / name, FLAGS.fresh)
                    summary = summarise(arm, game, seed, run_dirs, scale)
                    path.write_text(json.dumps(summary, indent=1) + "\n")
                    write_job_provenance(summaries_dir, name, summary)
                    _runs.forget_fresh(runs / name)
                    summarised_now.add(name)
                    print(f"{name}: summarised into {path} ({time.time() - start:.0f}s into this command)", flush=True)
    summaries = {
        p.stem: json.loads(p.read_text())
        for p in sorted(summaries_dir.glob("*.json"))
        if not p.name.endswith(".provenance.json")
    }
    for stem in studies():
        write_study(stem, STUDIES[stem], summaries, study_games(STUDIES[stem]), seeds, out, FLAGS.profile, scale)
    _runs.print_written(out, start)


if __name__ == "__main__":
    cli.run(main)
