"""A throwaway PostgreSQL server for the tests and the benchmarks: ``initdb`` into a temporary folder, ``postgres`` on
127.0.0.1 and a free port, stopped and removed when the block ends.

Layer: tools (the standard library only; nothing of icelog). It needs PostgreSQL's server programs (Debian's
``postgresql`` package; ``tools/run`` installs it with apt-get when absent). PostgreSQL refuses to run as root, so
under root the server runs as the ``postgres`` user the package creates.

::

    with LocalPostgres() as server:
        server.url             # postgresql://icelog@127.0.0.1:54321/icelog
        server.stop(); server.start()   # a server that goes away and comes back (same folder, same port)
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tools.ports import free_port

#: the role and database the server is made with (trust authentication on the loopback interface only)
USER = "icelog"
DATABASE = "icelog"


class PostgresNotFound(RuntimeError):
    """PostgreSQL's server programs (initdb, postgres, pg_ctl) are not installed."""


def server_bin_dir() -> str:
    """The folder holding ``initdb``, ``postgres`` and ``pg_ctl`` (PATH first, then Debian's versioned folders)."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if os.path.exists(os.path.join(folder, "initdb")):
            return folder
    raise PostgresNotFound("Cannot start PostgreSQL: initdb and pg_ctl are not installed "
                           "(Debian: apt-get install postgresql; tools/run does it)")


class LocalPostgres:
    """One PostgreSQL server in a temporary folder, on 127.0.0.1 and a free port, until the block ends."""

    def __init__(self, port: int | None = None) -> None:
        self.bin = server_bin_dir()
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="icelog-postgres-"))
        self.data = self.root / "data"
        self._run_as = None
        if os.geteuid() == 0:  # initdb and postgres refuse root
            self._run_as = pwd.getpwnam("postgres")
            os.chown(self.root, self._run_as.pw_uid, self._run_as.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def _as_server_user(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        def become_server_user() -> None:
            assert self._run_as is not None
            os.setgid(self._run_as.pw_gid)
            os.setuid(self._run_as.pw_uid)

        preexec = become_server_user if self._run_as is not None else None
        env = {**os.environ, "LC_ALL": "C", "HOME": str(self.root)}
        return subprocess.run(args, preexec_fn=preexec, env=env, cwd=self.root, check=True, capture_output=True,
                              text=True, **kwargs)

    def __enter__(self) -> LocalPostgres:
        try:
            self._as_server_user([f"{self.bin}/initdb", "-D", str(self.data), "-U", USER, "--auth=trust",
                                  "--encoding=UTF8", "--no-sync"])
            with open(self.data / "postgresql.conf", "a") as conf:
                conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                           f"unix_socket_directories = '{self.root}'\nmax_connections = 200\n"
                           "shared_buffers = 64MB\n")
            self.start()
            psql = f"{self.bin}/psql" if os.path.exists(f"{self.bin}/psql") else (shutil.which("psql") or "psql")
            self._as_server_user([psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", "postgres",
                                  "-c", f"CREATE DATABASE {DATABASE}"])
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start(self) -> None:
        """Start the server (again, after :meth:`stop`) and wait until it takes connections."""
        self._as_server_user([f"{self.bin}/pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                              "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (roll back open transactions, close connections) or ``immediate`` (as a
        crash: no shutdown checkpoint, recovery at the next start)."""
        self._as_server_user([f"{self.bin}/pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop"])

    def __exit__(self, *exc_info: object) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
