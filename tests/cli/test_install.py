"""The runtime stands alone: its dependencies are the six it declares, and a cluster runs in a
process where the RL stack and the code generators cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = {"grpcio", "protobuf", "cloudpickle", "uvloop", "numpy", "prometheus-client"}
NOT_RUNTIME = ("torch", "gymnasium", "matplotlib", "tensorboard", "tqdm", "grpc_tools", "ale_py", "cv2", "rl")

_SCRIPT = f"""
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NOT_RUNTIME!r}:
            raise ImportError(f"{{name}} is not part of the runtime")
sys.meta_path.insert(0, _Refuse())
import actorrt

@actorrt.remote_class
class Echo:
    def echo(self, x):
        return x

with actorrt.connect(num_cpus=1) as cluster:
    e = Echo.remote().result()
    print(e.echo("ok").result())
"""


def test_the_runtime_declares_only_its_own_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {req.split(">")[0].split(";")[0].split("[")[0].strip() for req in project["dependencies"]}
    assert names == RUNTIME
    assert "torch>=2.3,<3" in project["optional-dependencies"]["rl"]


def test_a_cluster_runs_without_the_rl_stack(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text(_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
