"""One writer per run folder: an advisory lock file with the owner's pid, host and start time.

``shovir run`` takes ``<run>/run.lock`` before it writes anything. A second ``shovir run`` into the
same folder is refused with a message naming the owner; a lock whose process is gone (same host,
dead pid) is stale and is taken over, with a note. The lock is created atomically
(``O_CREAT | O_EXCL``), so two processes starting together cannot both win.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> with RunLock(folder):
...     RunLock(folder).acquire()
Traceback (most recent call last):
...
shovir.runner.lock.RunLocked: ... is being written by pid ... on ... since ...; wait for it to finish, or stop it ...
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path
from typing import Any

__all__ = ["RunLock", "RunLocked", "pid_alive"]

LOCK_NAME = "run.lock"


class RunLocked(RuntimeError):
    """Another live process writes this run folder."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host.

    >>> pid_alive(os.getpid())
    True
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


class RunLock:
    """The advisory lock of a run folder; a context manager."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.recovered: dict[str, Any] | None = None
        self._held = False

    def owner(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def acquire(self) -> "RunLock":
        """Take the lock, taking over a stale one; raise :class:`RunLocked` if a live process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mine = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        for _ in range(3):
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self.owner()
                if owner is None:  # a writer between create and write, or a corrupt file: look again
                    if self.path.exists() and self.path.stat().st_size == 0:
                        import time

                        time.sleep(0.05)
                        owner = self.owner()
                if owner is not None and not self._stale(owner):
                    raise RunLocked(
                        f"{self.path.parent} is being written by pid {owner.get('pid')} on {owner.get('host')} since "
                        f"{owner.get('started')}; wait for it to finish, or stop it (Ctrl-C / kill {owner.get('pid')}) "
                        "and run again to resume")
                self.recovered = owner or {"pid": None}
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(descriptor, "w") as handle:
                json.dump(mine, handle)
            self._held = True
            return self
        raise RunLocked(f"could not take {self.path}: another process keeps replacing it")

    @staticmethod
    def _stale(owner: dict[str, Any]) -> bool:
        if owner.get("host") != socket.gethostname():
            return False  # another machine's process cannot be checked: never steal its lock
        pid = owner.get("pid")
        return not (isinstance(pid, int) and pid_alive(pid))

    def release(self) -> None:
        if self._held:
            owner = self.owner()
            if owner is not None and owner.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self._held = False

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
