"""A pyarrow FileSystem wrapper that counts what reaching a log dir costs: requests of each kind
(stat, list, open, ranged read) and bytes read. Used with ``filesystem.wrap_filesystems`` by the
tests and ``bench.object_store`` (the README's requests/bytes table); it forwards reads only.
"""
from __future__ import annotations

import errno
import threading
from dataclasses import dataclass

import pyarrow as pa
from pyarrow import fs as pafs


@dataclass
class RequestCounts:
    """Requests of each kind and bytes read, as a FileSystem wrapper saw them."""
    infos: int = 0          # get_file_info of paths (a HEAD on S3)
    lists: int = 0          # get_file_info of a selector (a LIST)
    opens: int = 0          # open_input_file / open_input_stream (a HEAD on S3)
    reads: int = 0          # read / read_at calls (one ranged GET each on S3)
    bytes_read: int = 0

    @property
    def requests(self) -> int:
        return self.infos + self.lists + self.opens + self.reads

    def as_dict(self) -> dict:
        return {"requests": self.requests, "infos": self.infos, "lists": self.lists, "opens": self.opens,
                "reads": self.reads, "bytes_read": self.bytes_read}


def counting_filesystem(inner, counts: RequestCounts):
    """``inner`` wrapped so that every call is counted in ``counts`` (a pyarrow PyFileSystem)."""
    return pafs.PyFileSystem(_CountingHandler(inner, counts))


class _CountingReader:
    """A file-like object over a pyarrow NativeFile, counting reads and bytes."""

    def __init__(self, inner, counts: RequestCounts, lock: threading.Lock):
        self._inner, self._counts, self._lock = inner, counts, lock
        self.closed = False

    def _count(self, data: bytes) -> bytes:
        with self._lock:
            self._counts.reads += 1
            self._counts.bytes_read += len(data)
        return data

    def read(self, nbytes: int = -1) -> bytes:
        return self._count(self._inner.read() if nbytes is None or nbytes < 0 else self._inner.read(nbytes))

    def read_at(self, nbytes: int, offset: int) -> bytes:
        return self._count(self._inner.read_at(nbytes, offset))

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._inner.seek(offset, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def size(self) -> int:
        return self._inner.size()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True
        self._inner.close()


class _CountingHandler(pafs.FileSystemHandler):
    """pyarrow FileSystemHandler forwarding to a FileSystem; reads only (the readers never write)."""

    def __init__(self, inner, counts: RequestCounts):
        self.inner, self.counts, self.lock = inner, counts, threading.Lock()

    def _add(self, field: str) -> None:
        with self.lock:
            setattr(self.counts, field, getattr(self.counts, field) + 1)

    def __eq__(self, other):
        return isinstance(other, _CountingHandler) and self.inner.equals(other.inner)

    def __ne__(self, other):
        return not self == other

    def get_type_name(self) -> str:
        return "counting+" + self.inner.type_name

    def normalize_path(self, path):
        return self.inner.normalize_path(path)

    def get_file_info(self, paths):
        for _ in paths:
            self._add("infos")
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector):
        self._add("lists")
        return self.inner.get_file_info(selector)

    def open_input_file(self, path):
        self._add("opens")
        return pa.PythonFile(_CountingReader(self.inner.open_input_file(path), self.counts, self.lock), mode="r")

    def open_input_stream(self, path):
        self._add("opens")
        return pa.PythonFile(_CountingReader(self.inner.open_input_stream(path), self.counts, self.lock), mode="r")

    def _read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "the counting wrapper measures reads only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only
