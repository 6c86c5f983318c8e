"""``actorrt.common.text.printable``: what every human-facing output does to a name someone else
chose. The outputs that use it are tested with real processes in tests/cli/test_cli.py."""

from __future__ import annotations

from actorrt.common.text import printable


def test_controls_and_terminal_escapes_are_escaped_and_long_text_is_cut() -> None:
    assert printable("/a\nb\x1b[0m") == "/a\\nb\\x1b[0m"
    assert printable("\x1b]0;owned\x07\x1b[2J\r\t\x7f\x9b") == "\\x1b]0;owned\\x07\\x1b[2J\\r\\t\\x7f\\x9b"
    assert printable("x" * 250, limit=10) == "x" * 10 + "...[240 more characters]"
    assert printable("x" * 10, limit=10) == "x" * 10
    assert printable(b"\xff/m") == "\\\\xff/m"  # not UTF-8: shown as its bytes


def test_printable_text_of_any_script_is_kept_and_look_alikes_are_not() -> None:
    for name in ("Counter", "Zähler", "计数器", "Actor 1 (copy)", "a-b_c.d:e@f", ""):
        assert printable(name) is name or printable(name) == name
    # a right-to-left override, a zero-width joiner, a line separator, a no-break space, a surrogate
    assert printable("a\u202eb\u200dc\u2028d\xa0e\udcff") == "a\\u202eb\\u200dc\\u2028d\\xa0e\\udcff"
    assert printable("\U000e0001") == "\\U000e0001"  # a tag character
    # a backslash is escaped too: a name cannot spell an escape that looks like one shown
    assert printable("a\\x1b") == "a\\\\x1b" and printable("a\\x1b") != printable("a\x1b")
