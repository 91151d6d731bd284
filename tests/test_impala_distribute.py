"""The tf.distribute learner: the same update as one device, on simulated CPU devices."""

import json
import pathlib
import subprocess
import sys

import pytest
import tensorflow as tf
import usage_cases

REPO = pathlib.Path(__file__).resolve().parent.parent

# Logical devices must be set up before TensorFlow starts, hence a subprocess.
EQUIVALENCE = """
import json, gymnasium as gym, numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from impala import networks
from impala.config import PRESETS
from impala.learner import Learner, variable_scope
config = PRESETS["toy"]
rng = np.random.default_rng(0)
B, T1 = config.batch_size, config.unroll_length + 1
batches = [{
    "observation": tf.constant(rng.integers(0, 2, (B, T1, 10, 5, 1)), tf.uint8),
    "first": tf.constant(rng.random((B, T1)) < 0.1),
    "action": tf.constant(rng.integers(3, size=(B, T1)), tf.int32),
    "behaviour_logits": tf.constant(rng.standard_normal((B, T1, 3)), tf.float32),
    "reward": tf.constant(rng.standard_normal((B, T1)), tf.float32),
    "terminal": tf.constant(rng.random((B, T1)) < 0.1),
} for _ in range(3)]
results = []
for strategy in (None, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])):
    with variable_scope(strategy):
        learner = Learner(config, networks.make(config, gym.spaces.Box(0, 1, (10, 5, 1), np.uint8), 3), strategy)
        learner.build(batches[0])
    weights = learner.network.trainable_variables
    initial = [tf.random.stateless_normal(v.shape, [1, i]) * 0.1 for i, v in enumerate(weights)]
    for v, value in zip(weights, initial):
        v.assign(value)
    metrics = [learner.step(b) for b in batches]
    results.append((metrics, [v.numpy() for v in weights]))
(single_metrics, single), (mirrored_metrics, mirrored) = results
print(json.dumps({"metrics": [single_metrics, mirrored_metrics],
                  "moved": float(max(np.abs(a - b.numpy()).max() for a, b in zip(single, initial))),
                  "max_difference": float(max(np.abs(a - b).max() for a, b in zip(single, mirrored)))}))
"""


def test_mirrored_learner_makes_the_single_device_update():
    result = subprocess.run([sys.executable, "-c", EQUIVALENCE], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    single, mirrored = report["metrics"]
    for name in ("loss", "pg_loss", "baseline_loss", "entropy", "mean_rho", "gradient_norm"):
        assert [m[name] for m in single] == pytest.approx([m[name] for m in mirrored], rel=1e-5), name
    assert report["max_difference"] < 1e-5
    assert report["moved"] > 1e-3  # Not vacuous: the updates moved the parameters (about 0.02 here).


def train(*args, distribute: str = "mirrored"):
    command = [sys.executable, "-m", "impala.train", "--preset=toy", f"--distribute={distribute}", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_train_with_two_simulated_devices(tmp_path):
    result = train("--simulated_cpu_devices=2", "--frames=30000", f"--run_dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "run" / "final.json").read_text())["frames"] >= 30_000


# Without simulated devices, --distribute=mirrored needs a GPU: the error is only
# expected on a machine without one (elsewhere it would start training).
HAS_GPU = bool(tf.config.list_physical_devices("GPU"))
NO_GPU = pytest.param([], "found no GPU", marks=pytest.mark.skipif(HAS_GPU, reason="a GPU is visible"))


@pytest.mark.parametrize(
    "args, fragment",
    [
        NO_GPU,
        (["--simulated_cpu_devices=3"], "batch_size=16 must divide evenly over 3"),
        # A trial: -2 was a traceback once TensorFlow started, 0 said to give the flag it had given.
        (["--simulated_cpu_devices=-2"], "--simulated_cpu_devices=-2: -2 is not a positive integer"),
        (["--simulated_cpu_devices=0"], "--simulated_cpu_devices=0: 0 is not a positive integer"),
    ],
)
def test_distribute_bad_input(tmp_path, args, fragment):
    result = train(*args, f"--run_dir={tmp_path / 'run'}")
    usage_cases.assert_one_line_error(result, fragment)


def test_simulated_devices_without_mirrored_are_refused(tmp_path):
    """A trial: --simulated_cpu_devices without --distribute mirrored split the CPU and trained as if absent."""
    result = train("--simulated_cpu_devices=2", f"--run_dir={tmp_path / 'run'}", distribute="none")
    usage_cases.assert_one_line_error(result, "--simulated_cpu_devices is for --distribute mirrored")
    assert not (tmp_path / "run").exists()
