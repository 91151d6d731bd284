"""The training driver shared by every agent: a loop around the agent's `step()`.

The agent supplies a `Learner` (IMPALA: learn from one queue batch; Double
DQN: act, insert, maybe learn). The loop owns everything around it:

* Ctrl-C and SIGTERM: stop between steps, save a final checkpoint, exit
  128 + the signal's number (`signals.INTERRUPTED_EXIT_CODES`);
* a non-finite loss: stop without saving, keep the last good checkpoint;
* checkpoints every `checkpoint_every_s`, with the agent's extra state;
* progress lines (frames/s, learner steps/s, return, ETA), TensorBoard,
  `episodes.csv`, and `final.json` when the frame budget is reached.
"""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time
from typing import Any, NamedTuple, Protocol, Sequence

import tensorflow as tf

from common import envs, run_dir
from common.signals import on_stop_signals


class Step(NamedTuple):
    """What one `Learner.step` did."""

    metrics: dict[str, float]  # Includes "loss", which must stay finite.
    # (return, length) of games that ended; (return, length, task) in a multi-task run.
    episodes: Sequence[tuple[float, int] | tuple[float, int, str]] = ()


class Learner(Protocol):
    """The agent's side of the loop."""

    @property
    def frames(self) -> int: ...  # Environment frames consumed so far.

    @property
    def steps(self) -> int: ...  # Learner updates so far.

    def state(self) -> dict[str, Any]:
        """Trackables to checkpoint (networks, optimizer, counters, schedules)."""

    def start(self) -> None:
        """Called once the checkpoint is restored or created (e.g. publish parameters)."""

    def step(self) -> Step | None:
        """One step; None when there was nothing to learn from yet."""

    def progress(self) -> dict[str, float]:
        """Extra numbers for the progress line and TensorBoard (e.g. the queue's fill)."""

    def save_extra(self) -> None:
        """After each checkpoint: state kept outside TensorFlow (e.g. Reverb's tables)."""

    # Optional: `summary() -> dict[str, float]`, numbers of the agent's own for
    # final.json (IMPALA: its policy lag); agents without any leave it out.
    # Optional: `before_save()`, called before each checkpoint after the first
    # (PER: counters it keeps in Python between checkpoints, into their variables).


class Actors(Protocol):
    """Actor processes the loop starts after `Learner.start` and stops at the end."""

    restarts: int

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Settings(NamedTuple):
    total_frames: int
    checkpoint_every_s: float
    log_every_s: float
    tasks: tuple[str, ...] = ()  # A multi-task run's tasks (IMPALA §5.3), named in episodes.csv.


class NonFiniteLossError(RuntimeError):
    pass


def settings(config: Any) -> Settings:
    tasks = envs.tasks(config.env) if envs.is_suite(config.env) else ()
    return Settings(config.total_frames, config.checkpoint_every_s, config.log_every_s, tasks)


def _entry_point() -> str:
    """`python -m <module> ` of the command running, if started with -m (else empty: the flags alone)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return f"python -m {spec.name} " if spec is not None else ""


def run(
    learner: Learner,
    directory: pathlib.Path,
    config: Settings,
    record: run_dir.RunRecord,
    actors: Actors | None = None,
    resume_command: str | None = None,
) -> int:
    """Trains until the budget or a stop request; returns the process exit status.

    `resume_command`: how to continue the run, said when it stops (default: this command, --run_dir, --resume).
    """
    checkpoint = tf.train.Checkpoint(**learner.state())
    manager = tf.train.CheckpointManager(checkpoint, directory / "checkpoints", max_to_keep=3)
    if manager.latest_checkpoint:
        with run_dir.reading_checkpoint(manager.latest_checkpoint):
            checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {manager.latest_checkpoint}: step {learner.steps}, frames {learner.frames:,}", flush=True)
    # The record of this start before a first checkpoint: a stop during that save must not leave a checkpoint
    # without it, which `--resume` refuses (`common.launch`).
    record.start(learner.frames, config.total_frames)
    if not manager.latest_checkpoint:
        manager.save(checkpoint_number=0)
    learner.start()
    episodes = run_dir.EpisodeLog(directory, tasks=config.tasks, resumed_at=learner.frames)
    writer = run_dir.summary_writer(directory, learner.frames)
    progress = run_dir.Progress(config.total_frames, config.log_every_s)
    received: list[int] = []  # The stop signals that came; the loop stops once there is one.
    last_checkpoint = time.monotonic()

    def save() -> None:
        getattr(learner, "before_save", lambda: None)()
        manager.save(checkpoint_number=learner.steps)
        learner.save_extra()
        record.update(learner.frames)  # A resume's budget may not fall below it (`common.launch`).

    def request_stop(signum: int, _) -> None:
        # Raising could land inside a C++ call. Nor may it take a lock, as
        # `threading.Event.set` does: a second signal (Ctrl-C reaches a study
        # driver's run and the driver, which hands it a SIGTERM) runs this
        # handler again while the first holds the lock, and the run hangs.
        received.append(signum)

    status, metrics = 0, {}
    with on_stop_signals(request_stop):
        try:
            if actors is not None:  # Within the handler and the `finally`: a stop as they start stops them.
                actors.start()
            while learner.frames < config.total_frames and not received:
                result = learner.step()
                if result is None:  # Nothing to learn from yet; look for a stop signal again.
                    continue
                metrics = result.metrics
                if not math.isfinite(metrics["loss"]):
                    raise NonFiniteLossError(
                        f"non-finite loss ({metrics['loss']}) at learner step {learner.steps}; stopped without "
                        f"saving, the last good checkpoint is {manager.latest_checkpoint}"
                    )
                for episode_return, length, *task in result.episodes:
                    episodes.add(learner.frames, episode_return, length, record.wall_time_s(), *task)
                if progress.due():
                    _log(progress, learner, metrics, episodes, writer)
                if time.monotonic() - last_checkpoint >= config.checkpoint_every_s:
                    save()
                    last_checkpoint = time.monotonic()
            if metrics and progress.logged_frames != learner.frames:
                _log(progress, learner, metrics, episodes, writer)  # Log and TensorBoard end where the run did.
            save()
            if received:
                resume = f"continue with {resume_command or f'{_entry_point()}--run_dir {directory} --resume'}"
                print(f"interrupted: saved checkpoint at step {learner.steps}; {resume}", flush=True)
                status = 128 + received[0]
            else:
                _finish(directory, learner, episodes, record, actors)
        except NonFiniteLossError as error:
            print(f"error: {error}", file=sys.stderr, flush=True)
            status = 1
        finally:
            if actors is not None:
                actors.stop()
            episodes.close()
            writer.flush()
    return status


def _log(progress: run_dir.Progress, learner: Learner, metrics, episodes: run_dir.EpisodeLog, writer) -> None:
    """The progress line, TensorBoard scalars, and a flush of episodes.csv."""
    mean_return = episodes.mean_recent()
    numbers = learner.progress()
    extras = {
        **{name: f"{value:g}" for name, value in numbers.items()},
        "episodes": str(episodes.count),
        "return(100)": "-" if mean_return is None else f"{mean_return:.2f}",
        "loss": f"{metrics['loss']:.3g}",
    }
    print(progress.line(learner.frames, learner.steps, **extras), flush=True)
    with writer.as_default(step=learner.frames):
        for name, value in metrics.items():
            tf.summary.scalar(f"learner/{name}", value)
        for name, value in {**numbers, **progress.rates}.items():
            tf.summary.scalar(f"progress/{name}", value)
        if mean_return is not None:
            tf.summary.scalar("actors/mean_return_100", mean_return)
        for task, summary in episodes.task_summary().items():
            if summary["mean_return_last_100"] is not None:
                tf.summary.scalar(f"tasks/{task}/mean_return_100", summary["mean_return_last_100"])
    episodes.flush()


def _finish(
    directory: pathlib.Path, learner: Learner, episodes: run_dir.EpisodeLog, record, actors: Actors | None
) -> None:
    final = {
        "frames": learner.frames, "learner_steps": learner.steps, "episodes": episodes.count,
        "mean_return_last_100": episodes.mean_recent(), "wall_time_s": record.update(learner.frames),
        "segments": len(record.segments), "actor_restarts": actors.restarts if actors else 0,
        **({"tasks": episodes.task_summary()} if episodes.task_summary() else {}),
        **getattr(learner, "summary", dict)(),
    }  # fmt: skip
    (directory / "final.json").write_text(json.dumps(final, indent=2) + "\n")
    mean = episodes.mean_recent()
    print(
        f"done: {learner.frames:,} frames, {learner.steps} learner steps, {episodes.count} episodes, "
        f"mean return(100) {'-' if mean is None else f'{mean:.2f}'}",
        flush=True,
    )
