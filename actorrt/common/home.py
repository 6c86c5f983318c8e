"""The home folder of a user's actorrt processes (``$ACTORRT_HOME`` or ``~/.actorrt``) and the
cluster tokens kept there.

What lives under it: ``token`` (0600, written by ``actorrt start``), ``clusters/`` (the token of
each running embedded cluster of this machine, by its address), ``processes/`` (a record per
daemon the CLI started), ``logs/`` (daemon logs and actor output). Every folder is made 0700 and
every file 0600, so other local users can neither read a token nor list what runs. Plain
synchronous functions; any thread.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
from pathlib import Path

from actorrt.common.procfs import machine, start_time

__all__ = [
    "cluster_token",
    "load_token",
    "new_token",
    "private_dir",
    "remove_cluster_token",
    "state_dir",
    "token_path",
    "write_cluster_token",
    "write_private",
    "write_token",
]


def state_dir(*parts: str, create: bool = False) -> Path:
    """Where the CLI keeps the token, PIDs and logs: ``$ACTORRT_HOME`` or ``~/.actorrt``.

    ``parts`` name a folder under it; ``create=True`` makes it with :func:`private_dir`.
    """
    path = Path(os.environ.get("ACTORRT_HOME") or Path.home() / ".actorrt").joinpath(*parts)
    return private_dir(path) if create else path


def private_dir(path: Path) -> Path:
    """Make ``path`` and each missing folder above it with mode 0700; return ``path``.

    ``Path.mkdir(parents=True, mode=0o700)`` gives that mode to the leaf alone: the state dir
    above it would get the umask's 0755 and let every local user list it.
    """
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made by a concurrent start
            continue
        os.chmod(folder, stat.S_IRWXU)  # whatever the umask
    return path


def token_path() -> Path:
    return state_dir() / "token"


def new_token() -> str:
    """A random token that never starts with '-' (a command line would read it as an option)."""
    while (token := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return token


def write_token(token: str, path: Path | None = None) -> Path:
    """Write the token to a file readable by its owner only (0600)."""
    path = path or token_path()
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed over it), readable
    by its owner only (0600, whatever the umask, before a byte is written); its folder is made
    with :func:`private_dir`. Raises OSError."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), stat.S_IRUSR | stat.S_IWUSR)
        f.write(text)
    tmp.replace(path)
    return path


def load_token(explicit: str | None = None, address: str = "") -> str | None:
    """The token from the argument; else that of the embedded cluster of this machine listening
    on ``address`` (:func:`cluster_token`); else ``ACTORRT_TOKEN``; else the file ``actorrt
    start`` wrote. An embedded cluster's comes before the variable: it is the one token that
    address takes (an embedded cluster makes its own, whatever the variable says)."""
    if explicit:
        return explicit
    found = cluster_token(address) if address else None
    if found:
        return found
    env = os.environ.get("ACTORRT_TOKEN")
    if env:
        return env
    path = token_path()
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


# ---- embedded clusters' tokens --------------------------------------------------------------


def _cluster_token_path(address: str) -> Path | None:
    """``clusters/<port>@<host>.json``: one file per listening port of this machine (two machines
    sharing the home, an NFS one, do not share a file). None for an address with no port."""
    port = address.rpartition(":")[2]
    if not port.isdigit():
        return None
    return state_dir("clusters") / f"{int(port)}@{socket.gethostname()}.json"


def _read_cluster_token(path: Path) -> dict[str, str] | None:
    """The record in ``path``, if it is this machine's and its process still runs; a record of
    this machine whose process is gone (it was killed before it could remove it) is removed,
    never trusted. None otherwise (no file, another machine's, unreadable)."""
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or record.get("machine") != machine():
            return None
        started = str(record["start_time"])
        alive = bool(started) and start_time(int(record["pid"])) == started
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not alive:
        path.unlink(missing_ok=True)
        return None
    return {str(k): str(v) for k, v in record.items()}


def write_cluster_token(address: str, token: str) -> Path:
    """Record the token of the embedded cluster listening on ``address`` (this process's), so
    that this user's other processes on this machine find it by that address: a file of mode 0600
    in a 0700 folder under the home, naming this process (pid and start time) and machine.
    Remove it with :func:`remove_cluster_token` when the cluster closes; a reader removes one
    whose process is gone, and so does every later write (no file of a killed process is left
    to pile up). Raises OSError if the home cannot be written."""
    folder = private_dir(state_dir("clusters"))
    for other in folder.glob("*.json"):
        _read_cluster_token(other)  # removes those of processes that are gone
    path = _cluster_token_path(address)
    if path is None:
        raise ValueError(f"an embedded cluster's address needs a port, got {address!r}")
    record = {"address": address, "token": token, "pid": os.getpid(), "start_time": start_time(os.getpid())}
    return write_private(path, json.dumps({**record, "machine": machine()}))


def remove_cluster_token(path: Path) -> None:
    """The embedded cluster closes: its token file goes (if it is still this process's)."""
    record = _read_cluster_token(path)
    if record is not None and record.get("pid") == str(os.getpid()):
        path.unlink(missing_ok=True)


def cluster_token(address: str) -> str | None:
    """The token of the embedded cluster of this machine listening on ``address`` exactly as it
    gave it (``cluster.address``, ``127.0.0.1:PORT``), if its process still runs; None otherwise.
    Only this user can read the file (0600 under a 0700 home); the processes of this user are
    trusted with it, as with the token file of ``actorrt start``."""
    path = _cluster_token_path(address)
    record = _read_cluster_token(path) if path is not None else None
    if record is None or record.get("address") != address:
        return None
    return record.get("token") or None
