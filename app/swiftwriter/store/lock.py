"""One writer per project: an OS lock on a small file beside it (`Novel.swiftwriter.lock`).

The operating system drops the lock when its holder dies, however it dies, so a crash never
leaves a project locked; the file also names the holder (pid, host, time) so the second
instance can say who has the project open. Where the file system cannot lock, the recorded
pid is checked instead (same host only).

The lock is keyed on the real file, not on how its path is spelled: the lock file sits beside
the path with every symbolic link resolved (SQLite resolves them too for its `-wal`), so a
link, a relative name or `..` all find the same lock. A hard link is a second real name, whose
lock file (and SQLite's `-wal`, kept by name) would be another one: rather than a registry of
inodes that outlives crashes badly, a project with more than one name is refused for writing."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None
try:  # Windows
    import msvcrt
except ImportError:
    msvcrt = None

_BUSY = {errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a lock file that is a link is refused, not followed
_WIN_LOCK_OFFSET = 1 << 30  # lock a byte far past the holder info, which stays readable


def lock_path_for(project: Path) -> Path:
    real = Path(os.path.realpath(project))
    return real.with_name(real.name + ".lock")


def _one_name(project: Path) -> None:
    """Refuse a project file that has other names (hard links): see the module's docstring."""
    with contextlib.suppress(FileNotFoundError):
        links = os.stat(project).st_nlink
        if links > 1:
            raise OSError(
                errno.EMLINK,
                f"the file has {links} names (hard links), and SQLite keeps its journal beside "
                "each name, so writing through two of them can damage it: keep one name",
            )


@dataclass(frozen=True)
class Holder:
    pid: int
    host: str
    since: str

    def describe(self) -> str:
        return f"process {self.pid} on {self.host} since {self.since}"


def read_holder(path: Path) -> Holder | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Holder(int(data["pid"]), str(data["host"]), str(data["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class ProjectLock:
    """Held from `acquire` until `release`; `held_by` names the other holder on failure."""

    def __init__(self, project: Path):
        self.project = Path(project)
        self.path = lock_path_for(project)
        self.fd: int | None = None

    def acquire(self) -> Holder | None:
        """Take the lock; returns None on success, else who holds it."""
        _one_name(self.project)
        for _ in range(5):
            fd = self._open(os.O_RDWR | os.O_CREAT)
            try:
                got = self._os_lock(fd)
            except OSError:
                os.close(fd)
                raise
            if got is None:  # the file system cannot lock: fall back on the recorded pid
                holder = read_holder(self.path)
                if holder is not None and self._other_live(holder):
                    os.close(fd)
                    return holder
            elif not got:
                os.close(fd)
                return read_holder(self.path) or Holder(0, "unknown", "unknown")
            if not self._same_file(fd):  # a closing holder unlinked it meanwhile: retry
                os.close(fd)
                continue
            self.fd = fd
            try:
                self._write_holder(fd)
            except OSError:  # a full disk: the lock must not outlive the failed open
                self.release()
                raise
            return None
        raise OSError(f"Could not settle the lock file {self.path}")

    def release(self) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        with contextlib.suppress(OSError):
            self.path.unlink()  # before unlocking, so no one locks a file that then vanishes
        with contextlib.suppress(OSError):
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            elif msvcrt is not None:  # pragma: no cover - Windows
                os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        os.close(fd)

    # -- pieces -----------------------------------------------------------------------------
    def _open(self, flags: int) -> int:
        if self.path.is_symlink():
            raise OSError(
                errno.ELOOP, f"{self.path.name} is a symbolic link, not SwiftWriter's lock file"
            )
        return os.open(self.path, flags | _NOFOLLOW, 0o644)

    @staticmethod
    def _os_lock(fd: int) -> bool | None:
        """True: locked; False: someone else holds it; None: locking is not supported here."""
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            elif msvcrt is not None:  # pragma: no cover - Windows
                os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            else:  # pragma: no cover
                return None
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return None
            raise
        return True

    @staticmethod
    def _other_live(holder: Holder) -> bool:
        if holder.host != socket.gethostname():
            return True  # cannot check another machine's processes: respect the lock
        return holder.pid != os.getpid() and pid_alive(holder.pid)

    def _same_file(self, fd: int) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino) or os.name == "nt"

    @staticmethod
    def _write_holder(fd: int) -> None:
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        data = json.dumps(info).encode("utf-8")
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, data)
        with contextlib.suppress(OSError):
            os.fsync(fd)


def holder_if_locked(project: Path) -> Holder | None:
    """Who holds the project's write lock now (None when nobody), without taking it for long."""
    path = lock_path_for(project)
    if not path.exists():
        return None
    probe = ProjectLock(project)
    try:
        fd = probe._open(os.O_RDONLY)
    except OSError:
        return None
    try:
        got = probe._os_lock(fd)
        if got is False:
            return read_holder(path) or Holder(0, "unknown", "unknown")
        if got is None:
            holder = read_holder(path)
            return holder if holder is not None and probe._other_live(holder) else None
        return None
    finally:
        os.close(fd)  # closing drops a probe lock we may have taken
