"""Where log-dir files live: a local path, or a URI of any ``pyarrow.fs`` scheme (``s3://``,
``gs://``, ``abfs://``, ``hdfs://``, ...), read through the few calls the readers need — list a
folder, stat a file, read a small file whole, read byte ranges of a large one.

Local paths (and ``file://`` URIs) stay on the os / mmap fast path; everything else goes to
``pyarrow.fs.FileSystem.from_uri``, one FileSystem per bucket (or host) and process, so
credentials and endpoints come only from where pyarrow and the cloud SDKs look: the standard
environment variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...), config files, instance
roles, or the URI's own query (``?endpoint_override=...&scheme=http``). kafkalog never takes
them on the command line, and ``uri_for_display`` drops a URI's query so they reach no report.

A URI that went through ``pathlib.Path`` loses one slash (``s3://b/k`` becomes ``s3:/b/k``): both
spellings are the URI, so the readers may keep joining paths with ``Path``. A path whose first
part is ``<scheme>:`` (two letters or more) is therefore never a local path.

Object stores have no rename, so log dirs are never written here: ``refuse_uris`` is the check the
jobs that modify a log dir in place make before touching anything. ``write_object`` writes a whole
object (a job's report or page), which an object store shows complete or not at all.

Failures of a remote call become :class:`ObjectStoreError` (a KafkalogError and an OSError, so
per-partition ``except OSError`` reporting keeps working) naming the URI and what to check.
``wrap_filesystems`` passes every FileSystem made through a wrapper: ``counting_filesystem`` counts
requests and bytes (the README's table).
"""
from __future__ import annotations

import errno
import mmap
import os
import re
import stat as stat_module
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

import numpy as np

from kafkalog.errors import KafkalogError, UsageError

PathLike = Union[str, os.PathLike]

# <scheme>:// (or <scheme>:/ after pathlib) at the start; one-letter schemes would be drive letters.
# The rest keeps a third slash: hdfs:///path has an empty authority.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?:/)?(.*)$", re.DOTALL)
LOCAL_SCHEMES = ("file", "local")

# What a failed call's message says, and what the user should check (first match wins).
_DIAGNOSES: Tuple[Tuple[str, str, str], ...] = (
    (r"no.?such.?bucket|bucket does not exist|specified bucket does not exist",
     "the bucket does not exist", "check the bucket name in the URI and the account or region it lives in"),
    (r"invalid.?access.?key|signature.?does.?not.?match|access.?denied|forbidden|HTTP response code: 403|"
     r"HTTP status 403|invalid.?token|expired.?token|no.?credentials|credentials? (?:were )?not",
     "access was refused", "check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the provider "
     "your cloud's SDK reads) and that they may list and read this bucket"),
    (r"curlCode: (?:7|6|28)|Couldn't connect|Could not connect|Connection refused|Could not resolve|"
     r"Couldn't resolve|Failed to connect|Timeout was reached|timed out|Network is unreachable|No route to host",
     "the endpoint cannot be reached", "check the endpoint (AWS_ENDPOINT_URL or the URI's endpoint_override), "
     "the network and any proxy"),
    (r"curlCode: (?:18|52|55|56)|partial file|Connection reset|Recv failure|Send failure|"
     r"connection was closed|Server returned nothing|Premature end|Connection died|unexpected EOF",
     "the connection was cut during the read", "the read is incomplete and nothing was reported from it; "
     "retry, and check the network and the endpoint's health"),
    (r"Path does not exist|no.?such.?key|not found|No such file|HTTP response code: 404|HTTP status 404",
     "no such bucket, object or prefix", "check the bucket and prefix in the URI (object stores list a prefix only "
     "while something is under it)"),
)


class ObjectStoreError(KafkalogError, OSError):
    """A call to an object store (or any pyarrow.fs FileSystem) failed: the message names the URI,
    what happened and what to check."""

    default_hint = "check the URI, the credentials and the endpoint"


class ObjectNotFoundError(ObjectStoreError, FileNotFoundError):
    """The bucket, object or prefix does not exist (a FileNotFoundError, as a missing local file)."""


@dataclass(frozen=True)
class FileStat:
    """What the readers need of a stat: size, mtime (ns) and kind."""
    size: int
    mtime_ns: int
    is_dir: bool

    @property
    def st_size(self) -> int:
        return self.size

    @property
    def st_mtime_ns(self) -> int:
        return self.mtime_ns


class RemoteEntry:
    """One listed entry of a remote folder, with os.DirEntry's name / path / is_dir()."""

    __slots__ = ("name", "path", "_stat")

    def __init__(self, name: str, path: str, stat: FileStat):
        self.name, self.path, self._stat = name, path, stat

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return self._stat.is_dir

    def is_file(self, follow_symlinks: bool = True) -> bool:
        return not self._stat.is_dir

    def is_symlink(self) -> bool:
        return False

    def stat(self, follow_symlinks: bool = True) -> FileStat:
        return self._stat

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"<RemoteEntry {self.path!r}>"


# --- which paths are URIs -----------------------------------------------------------------

def split_uri(path: PathLike) -> Optional[Tuple[str, str]]:
    """(scheme, rest after the slashes) of a remote URI, either spelling; None for a local path."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        return None
    match = _URI.match(text)
    if match is None or match.group(1).lower() in LOCAL_SCHEMES:
        return None
    return match.group(1).lower(), match.group(2)


def is_uri(path: PathLike) -> bool:
    """True for a path that names a file on a remote FileSystem (not a local path, not file://)."""
    return split_uri(path) is not None


def local_path(path: PathLike) -> str:
    """A local path as os functions take it: ``file:///x`` and ``file:/x`` become ``/x``."""
    text = os.fspath(path)
    match = _URI.match(text) if isinstance(text, str) else None
    if match is not None and match.group(1).lower() in LOCAL_SCHEMES:
        return "/" + match.group(2).lstrip("/")
    return text


def canonical_uri(path: PathLike) -> str:
    """``scheme://rest`` (the spelling with both slashes) of a URI; a local path unchanged."""
    parts = split_uri(path)
    if parts is None:
        return local_path(path)
    scheme, rest = parts
    return f"{scheme}://{rest}"


def uri_for_display(path: PathLike) -> str:
    """The path or URI for messages and reports: a URI without its query (which may hold options
    such as endpoints, and could hold keys)."""
    text = canonical_uri(path)
    return text.split("?", 1)[0] if is_uri(text) else text


def refuse_uris(paths: Sequence[PathLike], job: str, *, what: str = "log dir", hint: Optional[str] = None) -> None:
    """The check every job that modifies a log dir in place makes first: a UsageError (exit 2,
    nothing touched) when any of ``paths`` is on an object store (``hint``: what to do instead)."""
    remote = [uri_for_display(p) for p in paths if is_uri(p)]
    if remote:
        raise UsageError(
            f"{job} modifies the {what} in place and {', '.join(remote)} is on an object store, which has no "
            "atomic rename: nothing was changed",
            hint=hint or "run the dry run (or the report / verification) on the URI, or copy the log dir to a local "
                         "disk, run it there and upload the result")


# --- FileSystems ----------------------------------------------------------------------------

_filesystems: Dict[str, Tuple[object, str]] = {}
_filesystems_lock = threading.Lock()
_wrapper = None          # a callable FileSystem -> FileSystem (CountingFileSystem), for measurements


def forget_filesystems() -> None:
    """Drop the cached FileSystems (after the environment they were built from changed)."""
    with _filesystems_lock:
        _filesystems.clear()


def wrap_filesystems(wrapper) -> None:
    """Pass every FileSystem made from now on through ``wrapper`` (None: stop); drops the cache."""
    global _wrapper
    _wrapper = wrapper
    forget_filesystems()


def resolve(path: PathLike):
    """(pyarrow FileSystem, path on it) for a URI; one FileSystem per scheme and authority."""
    from pyarrow import fs as pafs

    uri = canonical_uri(path)
    parts = urlsplit(uri)
    root = f"{parts.scheme}://{parts.netloc}" + (f"?{parts.query}" if parts.query else "")
    with _filesystems_lock:
        cached = _filesystems.get(root)
    if cached is None:
        with store_errors(uri):
            filesystem, root_path = pafs.FileSystem.from_uri(root)
        if _wrapper is not None:
            filesystem = _wrapper(filesystem)
        cached = (filesystem, root_path)
        with _filesystems_lock:
            _filesystems[root] = cached
    filesystem, root_path = cached
    rest = parts.path.strip("/")
    if not rest:
        return filesystem, root_path
    return filesystem, (root_path.rstrip("/") + "/" + rest) if root_path.strip("/") else "/" + rest


@contextmanager
def store_errors(path: PathLike, doing: str = "read") -> Iterator[None]:
    """Turn a failed remote call into an ObjectStoreError naming the URI and what to check."""
    try:
        yield
    except ObjectStoreError:
        raise
    except (OSError, _arrow_error()) as exc:
        raise store_error(exc, path, doing) from None


def _arrow_error():
    import pyarrow as pa
    return pa.ArrowException


def store_error(exc: BaseException, path: PathLike, doing: str = "read") -> ObjectStoreError:
    text = str(exc)
    where = uri_for_display(path)
    missing = isinstance(exc, FileNotFoundError) or what_is_missing(text)
    kind = ObjectNotFoundError if missing else ObjectStoreError
    for pattern, what, hint in _DIAGNOSES:
        if re.search(pattern, text, re.IGNORECASE):
            error = kind(f"cannot {doing}: {what} ({_first_line(text)})", path=where, hint=hint)
            break
    else:
        error = kind(f"cannot {doing} ({_first_line(text)})", path=where)
    if missing:
        error.errno = errno.ENOENT
    error.strerror = f"{error.message} ({error.hint})"     # what callers quote when they wrap an OSError
    error.filename = where
    return error


def what_is_missing(text: str) -> bool:
    return bool(re.search(r"Path does not exist|no.?such.?key|no.?such.?bucket|bucket does not exist|"
                          r"HTTP response code: 404|HTTP status 404", text, re.IGNORECASE))


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no detail"
    return line if len(line) <= 300 else line[:297] + "..."


# --- the calls the readers make -------------------------------------------------------------

REMOTE_THREADS = 32          # remote calls in flight at once when listing many folders (they wait on the network)


def in_parallel(fn, items: Sequence) -> dict:
    """{item: Future of fn(item)} run on REMOTE_THREADS threads, all done on return; ``.result()``
    returns or raises as the call did."""
    from concurrent.futures import ThreadPoolExecutor
    if not items:
        return {}
    with ThreadPoolExecutor(max_workers=min(REMOTE_THREADS, len(items))) as pool:
        futures = {item: pool.submit(fn, item) for item in items}
    return futures

def _stat_of(info) -> FileStat:
    from pyarrow import fs as pafs
    mtime = info.mtime_ns if info.mtime_ns is not None else 0
    return FileStat(int(info.size or 0), int(mtime), info.type == pafs.FileType.Directory)


def scandir(path: PathLike) -> list:
    """The entries of a folder (os.DirEntry locally, RemoteEntry on a URI), in no set order.
    FileNotFoundError (an ObjectStoreError remotely) when it does not exist."""
    if not is_uri(path):
        with os.scandir(local_path(path)) as entries:
            return list(entries)
    from pyarrow import fs as pafs
    uri = canonical_uri(path).rstrip("/")
    filesystem, inner = resolve(uri)
    with store_errors(uri, "list"):
        infos = filesystem.get_file_info(pafs.FileSelector(inner, recursive=False, allow_not_found=True))
        if not infos and filesystem.get_file_info(inner).type == pafs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "Path does not exist", uri)
    return [RemoteEntry(info.base_name, f"{uri}/{info.base_name}", _stat_of(info)) for info in infos]


def listdir(path: PathLike) -> List[str]:
    if not is_uri(path):
        return os.listdir(local_path(path))
    return [entry.name for entry in scandir(path)]


def stat(path: PathLike) -> FileStat:
    """Size, mtime and kind; FileNotFoundError (an ObjectStoreError remotely) when missing."""
    if not is_uri(path):
        st = os.stat(local_path(path))
        return FileStat(st.st_size, st.st_mtime_ns, stat_module.S_ISDIR(st.st_mode))
    from pyarrow import fs as pafs
    filesystem, inner = resolve(path)
    with store_errors(path, "stat"):
        info = filesystem.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "Path does not exist", canonical_uri(path))
    return _stat_of(info)


def _remote_stat_or_none(path: PathLike) -> Optional[FileStat]:
    """A remote stat, None when nothing is there (other failures raise)."""
    try:
        return stat(path)
    except ObjectNotFoundError:
        return None


def exists(path: PathLike) -> bool:
    if not is_uri(path):
        return os.path.exists(local_path(path))
    return _remote_stat_or_none(path) is not None


def isdir(path: PathLike) -> bool:
    if not is_uri(path):
        return os.path.isdir(local_path(path))
    found = _remote_stat_or_none(path)
    return found is not None and found.is_dir


def isfile(path: PathLike) -> bool:
    if not is_uri(path):
        return os.path.isfile(local_path(path))
    found = _remote_stat_or_none(path)
    return found is not None and not found.is_dir


def read_bytes(path: PathLike) -> bytes:
    """A whole (small) file: checkpoints, indexes, snapshots."""
    if not is_uri(path):
        with open(local_path(path), "rb") as f:
            return f.read()
    filesystem, inner = resolve(path)
    with store_errors(path):
        with filesystem.open_input_file(inner) as f:
            data = f.read()
    return data


def write_object(path: PathLike, data: bytes) -> None:
    """Write a whole object to a URI (one PUT, or a multipart upload completed at the end)."""
    filesystem, inner = resolve(path)
    with store_errors(path, "write"):
        with filesystem.open_output_stream(inner) as out:
            out.write(data)


class RangeFile:
    """A file opened for reads at positions: os.pread locally, ranged GETs remotely (one per call)."""

    def __init__(self, path: PathLike):
        self.path = path
        self.remote = is_uri(path)
        if self.remote:
            filesystem, inner = resolve(path)
            with store_errors(path):
                self._file = filesystem.open_input_file(inner)
                self.size = self._file.size()
            self._fd = None
        else:
            self._fd = os.open(local_path(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self.size = os.fstat(self._fd).st_size
            self._file = None

    def read_at(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer only at the end of the file)."""
        if self._fd is not None:
            return os.pread(self._fd, size, position)
        size = max(0, min(size, self.size - position))
        if size == 0:
            return b""
        with store_errors(self.path):
            data = self._file.read_at(size, position)
        if len(data) != size:
            raise store_error(OSError(f"Transferred a partial file: {len(data)} of {size} bytes at {position}"),
                              self.path)
        return data

    def fileno(self) -> int:
        if self._fd is None:
            raise OSError(errno.EBADF, "a remote file has no descriptor", uri_for_display(self.path))
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "RangeFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteView:
    """MappedFile's interface (``array``, ``len``, ``close``) for a remote file: an anonymous
    mapping of the file's size in which only the byte ranges asked for are fetched; the untouched
    rest costs no memory. ``fetch(start, end)`` reads a range (once) in ranged GETs of at most
    ``request_bytes``."""

    REQUEST_BYTES = 8 << 20

    def __init__(self, path: PathLike, start: int = 0, end: Optional[int] = None):
        self.path = os.fspath(path)
        self._file = RangeFile(path)
        size = self._file.size
        self._map = mmap.mmap(-1, size) if size else None
        self.array = np.frombuffer(self._map, dtype=np.uint8) if self._map is not None else np.empty(0, np.uint8)
        self._fetched: List[Tuple[int, int]] = []
        self.fetch(start, size if end is None else min(end, size))

    def fetch(self, start: int, end: int) -> None:
        start, end = max(0, start), min(end, len(self.array))
        for lo, hi in self._fetched:
            if lo <= start and end <= hi:
                return
        pos = start
        while pos < end:
            assert self._map is not None          # end > 0: the file has bytes, so it is mapped
            n = min(self.REQUEST_BYTES, end - pos)
            self._map[pos:pos + n] = self._file.read_at(pos, n)
            pos += n
        self._fetched.append((start, end))

    def __len__(self) -> int:
        return len(self.array)

    def close(self) -> None:
        self.array = np.empty(0, np.uint8)
        self._file.close()
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass       # an Arrow buffer still points into the map; the GC closes it later

    def __enter__(self) -> "RemoteView":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MappedFile:
    """A read-only view of a file's bytes: mmap for non-empty files, so a 1 GB segment is paged, not read."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        self._file = open(self.path, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._mmap = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.array = np.frombuffer(self._mmap, dtype=np.uint8) if self._mmap is not None else np.empty(0, np.uint8)

    def __len__(self) -> int:
        return len(self.array)

    def close(self) -> None:
        self.array = np.empty(0, np.uint8)
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass   # an Arrow buffer still points into the map; the GC closes it later
        self._file.close()

    def __enter__(self) -> "MappedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_view(path: PathLike, start: int = 0, end: Optional[int] = None):
    """The bytes of a file as a numpy array: a memory map locally (``MappedFile``), and remotely a
    RemoteView holding bytes [start, end) (all by default)."""
    if not is_uri(path):
        return MappedFile(local_path(path))
    return RemoteView(path, start, end)
