"""A folder tree written in a new place — a local folder or any ``pyarrow.fs`` URI — for a job that
writes a log dir's copy instead of changing it (``compact --output-dir``): files streamed in (never a
whole file in memory) with their size and CRC-32C counted on the way, whole small files written at
once, every file read back to verify, folders removed.

No rename is needed anywhere: a local file goes through ``durable`` (fsynced, fenced by the
destination's lock, never through a symlink); a remote file is an object, which a store shows
complete or not at all once its stream is closed. Whether a file is *complete* is said elsewhere
(``output_dir``'s manifests, written last).
"""
from __future__ import annotations

import os
import shutil
from typing import Callable, List, Optional, Tuple

from kafkalog.errors import KafkalogError
from kafkalog.format.record_batch import crc32c_update
from kafkalog.fs import durable, filesystem

COPY_CHUNK_BYTES = 8 << 20        # a copy or a read-back holds this much of a file at a time
# A remote stream uploads its parts in the background and queues what it is given meanwhile: fed from
# a local disk faster than the network takes it, it held 520 MiB of a 590 MB segment. Every this many
# bytes the writer waits for the parts in flight (flush), which bounds that queue.
REMOTE_FLUSH_BYTES = 32 << 20


class TreeWriter:
    """One file of the tree, streamed: ``write`` the bytes in order, then ``close`` (fsynced locally,
    the upload completed remotely) or ``abort`` (nothing of it is left)."""

    def __init__(self, tree: "OutputTree", rel: str):
        self.where = tree.path(rel)
        self.remote = tree.remote
        self.size = 0
        self.crc = 0
        self._flushed = 0
        if self.remote:
            fs, inner = filesystem.resolve(self.where)
            with filesystem.store_errors(self.where, "write"):
                self._out = fs.open_output_stream(inner)
        else:
            os.makedirs(os.path.dirname(self.where), exist_ok=True)
            self._out = durable.open_for_write(self.where, owner=durable.AS_CREATED)

    def write(self, data) -> None:
        if self.remote:
            with filesystem.store_errors(self.where, "write"):
                self._out.write(data)
                if self.size + len(data) - self._flushed >= REMOTE_FLUSH_BYTES:
                    self._out.flush()           # waits for the parts in flight: a bounded queue
                    self._flushed = self.size + len(data)
        else:
            self._out.write(data)
        self.crc = crc32c_update(data, self.crc)
        self.size += len(data)

    def close(self) -> None:
        """Make the file durable and complete (idempotent)."""
        if self._out is None:
            return
        out, self._out = self._out, None
        if self.remote:
            with filesystem.store_errors(self.where, "write"):
                out.close()
        else:
            out.flush()
            os.fsync(out.fileno())
            out.close()

    def abort(self) -> None:
        """Leave nothing of the file behind (errors while doing so are let be: a rerun removes it)."""
        if self._out is not None:
            try:
                self._out.close()
            except (OSError, KafkalogError):
                pass
            self._out = None
        try:
            if self.remote:
                fs, inner = filesystem.resolve(self.where)
                fs.delete_file(inner)
            elif durable.fences_hold():
                durable.remove(self.where, missing_ok=True)
        except (OSError, KafkalogError):
            pass


class OutputTree:
    """The destination's root (a local path or a URI); files named by their path relative to it."""

    def __init__(self, root: str):
        self.remote = filesystem.is_uri(root)
        self.root = filesystem.canonical_uri(root).rstrip("/") if self.remote else filesystem.local_path(root)

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.remote else os.path.join(self.root, rel)

    def writer(self, rel: str) -> TreeWriter:
        return TreeWriter(self, rel)

    def write(self, rel: str, data: bytes, *, mtime_ns: Optional[int] = None) -> Tuple[int, int]:
        """A whole small file (an index, a checkpoint); its (size, CRC-32C)."""
        return self._written(rel, lambda w: w.write(data), mtime_ns)

    def copy_in(self, source: str, rel: str, *, mtime_ns: Optional[int] = None) -> Tuple[int, int]:
        """Copy a file (local or URI) into the tree, COPY_CHUNK_BYTES at a time; its (size, CRC-32C)."""
        def fill(w: TreeWriter) -> None:
            with filesystem.RangeFile(source) as f:
                for at in range(0, f.size, COPY_CHUNK_BYTES):
                    w.write(f.read_at(at, COPY_CHUNK_BYTES))
        return self._written(rel, fill, mtime_ns)

    def _written(self, rel: str, fill: Callable[[TreeWriter], None], mtime_ns: Optional[int]) -> Tuple[int, int]:
        """The file ``rel`` written by ``fill`` and closed (aborted, nothing left, if anything fails),
        its mtime set; its (size, CRC-32C)."""
        w = self.writer(rel)
        try:
            fill(w)
            w.close()
        except BaseException:
            w.abort()
            raise
        self.set_mtime(rel, mtime_ns)
        return w.size, w.crc

    def set_mtime(self, rel: str, mtime_ns: Optional[int]) -> None:
        """A local file's mtime (a broker's time-based retention reads it); objects keep their upload time."""
        if mtime_ns is not None and not self.remote:
            durable.set_mtime(self.path(rel), mtime_ns)

    def checksum(self, rel: str) -> Tuple[int, int]:
        """(size, CRC-32C) of the file as read back from the destination."""
        crc = 0
        with filesystem.RangeFile(self.path(rel)) as f:
            for at in range(0, f.size, COPY_CHUNK_BYTES):
                crc = crc32c_update(f.read_at(at, COPY_CHUNK_BYTES), crc)
            return f.size, crc

    def verify(self, rel: str, size: int, crc: int) -> None:
        """Raise unless the file reads back with this size and CRC-32C."""
        back = self.checksum(rel)
        if back != (size, crc):
            raise KafkalogError(f"read back as {back[0]} bytes with CRC-32C {back[1]:#010x}, written as {size} "
                                f"bytes with {crc:#010x}", path=filesystem.uri_for_display(self.path(rel)))

    def size_of(self, rel: str) -> Optional[int]:
        """The file's size, None when it is missing."""
        try:
            return filesystem.stat(self.path(rel)).size
        except FileNotFoundError:
            return None

    def read(self, rel: str) -> Optional[bytes]:
        """A whole small file, None when it is missing."""
        try:
            return filesystem.read_bytes(self.path(rel))
        except FileNotFoundError:
            return None

    def publish(self, rel: str, data: bytes) -> None:
        """A marker file, all or nothing: locally through ``<name>.tmp`` and a rename, remotely one PUT."""
        if self.remote:
            filesystem.write_object(self.path(rel), data)
        else:
            os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
            durable.replace_file(self.path(rel), data, owner=durable.AS_CREATED)

    def names(self, rel: str = "") -> List[str]:
        """The names in a folder of the tree ([] when it does not exist)."""
        try:
            return filesystem.listdir(self.path(rel) if rel else self.root)
        except FileNotFoundError:
            return []

    def exists(self) -> bool:
        return filesystem.exists(self.root)

    def make_root(self) -> None:
        if not self.remote:
            os.makedirs(self.root, exist_ok=True)

    def remove(self, rel: str) -> None:
        """Remove a folder of the tree and all it holds (nothing when it is missing)."""
        where = self.path(rel)
        if self.remote:
            fs, inner = filesystem.resolve(where)
            from pyarrow import fs as pafs
            with filesystem.store_errors(where, "remove"):
                if fs.get_file_info(inner).type != pafs.FileType.NotFound:
                    fs.delete_dir(inner)
            return
        if os.path.lexists(where):
            durable.check_fences("removing", where)
            shutil.rmtree(where)

    def sync(self, rel: str = "") -> None:
        """fsync a local folder of the tree (its new entries durable); nothing remotely."""
        if not self.remote:
            durable.fsync_dir(self.path(rel) if rel else self.root)


__all__ = ["COPY_CHUNK_BYTES", "OutputTree", "REMOTE_FLUSH_BYTES", "TreeWriter"]
