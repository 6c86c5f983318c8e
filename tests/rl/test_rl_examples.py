"""Examples run from the repo root, answer --help, and end with the JSON result line.

:data:`SHORT_RUNS` lists every rl example with the arguments of a short run (a few thousand env
steps at most); ``test_example_main_ends_with_json_line`` runs each one's ``__main__`` in a fresh
interpreter to its final line, so an example that crashes at the end (after training) fails here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from rl.precision import native_bfloat16_matmul
from tests.examples_run import ROOT, load_example, run_python

EXAMPLES = [
    "quickstart_cartpole.py",
    "dqn_cartpole.py",
    "ppo_cartpole.py",
    "ppo_pendulum.py",
    "sac_pendulum.py",
    "es_cartpole.py",
    "sac_halfcheetah.py",
    "td3_halfcheetah.py",
    "ppo_halfcheetah.py",
    "apex_cartpole.py",
]
RESULT_KEYS = {"env", "algo", "solved", "env_steps", "wall_s", "mean_return"}

SHORT_RUNS: dict[str, tuple[list[str], str | None]] = {
    # example: (arguments of a short run, module it needs beyond the base install or None)
    "quickstart_cartpole.py": (["--total-steps", "2048"], None),
    "dqn_cartpole.py": (["--total-steps", "1024", "--learning-starts", "256"], None),
    "ppo_cartpole.py": (["--total-steps", "2048"], None),
    "ppo_pendulum.py": (["--total-steps", "4096", "--num-steps", "256"], None),
    "a2c_cartpole.py": (["--total-steps", "2048"], None),
    "impala_cartpole.py": (["--total-steps", "2048", "--num-envs", "8"], None),
    "apex_cartpole.py": (["--total-steps", "3000", "--learning-starts", "500"], None),
    "sac_pendulum.py": (["--total-steps", "600", "--learning-starts", "200"], None),
    "es_cartpole.py": (["--total-steps", "20000", "--population", "16"], None),
    "sac_halfcheetah.py": (
        [
            # bfloat16 where this CPU has native bfloat16 matmuls (elsewhere its steps take ~2x as long)
            *(["--bf16"] if native_bfloat16_matmul() else []),
            "--total-steps",
            "1500",
            "--learning-starts",
            "1000",
            "--buffer-size",
            "10000",
            "--hidden",
            "64",
            "--batch-size",
            "64",
        ],
        "mujoco",
    ),
    "td3_halfcheetah.py": (
        [
            "--total-steps",
            "1500",
            "--learning-starts",
            "1000",
            "--buffer-size",
            "10000",
            "--hidden",
            "64",
            "--batch-size",
            "64",
        ],
        "mujoco",
    ),
    "ppo_halfcheetah.py": (["--total-steps", "4096", "--num-steps", "512", "--num-epochs", "2"], "mujoco"),
    "impala_atari.py": (["--total-steps", "400", "--num-envs", "2", "--num-steps", "20"], "ale_py"),
}
"""Every rl example (those printing the result line); ``test_short_runs_cover_every_example`` keeps it complete."""

NOT_RL = {"hello_world.py", "parallel_sum.py", "parl_migration.py"}
"""actorrt examples: they print their own report, not the training result line."""


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_python(args, cwd, timeout=120)


def test_every_example_has_help() -> None:
    code = "import runpy, sys\nfor name in sys.argv[1:]:\n    sys.argv = [name, '--help']\n    try:\n        runpy.run_path(name, run_name='__main__')\n    except SystemExit as e:\n        assert e.code == 0, name\n"
    proc = _run(["-c", code, *[f"examples/{e}" for e in EXAMPLES]], ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("usage:") == len(EXAMPLES)
    assert proc.stdout.count("--restore RESTORE") >= len(EXAMPLES)


@pytest.mark.parametrize("example,extra", [("ppo_cartpole.py", []), ("dqn_cartpole.py", ["--learning-starts", "100"])])
def test_example_writes_outputs_and_json_line(tmp_path: Path, example: str, extra: list[str]) -> None:
    run_dir = tmp_path / "run"
    ckpt = tmp_path / "agent.pt"
    args = [
        str(ROOT / "examples" / example),
        "--total-steps",
        "512",
        "--run-dir",
        str(run_dir),
        "--save",
        str(ckpt),
        *extra,
    ]
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(line) == {"env", "algo", "solved", "env_steps", "wall_s", "mean_return"}
    assert line["env_steps"] >= 512
    for name in ("curve.png", "episodes.csv", "updates.csv"):
        assert (run_dir / name).stat().st_size > 0
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())
    # Restoring goes through the same main(); in-process saves a second interpreter start.
    module = load_example(example.removesuffix(".py"))
    overrides = {"learning_starts": 100} if extra else {}
    config = module.Config(
        total_steps=512,
        run_dir=str(tmp_path / "again"),
        restore=str(ckpt),
        tensorboard=False,
        progress=False,
        **overrides,
    )
    assert module.main(config).env_steps >= 512


def test_short_runs_cover_every_example() -> None:
    on_disk = {p.name for p in (ROOT / "examples").glob("*.py")} - NOT_RL
    assert on_disk == set(SHORT_RUNS), "add the new example to SHORT_RUNS (or NOT_RL)"


@pytest.mark.parametrize("example", sorted(SHORT_RUNS))
def test_example_main_ends_with_json_line(tmp_path: Path, example: str) -> None:
    """``python examples/X.py --total-steps N``: exit 0 when solved (1 allowed for distributed
    examples that are not), last stdout line a JSON object with the six keys in JSON's own types."""
    args, needs = SHORT_RUNS[example]
    if needs is not None:
        pytest.importorskip(needs)
    run_dir = tmp_path / "run"
    proc = _run(
        [str(ROOT / "examples" / example), *args, "--run-dir", str(run_dir), "--no-tensorboard", "--no-progress"],
        tmp_path,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert RESULT_KEYS <= set(line), line
    assert isinstance(line["env"], str) and isinstance(line["algo"], str)
    assert type(line["solved"]) is bool
    assert type(line["env_steps"]) is int and line["env_steps"] > 0
    assert line["solved"] or line["env_steps"] >= int(args[args.index("--total-steps") + 1])
    assert type(line["wall_s"]) in (int, float) and line["wall_s"] > 0
    assert line["mean_return"] is None or type(line["mean_return"]) in (int, float)
    # 0 when solved; distributed examples exit 1 when not solved, the others 0 regardless.
    assert proc.returncode in ((0,) if line["solved"] else (0, 1)), proc.stderr[-3000:]
    assert (run_dir / "curve.png").stat().st_size > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--replay", "actor"], "a replay actor is fed by remote collectors; give --num-collectors N"),
        (["--replay", "remote"], "argument --replay: invalid choice: 'remote'"),
    ],
)
def test_sac_pendulum_refuses_a_replay_it_cannot_use(args: list[str], message: str) -> None:
    proc = _run(["examples/sac_pendulum.py", *args], ROOT)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-1000:]


@pytest.mark.parametrize(
    "args, message",
    [
        (["ppo_cartpole.py", "--restore", "missing.pt"], "ppo_cartpole.py: error: FileNotFoundError: "),
        (["quickstart_cartpole.py", "--env-id", "CartPol-v1"], "error: NameNotFound: Environment `CartPol`"),
        (["apex_cartpole.py", "--num-collectors", "0"], "error: ValueError: --num-collectors must be >= 1"),
        (["dqn_cartpole.py", "--total-steps", "-5"], "argument --total-steps: must be >= 0, got -5"),
        (["dqn_cartpole.py", "--loss", "hubr"], "argument --loss: invalid choice: 'hubr'"),
        (["parallel_sum.py", "--workers", "0"], "argument --workers: must be >= 1, got 0"),
    ],
)
def test_bad_input_ends_a_script_with_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    script, *rest = args
    run = ["--run-dir", str(tmp_path), "--no-progress"] if script != "parallel_sum.py" else []
    proc = run_python([str(ROOT / "examples" / script), *rest, *run], cwd=tmp_path, timeout=120, tracebacks=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert message in proc.stderr.splitlines()[-1], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_impala_demo_uses_the_papers_rmsprop() -> None:
    """The demo's agent is what its options say: RMSprop with eps 0.01 (the IMPALA paper's),
    the gradient clipped at 40; ``--rmsprop-eps`` reaches the optimizer."""
    module = load_example("impala_cartpole")
    algorithm = module.MakeAgent(module.Config())().algorithm
    assert isinstance(algorithm.optimizer, torch.optim.RMSprop)
    assert algorithm.optimizer.defaults["eps"] == 0.01 and algorithm.max_grad_norm == 40.0
    algorithm = module.MakeAgent(module.Config(rmsprop_eps=1e-5, max_grad_norm=0.5))().algorithm
    assert algorithm.optimizer.defaults["eps"] == 1e-5 and algorithm.max_grad_norm == 0.5


APEX_LATE_REPLAY = """
import json, runpy, sys
import actorrt
example = runpy.run_path(sys.argv[1], run_name="apex_under_test")
train = example["train"]


@actorrt.remote_class
class LateReplay(example["Replay"]):
    '''The example's replay actor, empty for its first three samples (as when the collectors'
    first pushes are still on their way).'''

    def __init__(self, *args):
        super().__init__(*args)
        self.refused = 0

    def sample(self, n):
        if self.refused < 3:
            self.refused += 1
            return None
        return super().sample(n)


train.__globals__["Replay"] = LateReplay
config = example["Config"](
    total_steps=3000, learning_starts=0, run_dir=sys.argv[2], tensorboard=False, progress=False
)
result = train(config)
print(json.dumps({"env_steps": result.env_steps}))
"""


def test_apex_learner_waits_while_the_replay_is_empty(tmp_path: Path) -> None:
    """The Ape-X learner samples a replay actor that collectors push to without waiting; one
    that answers ``None`` (nothing arrived yet) makes the learner wait for more collection, not
    crash, and the run ends at its budget."""
    proc = _run(["-c", APEX_LATE_REPLAY, str(ROOT / "examples" / "apex_cartpole.py"), str(tmp_path / "run")], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["env_steps"] >= 3000


@pytest.mark.parametrize(
    "script, args",
    [
        ("a2c_cartpole.py", ["--num-collectors", "1"]),
        ("sac_pendulum.py", ["--num-collectors", "1", "--replay", "actor", "--learning-starts", "200"]),
        ("es_cartpole.py", ["--population", "8"]),
    ],
    ids=["a2c", "sac-replay-actor", "es"],
)
def test_ctrl_c_saves_a_distributed_run(tmp_path: Path, script: str, args: list[str]) -> None:
    """Ctrl-C (SIGINT to the script's whole process group, as a terminal sends it) ends a
    distributed run with status 130 and, with ``--save``, a checkpoint of what it trained (the
    learner's, and the replay actor's replay): it used to save nothing, losing an hours-long run."""
    import os
    import signal
    import sys
    import time

    save = tmp_path / "ckpt.pt"
    episodes = tmp_path / "run" / "episodes.csv"
    command = [str(ROOT / "examples" / script), *args, "--total-steps", "100000000", "--no-stop-when-solved"]
    command += ["--save", str(save), "--run-dir", str(tmp_path / "run"), "--no-progress", "--no-tensorboard"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Its output goes to files, never to pipes nobody reads while it trains (a full pipe would
    # block the script in a write).
    out, err_file = (tmp_path / "stdout.txt").open("w"), (tmp_path / "stderr.txt").open("w")
    with out, err_file:
        proc = subprocess.Popen(
            [sys.executable, *command], cwd=tmp_path, env=env, text=True, start_new_session=True,
            stdout=out, stderr=err_file,
        )  # fmt: skip
    started = time.monotonic()
    try:
        while not (episodes.exists() and len(episodes.read_text().splitlines()) > 5):
            waited = time.monotonic() - started
            assert proc.poll() is None and waited < 180, f"{waited:.0f}s: {(tmp_path / 'stderr.txt').read_text()}"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 90s after SIGINT: {(tmp_path / 'stderr.txt').read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 130, err[-2000:]
    assert f"saved in {save}" in err
    state = torch.load(save, weights_only=False)
    if script == "es_cartpole.py":  # an agent's checkpoint: ES's generation counts what it trained
        assert state["_attributes"]["generation"] > 0
        return
    assert state["env_steps"] > 0
    if script == "sac_pendulum.py":
        assert len(state["replay"]) > 0  # fetched from the replay actor before it stopped
