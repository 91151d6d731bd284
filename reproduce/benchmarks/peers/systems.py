"""The commands that run ours and each peer under the matched settings.

Matched (issue #13): Pong, 84x84 grayscale, frame skip 4, 4 stacked frames,
life loss ends training episodes, rewards clipped to [-1, 1], the shallow
network without LSTM, unroll T = 20, batch B = 32 unrolls, 2 acting processes.
Not matched: the optimizer (ours RMSProp, sample-factory Adam) and how each
system splits work between processes; neither changes the network's cost.
"""

from __future__ import annotations

import pathlib
import sys

from reproduce.benchmarks.peers.measure import System

OURS = "atari_shallow_2x16"


def ours() -> System:
    """`impala.train --preset atari_shallow --env atari:pong`: 2 actor processes x 16 envs, T = 20, B = 32."""

    def command(scratch: pathlib.Path) -> list[str]:
        return [
            sys.executable, "-m", "impala.train", "--preset=atari_shallow", "--env=atari:pong",
            f"--run_dir={scratch}/run", "--config_override=log_every_s=5",
            "--config_override=checkpoint_every_s=1e9",  # No checkpoint inside the window.
        ]  # fmt: skip

    # The progress line starts "frames 1,234,560/200,000,000 |": the learner's frame count.
    return System("ours", OURS, command, r"^frames ([\d,]+)/", "run/config.json")


# sample-factory's two ways of stepping Atari: envpool (C++ threads, one pool of
# 32 games per rollout worker) and its own gymnasium wrappers over ale-py
# (NoopReset, MaxAndSkip 4, EpisodicLife, FireReset, ClipReward, 84x84 gray, 4 stacked).
SAMPLE_FACTORY_CONFIGS = {
    "envpool_2x32": ("envpool", ["--num_envs_per_worker=1", "--env_agents=32", "--batched_sampling=True"]),
    "gym_2x32": ("gym", ["--num_envs_per_worker=32", "--batched_sampling=False"]),
}
_LAUNCHER = pathlib.Path(__file__).resolve().parent / "sample_factory_train.py"
_EXPERIMENT = "peers"


def sample_factory(config: str, interpreter: pathlib.Path, backstop_s: float) -> System:
    """sample-factory 2.1.1's APPO with V-trace in one of `SAMPLE_FACTORY_CONFIGS`.

    `backstop_s`: its own `--train_for_seconds`, so a run outlives no stop request by much.
    """
    wrappers, specific = SAMPLE_FACTORY_CONFIGS[config]

    def command(scratch: pathlib.Path) -> list[str]:
        return [str(interpreter), str(_LAUNCHER), wrappers, *_sample_factory_args(scratch, backstop_s), *specific]

    # Its runner logs "Fps is (...). Total num frames: N." every 5 s: N is the
    # learner's trained samples x env_frameskip (summaries_use_frameskip, on
    # for Atari), the same count as ours.
    return System("sample_factory", config, command, r"Total num frames: (\d+)", f"train/{_EXPERIMENT}/config.json")


def _sample_factory_args(scratch: pathlib.Path, backstop_s: float) -> list[str]:
    return [
        "--env=atari_pong", f"--experiment={_EXPERIMENT}", f"--train_dir={scratch}/train", "--device=cpu", "--seed=0",
        "--num_workers=2",  # Rollout worker processes, as ours has 2 actor processes.
        "--worker_num_splits=1",  # Its Atari examples' value.
        # T = 20. Its V-trace asserts recurrence == rollout, even without an RNN (no LSTM, as ours).
        "--rollout=20", "--recurrence=20",
        "--batch_size=640", "--num_batches_per_epoch=1", "--num_epochs=1",  # B = 32 unrolls of 20, one pass: IMPALA.
        "--with_vtrace=True", "--async_rl=True", "--serial_mode=False",
        "--encoder_conv_architecture=convnet_impala",  # Conv 16 8x8/4, conv 32 4x4/2: IMPALA's shallow torso.
        "--encoder_conv_mlp_layers=256", "--use_rnn=False", "--nonlinearity=relu",
        "--env_frameskip=4", "--env_framestack=4",
        "--normalize_input=False", "--normalize_returns=False", "--obs_scale=255",  # Ours: pixels / 255 only.
        "--gamma=0.99", "--learning_rate=0.0006", "--exploration_loss_coeff=0.01", "--value_loss_coeff=0.5",
        "--max_grad_norm=40",  # IMPALA App. G's values.
        "--save_every_sec=1000000000", "--with_wandb=False",  # No checkpoint inside the window, no network.
        f"--train_for_seconds={int(backstop_s)}",
    ]  # fmt: skip
