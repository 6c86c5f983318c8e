"""``python -m actorrt.compat.parl SCRIPT.py ARGS``: a PARL script runs as ``python SCRIPT.py``
would (compared with Python itself: its folder, ``__main__``, argv, status, traceback), with
``import parl`` / ``parl.X`` this package, ``import gym`` gymnasium as PARL's scripts use gym,
numpy 1's removed ways back, and clear errors for names that are not here. Each script runs in
a process of its own, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = (sys.executable, "-m", "actorrt.compat.parl")


def run(cmd: tuple[str, ...], *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def script(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


SHOW = """
import json, os, sys
import helper  # a module next to the script

def where():
    return {
        "name": __name__,
        "file": __file__,
        "argv": sys.argv,
        "path0": sys.path[0],
        "helper": helper.__file__,
        "main_is_this": sys.modules["__main__"].__dict__ is globals(),
        "spec": repr(__spec__),
        "cwd": os.getcwd(),
    }

print(json.dumps(where()))
"""


def test_a_script_runs_as_python_runs_it(tmp_path: Path) -> None:
    script(tmp_path / "folder", "show.py", SHOW)
    (tmp_path / "folder" / "helper.py").write_text("")
    args = ("folder/show.py", "a", "--flag", "b c")
    ours = run(RUNNER, *args, cwd=tmp_path)
    python = run((sys.executable,), *args, cwd=tmp_path)
    assert ours.returncode == python.returncode == 0, ours.stderr
    seen = json.loads(ours.stdout)
    assert seen == json.loads(python.stdout)
    assert seen["name"] == "__main__" and seen["argv"] == list(args) and seen["main_is_this"]
    assert seen["path0"] == str(tmp_path / "folder") and seen["file"] == str(tmp_path / "folder" / "show.py")


STATUS = """
import sys

def fail(kind):
    if kind == "raise":
        raise ValueError("the script's own error")
    if kind == "interrupt":
        raise KeyboardInterrupt
    sys.exit(int(kind) if kind.isdigit() else kind)

if len(sys.argv) > 1:
    fail(sys.argv[1])
print("ended")
"""


@pytest.mark.parametrize("how", ["end", "3", "goodbye", "raise", "interrupt"])
def test_its_exit_status_and_traceback_are_pythons(tmp_path: Path, how: str) -> None:
    """The status (sys.exit's, 1 after an exception, Ctrl-C's) and what is printed are the very
    ones Python gives: the traceback starts at the script's first frame."""
    path = script(tmp_path, "status.py", STATUS)
    args = (str(path),) if how == "end" else (str(path), how)
    ours = run(RUNNER, *args, cwd=tmp_path)
    python = run((sys.executable,), *args, cwd=tmp_path)
    assert (ours.returncode, ours.stdout) == (python.returncode, python.stdout)
    assert ours.stderr.splitlines()[-8:] == python.stderr.splitlines()[-8:]
    if how == "raise":
        assert ours.returncode == 1
        assert ours.stderr.startswith(f'Traceback (most recent call last):\n  File "{path}", line')
        assert "actorrt" not in ours.stderr and "runpy" not in ours.stderr
        assert ours.stderr.rstrip().endswith("ValueError: the script's own error")


def test_bad_command_lines_say_what_is_wrong(tmp_path: Path) -> None:
    bare = run(RUNNER, cwd=tmp_path)
    assert bare.returncode == 2 and "usage: python -m actorrt.compat.parl SCRIPT.py" in bare.stderr
    missing = run(RUNNER, "nope.py", "x", cwd=tmp_path)
    assert missing.returncode == 2
    assert f"can't open file '{tmp_path / 'nope.py'}': No such file or directory" in missing.stderr
    folder = run(RUNNER, str(tmp_path), cwd=tmp_path)
    assert folder.returncode == 2 and "not a file" in folder.stderr
    helped = run(RUNNER, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "docs/parl.md" in helped.stdout


NAMES = """
import json, sys
import parl
import parl.utils, parl.env
import actorrt.compat.parl as compat
from parl.utils import logger, summary, ReplayMemory, tensorboard
from parl.utils.window_stat import WindowStat
from parl.env import CompatWrapper
from parl.env.compat_wrappers import CompatWrapper as Again

same = {
    "parl": parl is compat,
    "utils": parl.utils is compat.utils and sys.modules["parl.utils"] is compat.utils,
    "env": sys.modules["parl.env"] is compat.env,
    "logger": logger is compat.utils.logger,
    "summary": summary.add_scalar is tensorboard.add_scalar,
    "names": [parl.__name__, parl.utils.__name__, WindowStat.__module__, ReplayMemory.__module__],
    "wrapper": CompatWrapper is Again,
}
errors = {}
for statement in [
    "parl.no_such_name",
    "from parl import no_such_name",
    "import parl.no_such_module",
    "from parl.utils import no_such_name",
    "import parl.utils.no_such_module",
    "parl.utils.no_such_name",
    "from parl.env import no_such_name",
    "import gym.no_such_module",
]:
    try:
        exec(statement)
    except (AttributeError, ImportError) as e:
        errors[statement] = f"{type(e).__name__}: {e}"
print(json.dumps({"same": same, "errors": errors}))
"""


def test_parl_names_are_this_package_and_unknown_ones_point_to_the_docs(tmp_path: Path) -> None:
    out = run(RUNNER, str(script(tmp_path, "names.py", NAMES)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    same = seen["same"]
    assert all(same[k] for k in ("parl", "utils", "env", "logger", "summary", "wrapper")), same
    assert same["names"] == [
        "actorrt.compat.parl",
        "actorrt.compat.parl.utils",
        "actorrt.compat.parl.utils.window_stat",
        "actorrt.compat.parl.utils.replay_memory",
    ]
    errors = seen["errors"]
    assert len(errors) == 8, errors  # every statement failed
    for statement, error in errors.items():
        if "gym" in statement:
            assert error == (
                "ModuleNotFoundError: gym.no_such_module: gym is gymnasium here (gym is not installed), "
                "and gymnasium has no gymnasium.no_such_module"
            )
            continue
        name = statement.replace("from ", "").replace(" import ", ".").replace("import ", "")
        assert error.split(": ", 1)[1] == (
            f"{name} is not in actorrt.compat.parl, which stands for parl here: "
            "docs/parl.md lists what it carries and what it leaves out"
        ), statement


GYM = """
import json
import gym
import gym.spaces
import gymnasium
import numpy as np
from gym import spaces
from parl.env import ActionMappingWrapper, CompatWrapper
from parl.env.atari_wrappers import wrap_deepmind

out = {"spaces": spaces is gymnasium.spaces and gym.spaces.Box is gymnasium.spaces.Box, "version": gym.__version__}

# The old API, and the time limit as old gym's done
env = ActionMappingWrapper(CompatWrapper(gym.make("Pendulum-v1")))
first = env.reset()
step = env.step(np.zeros(1))
out["old_api"] = [type(first).__name__, len(step)]
steps, done = 1, step[2]
while not done:
    _, _, done, info = env.step(np.zeros(1))
    steps += 1
out["time_limit"] = [steps, info.get("TimeLimit.truncated")]

# env.seed(...) through the wrappers above CompatWrapper: it seeds the next reset
env.seed(5)
a = env.reset()
env.seed(5)
b = env.reset()
c = env.reset()
out["seeded"] = [bool(np.array_equal(a, b)), bool(np.array_equal(b, c))]

# The wrapper chain: .env down to the environment, every wrapper a gym.Wrapper
chain, current = [], env
while isinstance(current, gym.Wrapper):
    chain.append(type(current).__name__)
    current = current.env
out["chain"] = chain + [type(current).__name__]

# MuJoCo ids gymnasium no longer runs, and one it does
out["mujoco"] = [gym.make("Hopper-v2").spec.id, gym.make("Hopper-v2").spec.id, gym.make("Hopper-v4").spec.id]

# An Atari id, through ale-py, and PARL's DeepMind wrappers on it
pong = gym.make("PongNoFrameskip-v4")
wrapped = wrap_deepmind(pong, dim=84, obs_format="NCHW")
wrapped.seed(0)
obs = wrapped.reset()
out["atari"] = [pong.spec.id, list(pong.observation_space.shape), list(obs.shape), str(obs.dtype)]
print(json.dumps(out))
"""


def test_gym_is_gymnasium_as_parls_scripts_use_gym(tmp_path: Path) -> None:
    out = run(RUNNER, str(script(tmp_path, "gym_use.py", GYM)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    import gymnasium

    assert seen["spaces"] and seen["version"] == gymnasium.__version__
    assert seen["old_api"] == ["ndarray", 4]
    assert seen["time_limit"] == [200, True]
    assert seen["seeded"] == [True, False]
    assert seen["chain"] == [
        "ActionMappingWrapper",
        "CompatWrapper",
        "TimeLimit",
        "OrderEnforcing",
        "PassiveEnvChecker",
        "PendulumEnv",
    ]
    assert seen["mujoco"] == ["Hopper-v5", "Hopper-v5", "Hopper-v4"]
    assert seen["atari"] == ["PongNoFrameskip-v4", [210, 160, 3], [4, 84, 84], "uint8"]
    notices = [line for line in out.stderr.splitlines() if line.startswith("actorrt.compat.parl:")]
    assert notices == [
        f"actorrt.compat.parl: gym is not installed: `import gym` gives gymnasium {gymnasium.__version__} as PARL's "
        "scripts use gym (old API through parl.env.CompatWrapper, env.seed() through wrappers, Atari ids; docs/parl.md)",
        "actorrt.compat.parl: gym.make('Hopper-v2'): Hopper-v2 needs mujoco-py; making Hopper-v5, its newest version",
    ]


NUMPY = """
import json
import numpy as np
print(json.dumps({
    "int": np.int is int and np.int is int,
    "float": np.float is float,
    "object": np.object is object,
    "float_": np.float_ is np.float64,
    "shapes": [np.zeros(None).shape, np.ones(None).shape, np.full(None, 2.0).tolist(), np.zeros((2, 3)).shape],
    "missing": hasattr(np, "no_such_thing"),
}))
"""


def test_numpys_removed_ways_are_back_and_said_once(tmp_path: Path) -> None:
    out = run(RUNNER, str(script(tmp_path, "old_numpy.py", NUMPY)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen == {
        "int": True,
        "float": True,
        "object": True,
        "float_": True,
        "shapes": [[], [], 2.0, [2, 3]],
        "missing": False,
    }
    notices = [line for line in out.stderr.splitlines() if line.startswith("actorrt.compat.parl:")]
    assert notices == [
        "actorrt.compat.parl: np.int was removed in numpy 1.24; it is int here, as it was before",
        "actorrt.compat.parl: np.float was removed in numpy 1.24; it is float here, as it was before",
        "actorrt.compat.parl: np.object was removed in numpy 1.24; it is object here, as it was before",
        "actorrt.compat.parl: np.float_ was removed in numpy 2.0; it is numpy.float64 here, as it was before",
        "actorrt.compat.parl: np.zeros(None): numpy 2 refuses None as a shape; () here, as numpy < 2 took it",
        "actorrt.compat.parl: np.ones(None): numpy 2 refuses None as a shape; () here, as numpy < 2 took it",
        "actorrt.compat.parl: np.full(None): numpy 2 refuses None as a shape; () here, as numpy < 2 took it",
    ]
