"""What ``connect(files=...)`` ships to every actor's working folder: files and folders that
glob patterns match, collected on the client's thread before the first actor is placed.

Loops of symlinked folders, broken links, pipes and devices are skipped (a pattern that matches
only such entries is an error naming them); folders ship recursively with their modes, empty
ones included; the total is checked against a size limit before a byte is read.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import itertools
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from actorrt.transport.codec import describe_size
from actorrt.v1 import actor_host_pb2

__all__ = ["MAX_FILES_BYTES", "collect_files"]

log = logging.getLogger("actorrt.client")

MAX_FILES_BYTES = 2**31 - 2**24  # ConstructActor carries the files, and a protobuf message holds < 2 GiB


@dataclass
class _Found:
    """What ``files=`` patterns found: entries keyed by their path in the actor's folder."""

    entries: dict[str, tuple[Path | None, int]] = field(default_factory=dict)  # rel -> (file or None: a folder, mode)
    total_bytes: int = 0
    skipped: list[str] = field(default_factory=list)  # "path (why)": loops, broken links, devices
    skipped_now: list[str] = field(default_factory=list)  # those of the pattern at hand

    def skip(self, note: str) -> None:
        if note not in self.skipped_now:
            self.skipped_now.append(note)
        if note not in self.skipped:
            self.skipped.append(note)


def collect_files(patterns: Sequence[str], max_bytes: int = MAX_FILES_BYTES) -> list[actor_host_pb2.ShippedFile]:
    """What ``connect(files=...)`` ships to every actor: the files that the glob patterns match,
    and the folders they match with everything in them (empty folders too, hidden files too),
    at the same relative paths; absolute and ``..`` patterns land under their last fixed folder.

    Symlinks are followed; one that loops (a folder linking to itself or to a folder above it)
    or leads nowhere is skipped with a warning, as are devices and pipes. A pattern that matches
    nothing, or nothing but such entries, raises ``FileNotFoundError``; files that add up to
    more than ``max_bytes`` raise ``ValueError`` before anything is read.
    """
    found = _Found()
    for pattern in patterns:
        found.skipped_now, entries_before = [], len(found.entries)
        matches = _glob(pattern, found)
        if not matches and not found.skipped_now:
            raise FileNotFoundError(f"files=: {pattern!r} matches no file (relative to {os.getcwd()})")
        base = _fixed_base(pattern)
        for match in matches:
            rel = os.path.normpath(os.path.relpath(match, base) if base is not None else match)
            if rel in found.entries:  # already shipped, e.g. inside a folder that '**' matched too
                continue
            _add_path(match, "" if rel == "." else rel, _real_chain(os.path.dirname(os.path.abspath(match))), found)
        if len(found.entries) == entries_before and found.skipped_now:
            what = found.skipped_now
            more = f" and {len(what) - 3} more" if len(what) > 3 else ""
            raise FileNotFoundError(f"files=: {pattern!r} matches nothing to ship, only {', '.join(what[:3])}{more}")
    if found.skipped:
        log.warning("files=: skipped %d entries: %s", len(found.skipped), ", ".join(found.skipped[:5]))
    if found.total_bytes > max_bytes:
        files = sum(1 for source, _ in found.entries.values() if source is not None)
        raise ValueError(
            f"files=: the {files} matched files add up to {describe_size(found.total_bytes)}, over the "
            f"{describe_size(max_bytes)} that every actor's construction may carry; ship less (or raise "
            f"connect(max_payload_mb=...), up to 2 GiB)"
        )
    shipped = []
    for rel, (source, mode) in found.entries.items():
        try:
            data = source.read_bytes() if source is not None else b""
        except OSError as e:
            raise OSError(e.errno, f"files=: cannot read {str(source)!r}: {e.strerror}") from e
        shipped.append(actor_host_pb2.ShippedFile(path=rel, data=data, mode=mode))
    return shipped


def _fixed_base(pattern: str) -> str | None:
    """For an absolute pattern or one that leaves the working folder (``..``), the folder that
    its matches are named relative to: its part before the first wildcard (a plain path: its
    parent). None for the others, whose matches keep their relative paths."""
    norm = os.path.normpath(pattern)
    if not os.path.isabs(norm) and norm != ".." and not norm.startswith("../"):
        return None
    if not glob.has_magic(norm):  # its parent; '..' has no name of its own: its contents ship
        return norm if os.path.basename(norm) == ".." else os.path.dirname(norm)
    parts = norm.split("/")
    fixed = list(itertools.takewhile(lambda p: not glob.has_magic(p), parts))
    return "/".join(fixed) or "/"


def _why(path: str, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return f"{path} (a symlink loop)"
    if e.errno == errno.ENOENT and os.path.islink(path):
        return f"{path} (a broken symlink)"
    return f"{path} ({e.strerror or e})"


def _real_chain(folder: str) -> frozenset[tuple[int, int]]:
    """(device, inode) of the real ``folder`` and of each folder above it, up to ``/``."""
    chain = set()
    real = Path(os.path.realpath(folder))
    for d in (real, *real.parents):
        try:
            st = d.stat()
        except OSError:
            continue
        chain.add((st.st_dev, st.st_ino))
    return frozenset(chain)


def _add_path(path: str, rel: str, chain: frozenset[tuple[int, int]], found: _Found) -> None:
    """Add the file or folder (with everything below) at ``path`` as ``rel``; ``chain``: the
    folders above it, which a folder in it must not be (that would loop)."""
    try:
        st = os.stat(path)
    except OSError as e:
        found.skip(_why(path, e))
        return
    if stat.S_ISREG(st.st_mode):
        if rel not in found.entries:
            found.entries[rel] = (Path(path), st.st_mode & 0o777)
            found.total_bytes += st.st_size
        return
    if not stat.S_ISDIR(st.st_mode):
        found.skip(f"{path} (not a file or folder)")
        return
    if (st.st_dev, st.st_ino) in chain:
        found.skip(f"{path} (a symlink loop)")
        return
    if rel:
        found.entries.setdefault(rel, (None, stat.S_IFDIR | (st.st_mode & 0o777)))
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        found.skip(_why(path, e))
        return
    below = chain | {(st.st_dev, st.st_ino)}
    for name in names:
        _add_path(os.path.join(path, name), f"{rel}/{name}" if rel else name, below, found)


def _glob(pattern: str, found: _Found) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, except that ``**`` never goes round a symlink
    loop (such links are noted in ``found.skipped``), so a loop cannot make it hang or fail."""
    if not glob.has_magic(pattern):
        return [pattern] if os.path.lexists(pattern) else []
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    current = ["/" if pattern.startswith("/") else ""]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        following: list[str] = []
        for base in current:
            if part == "**":
                chain = _real_chain(os.path.dirname(os.path.abspath(base or ".")))
                following.extend(_descendants(base, chain, found, dirs_only=not last))
            elif not glob.has_magic(part):
                path = os.path.join(base, part)
                if os.path.lexists(path) if last else os.path.isdir(path):
                    following.append(path)
            else:
                try:
                    names = sorted(e.name for e in os.scandir(base or ".") if last or e.is_dir())
                except OSError:
                    continue
                show_hidden = part.startswith(".")
                following.extend(
                    os.path.join(base, n)
                    for n in names
                    if (show_hidden or not n.startswith(".")) and fnmatch.fnmatchcase(n, part)
                )
        current = following
    return sorted({p for p in current if p})


def _descendants(base: str, chain: frozenset[tuple[int, int]], found: _Found, dirs_only: bool) -> list[str]:
    """What ``base/**`` matches: ``base`` itself and every entry below it that is not hidden
    (only the folders if ``dirs_only``), never descending into a folder that contains itself."""
    try:
        st = os.stat(base or ".")
    except OSError as e:
        found.skip(_why(base, e))
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []
    if (st.st_dev, st.st_ino) in chain:
        found.skip(f"{base} (a symlink loop)")
        return []
    out = [os.path.join(base, "")]
    try:
        entries = sorted(os.scandir(base or "."), key=lambda e: e.name)
    except OSError:
        return out
    below = chain | {(st.st_dev, st.st_ino)}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = os.path.join(base, entry.name)
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            out.extend(_descendants(path, below, found, dirs_only))
        elif not dirs_only:
            out.append(path)
    return out
