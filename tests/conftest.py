"""Fixtures shared by the test modules."""

import importlib.util
import os
import pathlib
import sys

import pytest
import reverb

from common.reverb import server as reverb_server


@pytest.fixture
def reverb_tables():
    """`make(tables, checkpoint_dir=None) -> (client, parts)`: an in-process Reverb server for `tables`.

    Append to `parts` what holds streams to the server (replays, actors,
    agents): each is closed before the server stops, because an in-process
    client crashes if its server stops under it.
    """
    made = []

    def make(tables, checkpoint_dir=None):
        server = reverb_server.make_server(tables, checkpoint_dir=checkpoint_dir)
        made.append((server, []))
        return reverb.Client(f"localhost:{server.port}"), made[-1][1]

    yield make
    for server, parts in made:
        for part in parts:
            part.close()
        server.stop()


FAKES = pathlib.Path(__file__).parent / "fakes"


@pytest.fixture
def fake_lab(monkeypatch):
    """`tests/fakes/deepmind_lab.py` as `deepmind_lab`, here and in the processes this test starts."""
    spec = importlib.util.spec_from_file_location("deepmind_lab", FAKES / "deepmind_lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "deepmind_lab", module)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(FAKES), os.environ.get("PYTHONPATH")])))
    return module


# Test files by the worker time they took in a fresh-clone `make test` (seconds,
# at eedb63a; test_peers.py's 63 s fell to about 9 s at c36f7d3), most first.
# `make test` hands whole files to its 2 workers in collection order
# (`--dist loadfile --no-loadscope-reorder`); a long file handed out last leaves
# the other worker idle, so these go first.
LONG_FILES = {
    "test_run_dir_contract.py": 254,
    "test_per_system.py": 226,
    "test_laser_sweep.py": 201,
    "test_impala_recovery.py": 176,
    "test_impala_system.py": 153,
    "test_cli.py": 152,
    "test_laser_system.py": 135,
    "test_suite.py": 130,
    "test_envs_atari.py": 86,
    "test_suite_ray.py": 85,
    "test_impala_distribute.py": 67,
    "test_laser_benchmark.py": 61,
    "test_laser_recompute.py": 57,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first; a file's tests keep their order (the sort is stable)."""
    items.sort(key=lambda item: -LONG_FILES.get(item.path.name, 0))
