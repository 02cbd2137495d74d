"""``kafkalog compact --output-dir``: the compacted copy of a log dir written elsewhere has the bytes of
in-place compaction (every file of every partition folder, and the log dir's checkpoints), the source
is left untouched, a kill at any point is finished by a rerun with the same bytes, and destinations
that are not ours are refused — locally, and on the S3 server the object-store tests run."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.cleaner import output_dir
from kafkalog.fs.lock import lock_log_dir
from kafkalog.log.producer_snapshot import ProducerSnapshot, write_producer_snapshot
from kafkalog.tools.cli import main

from cleaner_model import TOPIC, data, write_partition
from cleaner.test_cleaner_crash import NOW, crash_log

IGNORED = {".lock", output_dir.FINAL_MARKER}


def _build(root: Path) -> tuple[Path, int]:
    """A log dir: partition 0 due (several groups, a snapshot that the swap drops and one it keeps),
    partition 1 not due (its only segment is the active one), the log dir's files. Returns it and
    the segment.bytes that makes partition 0 clean in several groups."""
    log_dir = root / "src"
    p0 = write_partition(log_dir, crash_log())
    write_partition(log_dir, [[data(0, [(b"x", b"1"), (b"x", b"2")])]], partition=1)
    for base in (4, 10):
        write_producer_snapshot(p0, ProducerSnapshot(base))
    (p0 / "leader-epoch-checkpoint").write_bytes(b"0\n1\n0 0\n")
    (p0 / "partition.metadata").write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    (log_dir / "meta.properties").write_bytes(b"version=1\nnode.id=1\ncluster.id=c\ndirectory.id=d\n")
    write_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint", {(TOPIC, 0): 12, (TOPIC, 1): 2})
    write_offset_checkpoint(log_dir / "replication-offset-checkpoint", {(TOPIC, 0): 12, (TOPIC, 1): 2})
    write_offset_checkpoint(log_dir / "cleaner-offset-checkpoint", {("other", 3): 7})
    sizes = sorted((p.stat().st_size for p in p0.glob("*.log")), reverse=True)
    return log_dir, sizes[0] + sizes[1]


def _argv(log_dir, segment_bytes: int, *extra) -> list:
    return ["compact", "--log-dir", str(log_dir), "--now-ms", str(NOW),
            "--topic-config", f"{TOPIC}:cleanup.policy=compact", "--topic-config", f"{TOPIC}:min.cleanable.dirty.ratio=0",
            "--topic-config", f"{TOPIC}:segment.bytes={segment_bytes}", *extra]


def _tree(root: Path) -> dict:
    """Every file under ``root`` (relative path -> sha256), the markers and .lock left out."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in IGNORED}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The source log dir, its segment.bytes, and the tree in-place compaction of a copy leaves."""
    root = tmp_path_factory.mktemp("outdir")
    src, segment_bytes = _build(root)
    in_place = root / "in-place"
    shutil.copytree(src, in_place)
    assert main(_argv(in_place, segment_bytes)) == 0
    expected = _tree(in_place)
    assert expected != _tree(src)                      # the round changed something
    assert f"{TOPIC}-0/00000000000000000004.snapshot" not in expected      # the swap dropped it
    return src, segment_bytes, expected


def test_output_dir_has_the_bytes_of_in_place_and_the_source_is_untouched(built, tmp_path, capsys):
    src, segment_bytes, expected = built
    before = _tree(src)
    out = tmp_path / "out"
    assert main(_argv(src, segment_bytes, "--output-dir", str(out))) == 0
    printed = capsys.readouterr().out
    assert _tree(out) == expected
    assert _tree(src) == before and not (src / ".lock").exists()
    assert f"{TOPIC}-0: cleaned" in printed and "[output: written]" in printed and "[output: copied]" in printed
    assert not (out / output_dir.MARKER_DIR).exists() and (out / output_dir.FINAL_MARKER).is_file()
    # a rerun on the finished copy does nothing and says so
    assert main(_argv(src, segment_bytes, "--output-dir", str(out))) == 0
    assert capsys.readouterr().out.count("[output: skipped-complete]") == 2
    assert _tree(out) == expected


def test_a_failure_inside_a_partition_is_finished_by_a_rerun(built, tmp_path, monkeypatch, capsys):
    src, segment_bytes, expected = built
    out = tmp_path / "out"

    def fail(point, name):
        if (point, name) == ("copied", f"{TOPIC}-0"):
            raise OSError(5, "Input/output error", "planted")
    monkeypatch.setattr(output_dir, "FAULT_HOOK", fail)
    assert main(_argv(src, segment_bytes, "--output-dir", str(out))) == 1
    assert "NOT FINISHED" in capsys.readouterr().out
    assert not (out / f"{TOPIC}-0").exists() and not (out / "meta.properties").exists()     # nothing half-written
    assert not (out / output_dir.MARKER_DIR / f"{TOPIC}-0.json").exists()
    monkeypatch.setattr(output_dir, "FAULT_HOOK", None)
    assert main(_argv(src, segment_bytes, "--output-dir", str(out))) == 0
    printed = capsys.readouterr().out
    assert f"{TOPIC}-0: cleaned" in printed and "[output: skipped-complete]" in printed    # partition 1 kept
    assert _tree(out) == expected


KILLER = """
import os, signal, sys
sys.path[:0] = {paths!r}
from kafkalog.cleaner import output_dir
def kill(point, name):
    if (point, name) == ("copied", {name!r}):
        os.kill(os.getpid(), signal.SIGKILL)
output_dir.FAULT_HOOK = kill
from kafkalog.tools.cli import main
sys.exit(main({argv!r}))
"""


def test_sigkill_mid_partition_then_rerun_converges(built, tmp_path, capsys):
    """SIGKILL once partition 1's files were all copied but before its manifest (partition 0 complete
    before it); then a file of the complete partition 0 is cut short (a copy tampered with, or a
    store that lost it). The rerun rewrites both and writes the log dir's files: the bytes of
    in-place compaction."""
    src, segment_bytes, expected = built
    out = tmp_path / "out"
    argv = _argv(src, segment_bytes, "--output-dir", str(out))
    code = subprocess.run([sys.executable, "-c", KILLER.format(paths=sys.path, name=f"{TOPIC}-1", argv=argv)],
                          cwd=os.getcwd(), timeout=120).returncode
    assert code == -signal.SIGKILL
    marks = out / output_dir.MARKER_DIR
    assert (marks / f"{TOPIC}-0.json").is_file() and not (marks / f"{TOPIC}-1.json").exists()
    assert list((out / f"{TOPIC}-1").glob("*.log")) and not (out / "meta.properties").exists()
    cut = out / f"{TOPIC}-0" / "00000000000000000000.log"
    cut.write_bytes(cut.read_bytes()[:-10])
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{TOPIC}-0: cleaned" in printed and "skipped-complete" not in printed
    assert _tree(out) == expected


def test_refusals_touch_nothing(built, tmp_path, capsys):
    src, segment_bytes, _expected = built
    broker_dir = tmp_path / "broker"
    broker_dir.mkdir()
    (broker_dir / "meta.properties").write_bytes(b"node.id=1\n")
    assert main(_argv(src, segment_bytes, "--output-dir", str(broker_dir))) == 2
    assert "broker's log dir" in capsys.readouterr().err and os.listdir(broker_dir) == ["meta.properties"]
    assert main(_argv(src, segment_bytes, "--output-dir", str(src / "copy"))) == 2       # inside the source
    assert "overlap" in capsys.readouterr().err and not (src / "copy").exists()
    other = tmp_path / "other-src"
    shutil.copytree(src, other)
    out = tmp_path / "out"
    assert main(_argv(other, segment_bytes, "--output-dir", str(out))) == 0
    held = _tree(out)
    assert main(_argv(src, segment_bytes, "--output-dir", str(out))) == 2                # another source's copy
    assert "holds the compacted copy of" in capsys.readouterr().err and _tree(out) == held
    live = tmp_path / "live"
    live.mkdir()
    with lock_log_dir(live):                                                            # a broker holds it
        assert main(_argv(src, segment_bytes, "--output-dir", str(live))) != 0
    assert os.listdir(live) == [".lock"]


def test_s3_source_and_destination(built, s3_env, tmp_path, capsys, monkeypatch):
    """An s3:// log dir compacted into an s3:// copy (streamed both ways, the uploads flushed every few
    bytes here), downloaded: the in-place bytes; in-place compaction of the URI is refused and names
    --output-dir."""
    from pyarrow import fs
    from kafkalog.cleaner import output_tree
    monkeypatch.setattr(output_tree, "REMOTE_FLUSH_BYTES", 100)
    src, segment_bytes, expected = built
    uri = s3_env.upload(src, "kafkalog-outdir", "src")
    assert main(_argv(uri, segment_bytes)) == 2
    assert "--output-dir" in capsys.readouterr().err
    out = "s3://kafkalog-outdir/compacted"
    assert main(_argv(uri, segment_bytes, "--output-dir", out)) == 0
    assert "[output: written]" in capsys.readouterr().out
    local = tmp_path / "down"
    fs.copy_files("kafkalog-outdir/compacted", os.fspath(local), source_filesystem=s3_env.filesystem(),
                  destination_filesystem=fs.LocalFileSystem())
    assert _tree(local) == expected
