"""Config dataclasses parsed from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    where: Literal["learner", "actor"] = "learner"
    """Where the replay is."""


def test_parse_types_and_flags() -> None:
    c = parse_config(_Config, ["--lr", "0.5", "--steps", "7", "--save", "a.pt", "--no-fast"])
    assert c == _Config(lr=0.5, steps=7, save="a.pt", fast=False)
    assert parse_config(_Config, []) == _Config()
    assert parse_config(_Config, ["--where", "actor"]).where == "actor"


def test_a_literal_field_names_its_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_config(_Config, ["--where", "remote"])
    assert "argument --where: invalid choice: 'remote' (choose from" in capsys.readouterr().err


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


def test_importing_rl_leaves_torch_threads_alone() -> None:
    import subprocess
    import sys

    code = "import torch; torch.set_num_threads(3); import rl; assert torch.get_num_threads() == 3; rl.use_torch_threads(); print(torch.get_num_threads())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "RL_TORCH_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
