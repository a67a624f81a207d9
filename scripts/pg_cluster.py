"""A throwaway PostgreSQL cluster, started by the project for its tests and benchmarks.

``initdb`` makes a cluster in a fresh temporary directory and ``pg_ctl`` runs it, listening on a
unix socket in that directory only (no TCP port, so clusters never collide). Both refuse to run as
root; as root the cluster is made and run by the unprivileged user ``nobody``, which owns the
directory (Python's ``subprocess`` switches user itself, no ``su`` needed). Authentication is
``trust`` on the socket; the directory holding it is ``0o700``, so only its owner and root can
reach the server at all.

The server binaries are found on ``PATH`` or under ``/usr/lib/postgresql/<version>/bin``
(Debian's layout; ``scripts/setup.sh`` installs the ``postgresql`` package when they are missing).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

SUPERUSER = "dsh"
DATABASE = "postgres"
UNPRIVILEGED_USER = "nobody"
START_TIMEOUT_S = 60  # s pg_ctl waits for the server to accept connections


def find_server_binaries() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0,
    )
    candidates += [Path(path) for path in reversed(versions)]
    for candidate in candidates:
        if all((candidate / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return candidate
    return None


def why_unavailable() -> str | None:
    """Why no cluster can be started here (``None`` when one can)."""
    if find_server_binaries() is None:
        return "the PostgreSQL server binaries (initdb, pg_ctl) are not installed; bash scripts/setup.sh installs them"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(UNPRIVILEGED_USER)
        except KeyError:
            return f"running as root, and there is no user {UNPRIVILEGED_USER!r} to run the server as"
    return None


def _base_parent() -> str | None:
    """Where the cluster's directory goes: the usual temporary directory, unless the server's user
    could not reach it (as root the server runs as ``nobody``) or a socket path in it would be too
    long for a unix socket (about 100 bytes); then ``/tmp``."""
    parent = tempfile.gettempdir()
    reachable = all(os.stat(folder).st_mode & 0o001 for folder in [parent, *map(str, Path(parent).parents)])
    if (os.geteuid() == 0 and not reachable) or len(parent) > 60:
        return "/tmp"
    return None


class PgCluster:
    """One cluster: :meth:`start`, then connect with :attr:`dsn`; :meth:`kill` stops it as a crash
    would (``pg_ctl stop -m immediate``: no checkpoint, recovery from the WAL at the next start);
    :meth:`destroy` stops it and removes everything."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        binaries = find_server_binaries()
        if binaries is None:
            raise RuntimeError(why_unavailable() or "no PostgreSQL binaries")
        self.bin = binaries
        self.base = Path(tempfile.mkdtemp(prefix="dsh-pg-", dir=_base_parent()))
        self.data = self.base / "data"
        self.socket_dir = self.base
        self.log = self.base / "server.log"
        self.settings = {
            "listen_addresses": "''",
            "max_connections": "60",
            "shared_buffers": "32MB",
            "fsync": "on",
            **(settings or {}),
        }
        self._user = pwd.getpwnam(UNPRIVILEGED_USER) if os.geteuid() == 0 else None
        if self._user is not None:
            os.chown(self.base, self._user.pw_uid, self._user.pw_gid)
        os.chmod(self.base, 0o700)
        self._initdb()

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} port=5432 user={SUPERUSER} dbname={DATABASE}"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = self._user
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            cwd=self.base,
            capture_output=True,
            text=True,
            check=check,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            timeout=120,
            user=None if user is None else user.pw_uid,
            group=None if user is None else user.pw_gid,
            extra_groups=None if user is None else [],
        )

    def _initdb(self) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )

    def start(self) -> None:
        options = " ".join(f"-c {name}={value}" for name, value in self.settings.items())
        options += f" -k {self.socket_dir} -p 5432"
        completed = self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-o",
            options,
            "start",
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(
                f"pg_ctl start failed: {completed.stdout}{completed.stderr}\n{self.log_tail()}"
            )

    def stop(self) -> None:
        """A clean shutdown."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def kill(self) -> None:
        """Stop the server the way a crash does: every backend dies at once, nothing is flushed that
        was not already, and the next start recovers from the WAL. The postmaster gets SIGQUIT at
        once — what ``pg_ctl stop -m immediate`` sends, without waiting for pg_ctl to start — then
        pg_ctl waits for it to be gone."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGQUIT)
        except (OSError, ValueError, IndexError):
            pass  # not running, or already going
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def is_running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def destroy(self) -> None:
        if self.data.exists() and self.is_running():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.base, ignore_errors=True)
