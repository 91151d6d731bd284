"""A --role server's --tables_dir keeps a run directory's contract: served again only with --resume,
emptied only with --overwrite, never touched when it holds anything else or another server serves from it."""

import json
import multiprocessing
import pathlib

import pytest
import usage_cases

from common import tables_dir
from common.errors import UsageError
from per.config import PRESETS

CHECKPOINT = "2026-12-05T12:15:48.895482404+00:00"  # How Reverb's checkpointer names one.


def saved_checkpoint(directory: pathlib.Path, name: str = CHECKPOINT, done: bool = True) -> pathlib.Path:
    (directory / tables_dir.CONFIG).parent.mkdir(parents=True, exist_ok=True)
    (directory / tables_dir.CONFIG).write_text("{}")
    checkpoint = directory / tables_dir.CHECKPOINTS / name
    checkpoint.mkdir(parents=True)
    (checkpoint / "tables.tfrecord").write_bytes(b"tables")
    if done:
        (checkpoint / "DONE").touch()
    return checkpoint


def test_a_new_or_empty_directory_starts_empty_tables(tmp_path):
    tables_dir.check(tmp_path / "new" / "tables", resume=False, overwrite=False)
    assert not (tmp_path / "new").exists()  # A check creates nothing.
    (tmp_path / "empty").mkdir()
    tables_dir.check(tmp_path / "empty", resume=False, overwrite=False)


def test_saved_tables_are_served_again_only_with_resume_and_deleted_only_with_overwrite(tmp_path):
    checkpoint = saved_checkpoint(tmp_path)
    before = usage_cases.snapshot(tmp_path)
    with pytest.raises(UsageError, match="holds the tables an earlier server saved: pass --resume .* or --overwrite"):
        tables_dir.check(tmp_path, resume=False, overwrite=False)
    tables_dir.check(tmp_path, resume=True, overwrite=False)
    tables_dir.check(tmp_path, resume=False, overwrite=True)
    assert usage_cases.snapshot(tmp_path) == before
    assert tables_dir.saved(tmp_path) == [checkpoint]


def test_overwrite_deletes_reverbs_checkpoints_interrupted_ones_included(tmp_path):
    saved_checkpoint(tmp_path)
    saved_checkpoint(tmp_path, "2026-12-05T12:20:00.1+00:00", done=False)  # Killed while Reverb wrote it.
    tables_dir.check(tmp_path, resume=False, overwrite=True)
    tables_dir.prepare(tmp_path, PRESETS["toy"], resume=False, overwrite=True)
    assert tables_dir.saved(tmp_path) == [] and list((tmp_path / tables_dir.CHECKPOINTS).iterdir()) == []


def test_a_first_start_saves_its_config_and_a_resume_keeps_the_saved_one(tmp_path):
    tables_dir.prepare(tmp_path / "tables", PRESETS["toy"], resume=False, overwrite=False)
    assert (
        json.loads((tmp_path / "tables" / tables_dir.CONFIG).read_text())["replay_capacity"]
        == PRESETS["toy"].replay_capacity
    )
    saved_checkpoint(tmp_path / "resumed")
    tables_dir.prepare(tmp_path / "resumed", PRESETS["toy"], resume=True, overwrite=False)
    assert (tmp_path / "resumed" / tables_dir.CONFIG).read_text() == "{}"


def test_a_config_alone_is_no_saved_tables(tmp_path):
    (tmp_path / tables_dir.CONFIG).write_text("{}")  # A server that stopped before a learner's first checkpoint.
    tables_dir.check(tmp_path, resume=False, overwrite=False)
    with pytest.raises(UsageError, match="holds no saved tables; leave out --resume"):
        tables_dir.check(tmp_path, resume=True, overwrite=False)


def test_tables_without_their_config_are_not_resumed(tmp_path):
    saved_checkpoint(tmp_path)
    (tmp_path / tables_dir.CONFIG).unlink()
    with pytest.raises(UsageError, match="holds no config.json, the config its tables were built from"):
        tables_dir.check(tmp_path, resume=True, overwrite=False)


def test_an_interrupted_checkpoint_alone_is_nothing_to_resume(tmp_path):
    saved_checkpoint(tmp_path, done=False)
    with pytest.raises(UsageError, match="holds no saved tables; leave out --resume"):
        tables_dir.check(tmp_path, resume=True, overwrite=False)


@pytest.mark.parametrize("resume, overwrite", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("other", ["notes.txt", "checkpoints/notes.txt"])
def test_a_directory_holding_anything_else_is_refused_and_kept(tmp_path, resume, overwrite, other):
    saved_checkpoint(tmp_path)
    (tmp_path / other).write_text("mine")
    before = usage_cases.snapshot(tmp_path)
    with pytest.raises(UsageError, match=f"holds {other}, which is not a server's saved tables or config; give"):
        tables_dir.check(tmp_path, resume=resume, overwrite=overwrite)
    assert usage_cases.snapshot(tmp_path) == before


def test_a_file_both_flags_and_an_uncreatable_directory_are_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file, not a directory"):
        tables_dir.check(tmp_path / "file", resume=False, overwrite=False)
    with pytest.raises(UsageError, match="--resume and --overwrite exclude each other"):
        tables_dir.check(tmp_path, resume=True, overwrite=True)
    with pytest.raises(UsageError, match="--tables_dir /proc/tables cannot be created"):  # Even for root.
        tables_dir.prepare(pathlib.Path("/proc/tables"), PRESETS["toy"], resume=False, overwrite=False)


def _serve_from(path: pathlib.Path, ready, done) -> None:
    tables_dir.prepare(path, PRESETS["toy"], resume=True, overwrite=False)
    ready.set()
    done.wait(60)


def test_a_directory_another_server_serves_from_is_refused(tmp_path):
    saved_checkpoint(tmp_path)
    context = multiprocessing.get_context("spawn")
    ready, done = context.Event(), context.Event()
    other = context.Process(target=_serve_from, args=(tmp_path, ready, done))
    other.start()
    try:
        assert ready.wait(60)
        for resume, overwrite in [(True, False), (False, True), (False, False)]:
            with pytest.raises(UsageError, match="is in use: another Reverb server keeps its tables there"):
                tables_dir.check(tmp_path, resume=resume, overwrite=overwrite)
    finally:
        done.set()
        other.join(60)
    tables_dir.check(tmp_path, resume=True, overwrite=False)  # Free once that server has gone.


def test_an_unwritable_directory_is_refused_before_the_server_starts(tmp_path, monkeypatch):
    """Root writes anywhere here, so `os.access` is stubbed: the refusal came at a learner's first checkpoint."""
    saved_checkpoint(tmp_path)
    unwritable = tmp_path / tables_dir.CHECKPOINTS
    monkeypatch.setattr(tables_dir.os, "access", lambda path, mode: pathlib.Path(path) != unwritable)
    with pytest.raises(UsageError, match=f"--tables_dir {tmp_path}: {unwritable} is not writable"):
        tables_dir.check(tmp_path, resume=True, overwrite=False)
