"""Config dataclasses parsed from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from rl.config import parse_config


@dataclass
class _Config:
    lr: float = 1e-3
    """Learning rate."""
    steps: int = 10
    """Steps."""
    name: str = "x"
    """Run name."""
    save: str | None = None
    """Checkpoint path."""
    fast: bool = True
    """Go fast."""
    other: int = field(default=3, metadata={"help": "Via metadata."})


def test_parse_types_and_flags() -> None:
    c = parse_config(_Config, ["--lr", "0.5", "--steps", "7", "--save", "a.pt", "--no-fast"])
    assert c == _Config(lr=0.5, steps=7, save="a.pt", fast=False)
    assert parse_config(_Config, []) == _Config()


def test_help_lists_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_config(_Config, ["--help"])
    out = capsys.readouterr().out
    for text in ("Learning rate.", "Checkpoint path.", "Via metadata.", "--no-fast"):
        assert text in out


def test_undocumented_field_is_refused() -> None:
    @dataclass
    class Bad:
        x: int = 1

    with pytest.raises(TypeError, match="no documentation"):
        parse_config(Bad, [])
