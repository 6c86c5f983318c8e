"""The home folder of a user's actorrt processes (``$ACTORRT_HOME`` or ``~/.actorrt``) and the
cluster token kept there.

What lives under it: ``token`` (0600, written by ``actorrt start``), ``processes/`` (a record per
daemon the CLI started), ``logs/`` (daemon logs and actor output). Every folder is made 0700 and
every file 0600, so other local users can neither read the token nor list what runs. Plain
synchronous functions; any thread.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

__all__ = ["load_token", "new_token", "private_dir", "state_dir", "token_path", "write_token"]


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


def load_token(explicit: str | None = None) -> str | None:
    """The token from the argument, ``ACTORRT_TOKEN``, or the file ``actorrt start`` wrote."""
    if explicit:
        return explicit
    env = os.environ.get("ACTORRT_TOKEN")
    if env:
        return env
    path = token_path()
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
