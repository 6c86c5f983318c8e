"""``printable``: text that someone else chose (an actor's or class's name, a node's, a cause, a
method path a stranger sent), fit to be shown to a person on a terminal, in a log line or on a
web page. The one function every human-facing output uses for such text: the status table, the
headers of ``actorrt logs``, the labels of actor output, the daemons' log lines, the dashboard.

A terminal runs what it is sent: ``ESC ] 0 ; ... BEL`` retitles the window, ``ESC [ 2 J``
clears it, a newline splits a row of a table or a log line in two, a right-to-left override
(U+202E) reverses what follows. So every character that is not printable (``str.isprintable``:
C0 and C1 controls, DEL, format characters such as the bidirectional overrides and zero-width
joiners, line and paragraph separators, spaces other than ' ', surrogates, unassigned code
points) is written as its Python escape (``\\x1b``, ``\\n``, ``\\u202e``), and so is a backslash
(``\\\\``), so that an escape shown is never one the name spelled itself. Printable characters of
any script are kept as they are. Pure; any thread.
"""

from __future__ import annotations

__all__ = ["NAME_MAX", "name_problem", "printable"]

NAME_MAX = 256  # characters of an actor's name, wherever one is given (options, get_actor, the wire)

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(c: str) -> str:
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str | bytes, limit: int | None = None) -> str:
    """``text`` with every character a terminal or a reader could take for something else
    escaped (see the module doc); bytes are decoded as UTF-8, what is not UTF-8 shown as
    ``\\xNN``. With ``limit``, cut to that many characters of ``text`` (before escaping) and
    the rest counted: ``...[N more characters]``. Raises nothing."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="backslashreplace")
    cut = 0 if limit is None else len(text) - limit
    if cut > 0:
        text = text[:limit]
    if not text.isprintable() or "\\" in text:  # the common case, a plain name, costs one scan
        text = "".join(c if c.isprintable() and c != "\\" else _escape(c) for c in text)
    return text + (f"...[{cut} more characters]" if cut > 0 else "")


def name_problem(name: str, field: str) -> str | None:
    """What is wrong with ``name`` as an actor's name given as ``field``, or None: empty names are
    the caller's business (no name), longer than ``NAME_MAX`` is refused. The answer names the
    length and shows at most the first 40 characters, escaped: a refusal never carries the whole
    name back. Pure."""
    if len(name) <= NAME_MAX:
        return None
    return f"{field} must be at most {NAME_MAX} characters; got {len(name):,} ('{printable(name, 40)}')"
