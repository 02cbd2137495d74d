"""A log dir's ``.lock``: the one place that talks to ``fcntl``. Tells whether a broker or another job
holds it, takes it for a job that modifies the dir, and ships that claim to other processes as a fence.

Kafka (``LogManager.lockLogDirs``, ``FileLock.tryLock``) takes ``.lock`` with ``FileChannel.tryLock()``,
which on Linux is a process-associated POSIX record lock (``fcntl(F_SETLK)``, exclusive, whole file).
``is_locked`` asks the kernel with ``F_OFD_GETLK`` on a read-only descriptor: a pure query that never takes
the lock itself (a broker starting at that instant is not refused), needs no write permission (read-only
copies and mounts work), never creates the file, and also sees locks held by this very process. Any
descriptor closed on a file drops this process's POSIX locks on it, so locks taken with ``lock_log_dir`` are
tracked and never re-opened while held. Other platforms fall back to a ``lockf`` probe on a fresh
descriptor.
"""
from __future__ import annotations

import errno
import os
import socket
import struct
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

from kafkalog.errors import KafkalogError, LogDirLockedError
from kafkalog.fs.names import LOCK_FILE
from kafkalog.fs import filesystem

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: Kafka's lock there is not a POSIX lock anyway
    fcntl = None  # type: ignore[assignment, unused-ignore]

PathLike = Union[str, os.PathLike]

# struct flock on Linux with a 64-bit off_t: l_type, l_whence, l_start, l_len, l_pid (native alignment).
_FLOCK = struct.Struct("@hhqqi")
_USE_GETLK = sys.platform.startswith("linux") and fcntl is not None
_held_locks: dict[tuple[int, int], int] = {}   # (st_dev, st_ino) of a .lock -> fd holding it
_held_guard = threading.RLock()
_held_dirs: dict[tuple[int, int], str] = {}    # the same keys -> the log dir, for held_fences
_HOST = socket.gethostname()
_OPEN_FLAGS = getattr(os, "O_CLOEXEC", 0)


# kafkalog takes its lock over [0, KAFKALOG_LOCK_LENGTH): it overlaps the whole-file lock a broker
# takes (FileChannel.tryLock(): [0, Long.MAX_VALUE)), so either refuses the other, and the length tells
# a lock query which of the two holds the file without writing anything into it.
KAFKALOG_LOCK_LENGTH = 0x6B61666B61        # "kafka" as an integer: ~460 GB, far past a .lock's size
JAVA_WHOLE_FILE_LOCK_LENGTH = (1 << 63) - 1
# ... which the JDK hands the kernel as length 0, "to the end of the file, however far it grows"
# (FileDispatcherImpl.lock0 maps Long.MAX_VALUE to l_len 0): what F_GETLK reports for a running broker.
WHOLE_FILE_LOCK_LENGTH = 0
KAFKA_MAIN_CLASS = "kafka.Kafka"   # the broker's main class (bin/kafka-server-start.sh)


@dataclass(frozen=True)
class LockHolder:
    """What the kernel says about a lock that refuses ours: the holder's pid (None when it cannot be
    known: an OFD lock, another host or PID namespace) and the locked range's length."""
    pid: Optional[int]
    length: int

    @property
    def is_kafkalog(self) -> bool:
        return self.length == KAFKALOG_LOCK_LENGTH

    def describe(self) -> str:
        """"another kafkalog job (PID 12, python jobs/compact.py …)", "a Kafka broker …", or "a broker or
        other process …", as far as the lock and /proc tell."""
        if self.is_kafkalog:
            who = "another kafkalog job"
        elif self.length in (JAVA_WHOLE_FILE_LOCK_LENGTH, WHOLE_FILE_LOCK_LENGTH):
            # the main class comes after a classpath of many KB: the whole command line is searched
            args = (_command_line(self.pid, limit=None) or "").split()
            java = bool(args) and os.path.basename(args[0]) == "java"
            if KAFKA_MAIN_CLASS in args:
                who = "a Kafka broker"
            elif self.length == JAVA_WHOLE_FILE_LOCK_LENGTH or java:
                who = "a broker or other Java process"
            else:
                who = "a broker or other process"
        else:
            who = "a broker or other process"
        if self.pid is None:
            return f"{who} (PID unknown: another host or PID namespace)"
        command = _command_line(self.pid)
        return f"{who} (PID {self.pid}{', ' + command if command else ''})"


def _command_line(pid: Optional[int], limit: Optional[int] = 120) -> Optional[str]:
    """A process's command line, its arguments joined by single spaces (a newline inside one too), cut
    to ``limit`` characters (None: whole)."""
    if pid is None or not sys.platform.startswith("linux"):
        return None
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    text = " ".join(" ".join(part.decode("utf-8", "replace").split()) for part in raw.split(b"\0") if part)
    return text if limit is None or len(text) <= limit else text[:limit - 1] + "…"


def _lock_holder(fd: int) -> Optional[LockHolder]:
    """Who holds a lock that would refuse an exclusive lock on fd's file, or None. F_OFD_GETLK
    (Linux >= 3.15) also reports this process's own POSIX locks; F_GETLK, the fallback for older
    kernels, does not."""
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    command = getattr(fcntl, "F_OFD_GETLK", None)
    reply = None
    if command is not None:
        try:
            reply = fcntl.fcntl(fd, command, request)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    if reply is None:
        reply = fcntl.fcntl(fd, fcntl.F_GETLK, request)
    lock_type, _whence, _start, length, pid = _FLOCK.unpack(reply)
    if lock_type == fcntl.F_UNLCK:
        return None
    return LockHolder(pid if pid > 0 else None, length)


def _probe_locked(lock_path: Path) -> bool:
    """Non-Linux fallback: try the lock on a fresh writable descriptor and release it at once."""
    fd = os.open(lock_path, os.O_RDWR | _OPEN_FLAGS)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


_LOCKED_HINT_KAFKALOG = "wait for that job to finish (or stop it), then run again"
_LOCKED_HINT_UNKNOWN = ("find what holds it (`fuser -v <log dir>/.lock`): stop the broker or job that owns this log dir, "
                        "or work on a copy")


def locked_hint(holder: Optional["LockHolder"]) -> str:
    """What to do about a lock ``holder`` holds: wait for another kafkalog job; stop a broker or work
    on a copy; find an unknown holder first."""
    if holder is not None and holder.is_kafkalog:
        return _LOCKED_HINT_KAFKALOG
    if holder is not None and holder.length == JAVA_WHOLE_FILE_LOCK_LENGTH:
        return LogDirLockedError.default_hint
    return _LOCKED_HINT_UNKNOWN


def locked_refusal(log_dir: PathLike, *, doing: str = "") -> LogDirLockedError:
    """The error every command raises or reports for a log dir whose ``.lock`` is held: it names the
    holder — another kafkalog job (PID and command), a Kafka broker, or an unknown process — and gives
    the hint that fits it. ``doing`` adds why that refuses this command (e.g. "a broker recovers its
    own files")."""
    who, hint = holder_and_hint(log_dir)
    return LogDirLockedError(f"the log dir is locked by {who}" + (f"; {doing}" if doing else ""),
                             path=Path(log_dir) / LOCK_FILE, hint=hint)


def holder_and_hint(log_dir: PathLike) -> tuple[str, str]:
    """(who holds the log dir's lock, as far as can be known; what to do about it), for messages."""
    try:
        holder = lock_holder(log_dir)
    except OSError:
        holder = None
    who = holder.describe() if holder is not None else "a live process (a broker or another job)"
    return who, locked_hint(holder)


def process_start_time(pid: int) -> Optional[int]:
    """A process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22): with the pid,
    it names one process even after the pid is reused. None when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()      # after "pid (comm) "; comm may hold spaces
    return int(fields[19])


@dataclass(frozen=True)
class LockFence:
    """A job's claim on a log dir, shipped to the processes that work on it (``durable.fenced``): held
    while the ``.lock`` is locked by kafkalog in process ``pid`` (started at ``start_time``) on
    ``host``. Another host cannot see the pid: there it is held while a kafkalog job holds the lock."""
    log_dir: str
    pid: int
    start_time: Optional[int]
    host: str

    @property
    def local(self) -> bool:
        """This process holds the lock itself (no watchdog needed: it cannot lose it unseen)."""
        return self.pid == os.getpid() and self.host == _HOST

    def holds(self) -> bool:
        if self.local:
            with _held_guard:
                return bool(_own_lock(Path(self.log_dir) / LOCK_FILE))
        if not _USE_GETLK:           # no lock query here: held while someone holds it
            return is_locked(self.log_dir)
        holder = lock_holder(self.log_dir)
        if holder is None or not holder.is_kafkalog:
            return False
        if self.host != _HOST or holder.pid is None:
            return True
        return holder.pid == self.pid and process_start_time(self.pid) == self.start_time

    def describe(self) -> str:
        return f"the job (PID {self.pid} on {self.host}) that locked {self.log_dir}"


def held_fences() -> dict:
    """{log dir: LockFence} for every log dir whose lock this process holds (``lock_log_dir``)."""
    with _held_guard:
        dirs = list(_held_dirs.values())
    me, started = os.getpid(), process_start_time(os.getpid())
    return {d: LockFence(d, me, started, _HOST) for d in dirs}


def _own_lock(lock_path: Path) -> Optional[bool]:
    """Whether this process holds ``lock_path`` (``lock_log_dir``); None when it does not exist. Call
    it under _held_guard."""
    try:
        status = os.stat(lock_path)
    except FileNotFoundError:
        return None
    return (status.st_dev, status.st_ino) in _held_locks


def lock_holder(log_dir: PathLike) -> Optional[LockHolder]:
    """Who holds the log dir's ``.lock`` (None: nobody, or the file is absent; this process's own lock
    is reported too). Linux only; elsewhere None. Raises OSError when it cannot tell."""
    if not _USE_GETLK:
        return None
    lock_path = Path(log_dir) / LOCK_FILE
    with _held_guard:
        own = _own_lock(lock_path)
        if own is None:
            return None
        if own:                      # ours: another descriptor closed on it would drop it
            return LockHolder(os.getpid(), KAFKALOG_LOCK_LENGTH)
        fd = os.open(lock_path, os.O_RDONLY | _OPEN_FLAGS)
        try:
            return _lock_holder(fd)
        finally:
            os.close(fd)


def describe_lock_holder(log_dir: PathLike) -> str:
    """A phrase for messages: who holds the log dir's lock, as far as can be known."""
    return holder_and_hint(log_dir)[0]


def is_locked(log_dir: PathLike) -> bool:
    """Whether a process holds the log dir's ``.lock`` (a running broker, or ``lock_log_dir``).
    An absent ``.lock`` is not locked and is not created. Raises OSError when it cannot tell."""
    if fcntl is None:  # pragma: no cover
        raise OSError(errno.ENOTSUP, "record locks are not available on this platform", os.fspath(log_dir))
    if filesystem.is_uri(log_dir):       # no broker runs on an object store; nothing there can be locked
        return False
    if _USE_GETLK:
        return lock_holder(log_dir) is not None
    lock_path = Path(log_dir) / LOCK_FILE
    with _held_guard:
        own = _own_lock(lock_path)
        if own is None:
            return False
        return own or _probe_locked(lock_path)   # never probe ours: closing the probe's fd would drop it


@contextmanager
def lock_log_dir(log_dir: PathLike) -> Iterator[Path]:
    """Hold the log dir's ``.lock`` (created if absent) as a broker does, for jobs that modify the
    dir; released on exit (the file stays, as Kafka leaves it). Raises LogDirLockedError when another
    process, or this one, already holds it."""
    if fcntl is None:  # pragma: no cover
        raise OSError(errno.ENOTSUP, "record locks are not available on this platform", os.fspath(log_dir))
    log_dir = Path(log_dir)
    require_dir(log_dir)
    lock_path = log_dir / LOCK_FILE
    with _held_guard:
        try:
            status = os.stat(lock_path)
        except FileNotFoundError:
            status = None
        if status is not None and (status.st_dev, status.st_ino) in _held_locks:
            raise LogDirLockedError("this process already holds the log dir lock", path=lock_path)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, 0o666)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, KAFKALOG_LOCK_LENGTH)
        except OSError as exc:
            holder = None
            if exc.errno in (errno.EACCES, errno.EAGAIN) and _USE_GETLK:
                try:
                    holder = _lock_holder(fd)
                except OSError:
                    holder = None
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                who = holder.describe() if holder is not None else "another process"
                raise LogDirLockedError(f"the log dir is locked by {who}", path=lock_path,
                                        hint=locked_hint(holder)) from None
            raise
        status = os.fstat(fd)
        key = (status.st_dev, status.st_ino)
        _held_locks[key] = fd
        _held_dirs[key] = os.fspath(log_dir)
    try:
        yield log_dir
    finally:
        with _held_guard:
            _held_locks.pop(key, None)
            _held_dirs.pop(key, None)
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN, KAFKALOG_LOCK_LENGTH)
            finally:
                os.close(fd)


ATTEMPT_WAIT_S = 600.0                       # how long a task attempt waits for an earlier one to end
_NO_FLOCK_HERE = (errno.ENOLCK, errno.EBADF, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS)


@contextmanager
def attempt_lock(path: PathLike, *, what: str, wait_s: float = ATTEMPT_WAIT_S,
                 poll_s: float = 0.05) -> Iterator[bool]:
    """One task attempt's exclusive claim on ``path`` (a partition folder, or the first segment of a
    split round's group) while it changes files there: an ``flock`` of it, dropped on exit or when
    the process ends. Spark retries a task whose executor it lost; an executor lost to a network
    partition or a long pause may still be running the earlier attempt, writing the same
    ``.cleaned``/``.swap`` names. The retry waits for that attempt to end, for at most ``wait_s``
    seconds, then raises a KafkalogError naming ``path``: it never writes beside it. Yields whether the
    claim is held: False on a filesystem without ``flock`` (some NFS mounts) or for a URI, where the
    caller goes on as before. Independent of the log dir's ``.lock`` (a record lock of another file).

    :param path: a local file or folder.
    :param what: what is claimed, for the error (e.g. ``"partition t-0"``).
    :param wait_s: the longest wait for an earlier attempt.
    :param poll_s: how often the claim is tried again while waiting.
    """
    if fcntl is None or filesystem.is_uri(os.fspath(path)):
        yield False
        return
    fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    try:
        deadline = time.monotonic() + wait_s
        held = True
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno in _NO_FLOCK_HERE:
                    held = False
                    break
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() >= deadline:
                raise KafkalogError(f"another attempt of the task that cleans {what} still holds it after "
                                    f"{wait_s:g} s (an executor Spark lost that is still running)",
                                    path=os.fspath(path),
                                    hint="nothing was changed by this attempt; rerun the job once that executor "
                                         "has stopped, or run `kafkalog recover` on the log dir first")
            time.sleep(poll_s)
        yield held
    finally:
        os.close(fd)          # drops the flock


def require_dir(path: Path) -> None:
    """FileNotFoundError / NotADirectoryError unless ``path`` is an existing log dir folder."""
    if not filesystem.exists(path):
        raise FileNotFoundError(errno.ENOENT, "log dir does not exist", filesystem.uri_for_display(path))
    if not filesystem.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "log dir is not a directory", os.fspath(path))
