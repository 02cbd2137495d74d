"""Log dirs on an object store: every read command on an s3:// copy of a log dir answers as on the
local copy, the commands that modify a log dir refuse URIs and touch nothing, and a missing bucket,
wrong credentials, an unreachable endpoint or a cut connection are clear errors — against a real
S3 server (SeaweedFS's weed, tests/s3server.py)."""
from __future__ import annotations

import errno
import socket
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog.errors import KafkalogError, UsageError
from kafkalog.fs import filesystem
from kafkalog.fs.counting_filesystem import RequestCounts, counting_filesystem
from kafkalog.log.records_io import iter_segment, read_segment
from kafkalog.lookup.partition_log import PartitionLog
from kafkalog.tools.cli import main
from logdirs import make_partition, write_checkpoints

BUCKET = "kafkalog-logs"
HOUR = 3_600_000
T0 = 1_700_000_000_000


def _build(root: Path) -> Path:
    """A log dir: a demo topic (lz4, consumer groups) and a topic of several segments with checkpoints."""
    log_dir = root / "broker-0"
    assert main(["demo", str(log_dir), "--partitions", "2", "--records", "3000", "--compression", "lz4",
                 "--consumer-groups", "2"]) == 0
    for p in range(2):
        make_partition(log_dir, "events", p, [[T0 + i * 1000 + s * HOUR for i in range(400)] for s in range(4)])
    write_checkpoints(log_dir, high_watermarks={("events", 0): 1500, ("events", 1): 1600},
                      log_start_offsets={("events", 0): 10})
    return log_dir


@pytest.fixture(scope="module")
def uploaded(s3_server, tmp_path_factory):
    local = _build(tmp_path_factory.mktemp("object-store"))
    uri = s3_server.upload(local, BUCKET, "cluster-a/broker-0")
    return local, uri


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _same(capsys, local: Path, uri: str, argv_of):
    """Run a command on the local copy and on the URI; both outputs with the location replaced."""
    code_l, out_l, err_l = _run(capsys, argv_of(str(local)))
    code_r, out_r, err_r = _run(capsys, argv_of(uri))
    assert (code_l, code_r) == (0, 0), (err_l, err_r)
    assert out_r.replace(uri, "<dir>") == out_l.replace(str(local), "<dir>")
    assert "Traceback" not in err_r
    return out_r


# --- the read commands: local and s3:// answer the same ------------------------------------------

@pytest.mark.parametrize("time", ["-2", "-1", "-3", str(T0 + HOUR + 150_000), str(T0 + 3 * HOUR + 399_500),
                                  str(T0 + 10 * HOUR)])
@pytest.mark.parametrize("topic", ["events", "demo-orders"])
def test_offsets_on_s3_equal_local(s3_env, uploaded, capsys, time, topic):
    local, uri = uploaded
    out = _same(capsys, local, uri, lambda d: ["offsets", "--log-dirs", d, "--topic", topic, "--time", time, "--json"])
    assert len(out.splitlines()) == 2


@pytest.mark.parametrize("args", [["--offset", "0"], ["--offset", "777"], ["--time", str(T0 + 2 * HOUR)],
                                  ["--offset", "1500", "--isolation", "high_watermark"]])
def test_fetch_on_s3_equals_local(s3_env, uploaded, capsys, args):
    local, uri = uploaded
    out = _same(capsys, local, uri, lambda d: ["fetch", "--log-dirs", d, "--topic", "events", "--partition", "1",
                                                "--max-records", "50", "--json", *args])
    assert out.strip()


def test_dump_deep_iteration_on_s3_equals_local(s3_env, uploaded, capsys):
    local, uri = uploaded
    for folder, name in [("demo-orders-0", "00000000000000000000.log"), ("events-1", "00000000000000000800.log"),
                         ("events-1", "00000000000000000800.index"), ("events-1", "00000000000000000800.timeindex")]:
        out = _same(capsys, local, uri, lambda d: ["dump", "--files", f"{d}/{folder}/{name}", "--deep-iteration",
                                                    "--print-data-log"])
        assert out.startswith(f"Dumping {uri}/{folder}/{name}")


def test_lag_on_s3_equals_local(s3_env, uploaded, capsys):
    local, uri = uploaded
    _same(capsys, local, uri, lambda d: ["lag", "--log-dirs", d, "--json", "--now-ms", str(T0 + 20 * HOUR)])


def test_read_and_iter_segment_on_s3_equal_local(s3_env, uploaded):
    local, uri = uploaded
    for rel in ["demo-orders-1/00000000000000000000.log", "events-0/00000000000000000400.log"]:
        expected = read_segment(local / rel)
        assert read_segment(f"{uri}/{rel}").equals(expected)
        streamed = pa.Table.from_batches(list(iter_segment(f"{uri}/{rel}")))
        assert streamed.equals(expected)


def test_paths_that_went_through_pathlib_are_still_uris(s3_env, uploaded):
    local, uri = uploaded
    collapsed = Path(uri) / "events-0"                  # Path keeps one slash: s3:/bucket/...
    assert str(collapsed).startswith("s3:/") and filesystem.is_uri(collapsed)
    with PartitionLog.open(collapsed) as log, PartitionLog.open(local / "events-0") as here:
        assert log.log_end_offset == here.log_end_offset == 1600
        assert log.log_start_offset == here.log_start_offset == 10


# --- modifying commands refuse URIs ----------------------------------------------------------------

def _bucket_snapshot(server, uri: str) -> dict:
    from pyarrow import fs
    s3 = server.filesystem()
    prefix = uri[len("s3://"):]
    infos = s3.get_file_info(fs.FileSelector(prefix, recursive=True))
    return {i.path: (i.size, i.mtime_ns) for i in infos if i.type == fs.FileType.File}


def test_recover_refuses_a_uri_and_touches_nothing(s3_env, uploaded, capsys):
    _local, uri = uploaded
    before = _bucket_snapshot(s3_env, uri)
    code, out, err = _run(capsys, ["recover", "--log-dirs", uri])
    assert code == 2 and out == ""
    assert "object store" in err and "atomic rename" in err and uri in err and "Traceback" not in err
    assert _bucket_snapshot(s3_env, uri) == before


def test_uri_spellings():
    assert filesystem.canonical_uri("s3:/b/k") == filesystem.canonical_uri("s3://b/k") == "s3://b/k"
    assert filesystem.canonical_uri("hdfs:///data/kafka") == "hdfs:///data/kafka"
    assert filesystem.canonical_uri("gs://b/k/") == "gs://b/k/"
    assert not filesystem.is_uri("file:///data/kafka") and filesystem.local_path("file:///data/kafka") == "/data/kafka"
    assert filesystem.local_path("file:/data/kafka") == "/data/kafka"
    assert not filesystem.is_uri("relative/dir") and not filesystem.is_uri("/abs/s3://x")
    assert filesystem.uri_for_display("s3://b/k?endpoint_override=h:1") == "s3://b/k"


def test_refuse_uris_is_a_pure_check():
    filesystem.refuse_uris(["/data/kafka", Path("relative/dir"), "file:///data/kafka"], "compact")
    for remote in ["s3://b/k", "gs://b/k", "abfs://c@a.dfs.core.windows.net/k", "hdfs://nn:8020/k", "s3:/b/k"]:
        with pytest.raises(UsageError, match="no atomic rename"):
            filesystem.refuse_uris(["/data/kafka", remote], "compact")


# --- errors ------------------------------------------------------------------------------------------

def test_missing_bucket_and_prefix_are_usage_errors(s3_env, capsys):
    for uri in ["s3://no-such-bucket-here/kafka", f"s3://{BUCKET}/no/such/prefix"]:
        code, out, err = _run(capsys, ["offsets", "--log-dirs", uri, "--topic", "events"])
        assert code == 2 and out == "" and "Traceback" not in err
        assert uri in err and "log dir does not exist" in err


def test_missing_file_in_dump_is_a_usage_error(s3_env, uploaded, capsys):
    _local, uri = uploaded
    code, out, err = _run(capsys, ["dump", "--files", f"{uri}/events-0/00000000000000099999.log"])
    assert code == 2 and "no such file" in err and uri in err


def test_wrong_credentials_name_the_uri_and_what_to_check(s3_env, uploaded, capsys, monkeypatch):
    _local, uri = uploaded
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    filesystem.forget_filesystems()
    code, out, err = _run(capsys, ["offsets", "--log-dirs", uri, "--topic", "events"])
    assert code == 1 and out == "" and "Traceback" not in err
    assert uri in err and "AWS_SECRET_ACCESS_KEY" in err and "not-the-secret" not in err


def test_unreachable_endpoint_names_the_endpoint_to_check(s3_env, uploaded, capsys, monkeypatch):
    _local, uri = uploaded
    with socket.socket() as s:                         # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    filesystem.forget_filesystems()
    code, out, err = _run(capsys, ["offsets", "--log-dirs", uri, "--topic", "events"])
    assert code == 1 and out == "" and "Traceback" not in err
    assert uri in err and "cannot be reached" in err and "AWS_ENDPOINT_URL" in err


class _CuttingProxy:
    """A TCP proxy to the S3 server that, once armed, closes each response after ``keep`` bytes."""

    def __init__(self, target: str, keep: int):
        host, port = target.split(":")
        self.target, self.keep, self.armed = (host, int(port)), keep, False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client):
        upstream = socket.create_connection(self.target)

        def forward(src, dst, cutting):
            sent = 0                                   # bytes passed since the proxy was armed
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    if cutting and self.armed:
                        if sent + len(data) > self.keep:
                            dst.sendall(data[:max(0, self.keep - sent)])
                            break
                        sent += len(data)
                    dst.sendall(data)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=forward, args=(client, upstream, False), daemon=True).start()
        forward(upstream, client, True)

    def close(self):
        self.listener.close()


def test_connection_cut_mid_read_is_an_error_not_a_short_result(s3_env, uploaded, monkeypatch):
    _local, uri = uploaded
    proxy = _CuttingProxy(s3_env.endpoint, keep=4096)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{proxy.endpoint}")
        filesystem.forget_filesystems()
        path = f"{uri}/events-0/00000000000000000400.log"
        assert filesystem.stat(path).size > 4096           # listing and stat pass through whole
        proxy.armed = True
        with pytest.raises(KafkalogError) as info:
            read_segment(path)
        text = str(info.value)
        assert uri in text and ("connection was cut" in text or "cannot read" in text)
    finally:
        proxy.close()
        filesystem.forget_filesystems()


def test_error_messages_never_show_a_uri_query():
    error = filesystem.store_error(OSError("AWS Error ACCESS_DENIED during GetObject"),
                                   "s3://b/k?endpoint_override=h:1&access_key=AKIA")
    assert "AKIA" not in str(error) and "s3://b/k" in str(error) and "credentials" in str(error)
    assert filesystem.store_error(FileNotFoundError(errno.ENOENT, "Path does not exist"), "s3://b/k").errno == errno.ENOENT


# --- how many requests and bytes ---------------------------------------------------------------------

def test_a_lookup_reads_the_indexes_and_a_few_kb_of_the_log(s3_env, uploaded):
    local, uri = uploaded
    counts = RequestCounts()
    filesystem.wrap_filesystems(lambda fs: counting_filesystem(fs, counts))
    try:
        with PartitionLog.open(f"{uri}/events-1") as log:
            listed = counts.requests
            answer = log.lookup(T0 + 2 * HOUR + 200_000)
        log_bytes = sum(p.stat().st_size for p in (local / "events-1").glob("*.log"))
    finally:
        filesystem.wrap_filesystems(None)
    with PartitionLog.open(local / "events-1") as here:
        assert answer == here.lookup(T0 + 2 * HOUR + 200_000)
    assert counts.lists >= 1 and counts.requests - listed <= 3 * 4 + 6     # a few per segment, whatever its size
    assert counts.bytes_read < log_bytes / 2, counts
