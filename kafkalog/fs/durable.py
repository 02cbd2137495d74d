"""Durable, fenced file changes in log dirs: the one place that creates, replaces, renames and removes
files there, so every such change is fsynced, keeps the owner, group and mode of what it replaces,
never follows a symlink, and is made only while the job still holds the log dir's lock.

Ownership: a new file takes the owner, group and mode of its *model* — the file it replaces, else the
live file its temporary name stands for (``00…5.log.cleaned`` → ``00…5.log``), else its folder (mode
without the execute bits). A broker running as ``kafka`` can then read, rename and delete what a job
run as root wrote. :func:`ownership_problem` tells, before anything is changed, whether this process
may give files those owners (root may; another user only its own files and groups).

Symlinks: files are opened with ``O_NOFOLLOW`` (a symlink planted where a file is written is refused
with ELOOP), temporary files are created with ``O_EXCL``, and mtimes are set on the link, not its
target. A rename replaces a link itself, never what it points to.

Fencing: a job holds each log dir's ``.lock`` in one process (the driver); work on the dir may run in
others (Spark's Python workers live in their own process group and outlive a killed driver). A
*fence* (``lock.LockFence``) says whether that lock is still held by that process; inside
:func:`fenced`, every change made through this module first checks the active fences and raises
FenceLostError instead of touching the dir, and a watchdog thread ends the process
(``os._exit(FENCE_LOST_EXIT)``) within WATCHDOG_INTERVAL_S of a fence held by another process being
lost, so a worker whose driver is gone stops even in the middle of writing a file.
"""
from __future__ import annotations

import errno
import io
import os
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Union

from kafkalog.errors import FenceLostError, OwnershipError, SymlinkRefusedError

PathLike = Union[str, os.PathLike]

TMP_SUFFIX = ".tmp"
# Suffixes a file has while it stands in for a live one (Kafka's LogFileUtils and CheckpointFile).
TEMPORARY_SUFFIXES = (".cleaned", ".swap", ".tmp", ".deleted")
WATCHDOG_INTERVAL_S = 0.05
FENCE_LOST_EXIT = 75                      # EX_TEMPFAIL: the worker stopped because its job is gone
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_PERMISSION_BITS = 0o777
_NO_EXECUTE = 0o666


# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Ownership:
    """Owner, group and permission bits a new file is given."""
    uid: int
    gid: int
    mode: int

    @classmethod
    def of(cls, status: os.stat_result) -> "Ownership":
        """A file's own bits; a folder's without the execute and special bits (0o755 → 0o644)."""
        mode = stat.S_IMODE(status.st_mode) & (_NO_EXECUTE if stat.S_ISDIR(status.st_mode) else _PERMISSION_BITS)
        return cls(status.st_uid, status.st_gid, mode)


# For files outside log dirs (reports): this process's owner and the umask's mode, as open(2) makes them.
AS_CREATED = Ownership(-1, -1, 0o666)


# --- fences --------------------------------------------------------------------------------------

_fences: list = []                     # active fences of this process (objects with holds() and describe())
_fences_guard = threading.Lock()
_watchdog: Optional[threading.Thread] = None


@contextmanager
def fenced(fences: Iterable) -> Iterator[None]:
    """Make every change through this module, in this process, check ``fences`` first (None entries
    are ignored); fences held by another process are also watched, and their loss ends this process."""
    mine = [f for f in fences if f is not None]
    with _fences_guard:
        _fences.extend(mine)
    if any(not f.local for f in mine):
        _start_watchdog()
    try:
        yield
    finally:
        with _fences_guard:
            for f in mine:
                _fences.remove(f)


def check_fences(action: str, path: PathLike) -> None:
    """Raise FenceLostError when a fence in force is no longer held: called immediately before each
    change to a log dir (``action`` and ``path`` name it in the message)."""
    with _fences_guard:
        active = list(_fences)
    for fence in active:
        if not fence.holds():
            raise FenceLostError(f"stopped before {action}: {fence.describe()} no longer holds the log dir's lock",
                                 path=os.fspath(path))


def fences_hold() -> bool:
    """Whether every fence in force is still held (True when none is)."""
    with _fences_guard:
        active = list(_fences)
    try:
        return all(f.holds() for f in active)
    except OSError:
        return False


def _start_watchdog() -> None:
    global _watchdog
    with _fences_guard:
        if _watchdog is not None and _watchdog.is_alive():
            return
        _watchdog = threading.Thread(target=_watch, name="kafkalog-fence-watchdog", daemon=True)
        _watchdog.start()


def _watch() -> None:
    while True:
        time.sleep(WATCHDOG_INTERVAL_S)
        with _fences_guard:
            remote = [f for f in _fences if not f.local]
        for fence in remote:
            try:
                held = fence.holds()
            except OSError:
                held = False
            if not held:
                os._exit(FENCE_LOST_EXIT)


# --- ownership -----------------------------------------------------------------------------------

def model_of(path: PathLike) -> Path:
    """The file (or folder) whose owner, group and mode a file written at ``path`` takes."""
    path = Path(path)
    if os.path.lexists(path):
        return path
    name = path.name
    for suffix in TEMPORARY_SUFFIXES:
        if name.endswith(suffix) and os.path.lexists(path.with_name(name[:-len(suffix)])):
            return path.with_name(name[:-len(suffix)])
    return path.parent


def ownership_for(path: PathLike) -> Ownership:
    model = model_of(path)
    status = os.lstat(model)
    if stat.S_ISLNK(status.st_mode):
        raise SymlinkRefusedError("is a symlink; a job never writes through one", path=os.fspath(model))
    return Ownership.of(status)


def can_give(owner: Ownership, *, euid: Optional[int] = None, groups: Optional[Iterable[int]] = None) -> bool:
    """Whether this process may make a file of its own have ``owner``'s uid and gid (chown(2) rules)."""
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return True
    groups = set(os.getgroups() if groups is None else groups) | {os.getegid()}
    return owner.uid == euid and owner.gid in groups


def ownership_problem(log_dir: PathLike) -> Optional[str]:
    """Why a job run by this process could not give new files in ``log_dir`` the owner and group of
    the files there (None when it can): checked before a modifying job changes anything."""
    log_dir = Path(log_dir)
    seen = set()
    for model in _files_and_folders(log_dir):
        try:
            status = os.lstat(model)
        except FileNotFoundError:
            continue
        key = (status.st_uid, status.st_gid)
        if key in seen:
            continue
        seen.add(key)
        if not can_give(Ownership.of(status)):
            return (f"{model} is owned by uid {status.st_uid} gid {status.st_gid}, and this job (uid {os.geteuid()}) "
                    "may not give new files that owner and group; run it as that user or as root")
    return None


def _files_and_folders(log_dir: Path) -> Iterator[Path]:
    yield log_dir
    with os.scandir(log_dir) as entries:
        for entry in entries:
            yield Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                with os.scandir(entry.path) as inner:
                    for f in inner:
                        yield Path(f.path)


def _apply(fd: int, owner: Ownership, path: Path) -> None:
    if owner is AS_CREATED:
        return
    status = os.fstat(fd)
    if (status.st_uid, status.st_gid) != (owner.uid, owner.gid):
        try:
            os.fchown(fd, owner.uid, owner.gid)
        except PermissionError:
            raise OwnershipError(f"cannot give the file uid {owner.uid} gid {owner.gid} (those of the file it replaces"
                                 " or its folder): not permitted", path=os.fspath(path)) from None
    if stat.S_IMODE(status.st_mode) != owner.mode:
        os.fchmod(fd, owner.mode)


# --- changes -------------------------------------------------------------------------------------

def _open_new(path: Path, flags: int, owner: Ownership) -> int:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags | _NOFOLLOW | _CLOEXEC, owner.mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SymlinkRefusedError("is a symlink; a job never writes through one", path=os.fspath(path)) from None
        raise
    try:
        _apply(fd, owner, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_dir(directory: PathLike) -> None:
    """fsync a directory so a rename or creation inside it is durable (Kafka's Utils.flushDir); file
    systems that cannot sync a directory are let be."""
    fd = os.open(os.fspath(directory) or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def replace_file(path: PathLike, data, *, sync: bool = True, mtime_ns: Optional[int] = None,
                 owner: Optional[Ownership] = None) -> None:
    """Replace (or create) ``path`` with ``data`` atomically, as Kafka's CheckpointFile does: write
    ``<path>.tmp`` (a stale one is removed first), fsync it, give it the model's owner and mode,
    rename it over ``path``, fsync the folder. A failure before the rename removes the temp file and
    leaves ``path`` untouched."""
    path = Path(path)
    owner = ownership_for(path) if owner is None else owner
    tmp = path.with_name(path.name + TMP_SUFFIX)
    check_fences("writing", tmp)
    _remove_stale(tmp)
    try:
        fd = _open_new(tmp, os.O_EXCL, owner)
        try:
            check_fences("writing", tmp)       # the creation was one change; the bytes are the next
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if mtime_ns is not None:
            os.utime(tmp, ns=(mtime_ns, mtime_ns), follow_symlinks=False)
        check_fences("renaming into place", path)
        os.replace(tmp, path)
    except BaseException:
        if fences_hold():          # a job that lost its lock leaves even its temp file alone
            _remove_stale(tmp)
        raise
    if sync:
        fsync_dir(path.parent)


def write_file(path: PathLike, data=b"", *, exclusive: bool = False, mtime_ns: Optional[int] = None,
               owner: Optional[Ownership] = None) -> None:
    """Write ``path`` in place (a temporary name such as ``.cleaned``, or a new empty segment with
    ``exclusive``), fsynced, with the model's owner and mode."""
    path = Path(path)
    owner = ownership_for(path) if owner is None else owner
    check_fences("writing", path)
    fd = _open_new(path, os.O_EXCL if exclusive else os.O_TRUNC, owner)
    try:
        if data:
            check_fences("writing", path)      # the creation was one change; the bytes are the next
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if mtime_ns is not None:
        set_mtime(path, mtime_ns)


class _FencedRaw(io.RawIOBase):
    """A file descriptor whose every write(2) is preceded by a fence check."""

    def __init__(self, fd: int, path: Path):
        self._fd, self._path = fd, path

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        check_fences("writing", self._path)
        return os.write(self._fd, data)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()


def open_for_write(path: PathLike, *, buffering: int = 1 << 20, owner: Optional[Ownership] = None) -> io.BufferedWriter:
    """A buffered binary writer on ``path`` (created or truncated, never through a symlink), with the
    model's owner and mode; each write to the file checks the fences."""
    path = Path(path)
    owner = ownership_for(path) if owner is None else owner
    check_fences("writing", path)
    fd = _open_new(path, os.O_TRUNC, owner)
    return io.BufferedWriter(_FencedRaw(fd, path), buffer_size=buffering)


_SYNC_FILE_RANGE_WRITE = 2          # <linux/fs.h>: start writeback of the range's dirty pages, do not wait
_SYNC_FILE_RANGE: Any = None         # libc's sync_file_range, looked up once (False where it is missing)


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Start writing back the dirty pages of bytes [offset, offset + length) of ``fd`` without waiting
    (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``), so that the fsync that makes the file durable
    later finds little left to write: a file written in a long stream then costs no long wait at its
    end. Durability still comes only from that fsync. False (nothing done) where the call is missing."""
    global _SYNC_FILE_RANGE
    if _SYNC_FILE_RANGE is None:
        try:
            import ctypes

            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
            fn.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
            fn.restype = ctypes.c_int
            _SYNC_FILE_RANGE = fn
        except (OSError, AttributeError):          # no C library to load, or no such call (not Linux)
            _SYNC_FILE_RANGE = False
    if not _SYNC_FILE_RANGE or length <= 0:
        return False
    return _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE) == 0


def rename(src: PathLike, dst: PathLike) -> None:
    """``os.replace``, after the fence check (a symlink is renamed itself, never followed)."""
    check_fences("renaming", src)
    os.replace(src, dst)


def remove(path: PathLike, *, missing_ok: bool = False) -> None:
    check_fences("removing", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def set_mtime(path: PathLike, mtime_ns: int) -> None:
    """Set a file's atime and mtime (of a symlink itself, never its target)."""
    check_fences("setting the mtime of", path)
    os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


def truncate(path: PathLike, size: int) -> None:
    """Cut a file to ``size`` bytes and fsync it (never through a symlink)."""
    check_fences("truncating", path)
    try:
        fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SymlinkRefusedError("is a symlink; a job never writes through one", path=os.fspath(path)) from None
        raise
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
