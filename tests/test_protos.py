"""Generated protocol code is never stale and the protos pass buf lint."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_matches_the_protos(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "protos" / "generate.py"), "--out", str(tmp_path)], check=True)
    fresh = sorted(p.name for p in (tmp_path / "actorrt" / "v1").glob("*_pb2*"))
    committed = sorted(p.name for p in (ROOT / "actorrt" / "v1").glob("*_pb2*"))
    assert fresh == committed
    stale = [
        name
        for name in fresh
        if (tmp_path / "actorrt" / "v1" / name).read_bytes() != (ROOT / "actorrt" / "v1" / name).read_bytes()
    ]
    assert not stale, f"stale generated files {stale}: run python protos/generate.py"


def test_buf_lint_is_clean() -> None:
    buf = shutil.which("buf") or str(Path(sys.executable).parent / "buf")
    if not Path(buf).exists():
        pytest.fail("buf is not installed: pip install buf-bin (part of the dev extra)")
    out = subprocess.run([buf, "lint"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
