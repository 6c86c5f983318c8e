"""``actorrt.compat.parl.utils``: each piece PARL's scripts use, against PARL's documented
behaviour (its docstrings and the values its code gives), and the maths against slow
references. The logger and TensorBoard scalars are checked in a script's own process."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from actorrt.compat.parl import utils
from actorrt.compat.parl.utils import CSVLogger, ReplayMemory, calc_discount_sum_rewards, calc_gae, machine_info
from actorrt.compat.parl.utils.scheduler import LinearDecayScheduler, PiecewiseScheduler
from actorrt.compat.parl.utils.time_stat import TimeStat
from actorrt.compat.parl.utils.window_stat import WindowStat

# ---- ReplayMemory ------------------------------------------------------------------------------


def test_replay_memory_keeps_the_last_max_size_transitions_with_parls_types() -> None:
    rpm = ReplayMemory(max_size=5, obs_dim=3, act_dim=2)
    for i in range(7):
        rpm.append(np.full(3, i), np.full(2, i / 10), float(i), np.full(3, i + 1), i % 2 == 1)
    assert rpm.size() == len(rpm) == 5 and rpm._curr_pos == 2
    assert sorted(rpm.reward.tolist()) == [2, 3, 4, 5, 6]  # the oldest two overwritten
    obs, action, reward, next_obs, terminal = rpm.sample_batch(64)
    assert (
        obs.shape == next_obs.shape == (64, 3) and action.shape == (64, 2) and reward.shape == terminal.shape == (64,)
    )
    assert (obs.dtype, action.dtype, reward.dtype, terminal.dtype) == (np.float32, np.float32, np.float32, np.bool_)
    np.testing.assert_array_equal(next_obs[:, 0], obs[:, 0] + 1)
    np.testing.assert_array_equal(terminal, reward % 2 == 1)
    np.testing.assert_allclose(action[:, 0], reward / 10, rtol=1e-6)


def test_replay_memory_of_a_discrete_task_stores_int32_actions() -> None:
    rpm = ReplayMemory(10, 4, 0)
    rpm.append(np.zeros(4), 3, 1.0, np.ones(4), False)
    assert rpm.action.shape == (10,) and rpm.action.dtype == np.int32
    assert rpm.sample_batch(2)[1].tolist() == [3, 3]


def test_replay_memory_samples_with_numpys_global_random_state() -> None:
    rpm = ReplayMemory(100, 1, 1)
    for i in range(100):
        rpm.append([i], [0.0], 0.0, [i], False)
    np.random.seed(7)
    first = rpm.sample_batch(10)[0]
    np.random.seed(7)
    idx = rpm.make_index(10)
    np.testing.assert_array_equal(first, rpm.sample_batch_by_index(idx)[0])
    np.random.seed(7)
    np.testing.assert_array_equal(first[:, 0], np.random.randint(100, size=10))


def test_replay_memory_saves_and_loads_parls_npz_layout(tmp_path: Path) -> None:
    rpm = ReplayMemory(8, 2, 1)
    for i in range(5):
        rpm.append([i, i], [i], i, [i + 1, i + 1], i == 4)
    rpm.save(str(tmp_path / "rpm.npz"))
    with np.load(tmp_path / "rpm.npz") as data:
        assert sorted(data.files) == ["action", "next_obs", "obs", "other", "reward", "terminal"]
        assert data["other"].tolist() == [5, 5]
    back = ReplayMemory(8, 2, 1)
    back.load(str(tmp_path / "rpm.npz"))
    assert back.size() == 5 and back._curr_pos == 5
    np.testing.assert_array_equal(back.obs[:5], rpm.obs[:5])
    smaller = ReplayMemory(3, 2, 1)
    smaller.load(str(tmp_path / "rpm.npz"))
    assert smaller.size() == 3 and smaller._curr_pos == 2


def test_replay_memory_takes_a_d4rl_dataset() -> None:
    n = 6
    dataset = {
        "observations": np.arange(n * 2, dtype=np.float32).reshape(n, 2),
        "next_observations": np.ones((n, 2), np.float32),
        "actions": np.zeros((n, 1), np.float32),
        "rewards": np.arange(n, dtype=np.float32),
        "terminals": np.array([0, 0, 1, 0, 0, 1], bool),
    }
    rpm = ReplayMemory(10, 2, 1)
    rpm.load_from_d4rl(dataset)
    assert rpm.size() == 6 and rpm.terminal.sum() == 2
    assert set(rpm.sample_batch(50)[2].tolist()) <= set(range(6))
    with pytest.raises(ValueError, match="do not fit max_size=4"):
        ReplayMemory(4, 2, 1).load_from_d4rl(dataset)


# ---- returns -----------------------------------------------------------------------------------


def gae_reference(rewards: np.ndarray, values: np.ndarray, next_value: float, gamma: float, lam: float) -> np.ndarray:
    """PARL's definition, step by step."""
    values_next = np.append(values[1:], next_value)
    deltas = rewards + gamma * values_next - values
    out = np.zeros(len(rewards))
    acc = 0.0
    for t in reversed(range(len(rewards))):
        acc = deltas[t] + gamma * lam * acc
        out[t] = acc
    return out


@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_calc_gae_is_gae(lam: float) -> None:
    rng = np.random.default_rng(lam.hex().__hash__() % 2**32)
    rewards, values = rng.normal(size=17), rng.normal(size=17)
    got = calc_gae(list(rewards), list(values), 0.7, 0.99, lam)
    np.testing.assert_allclose(got, gae_reference(rewards, values, 0.7, 0.99, lam), rtol=1e-12)
    assert got.dtype == np.float64 and got.shape == (17,)
    with pytest.raises(ValueError, match="one value per step each"):
        calc_gae(rewards, values[:-1], 0.0, 0.99, lam)


def test_calc_discount_sum_rewards() -> None:
    rewards = np.array([1.0, 0.0, 2.0, -1.0])
    expected = [1 + 0.9 * (0 + 0.9 * (2 + 0.9 * -1)), 0.9 * (2 + 0.9 * -1), 2 + 0.9 * -1, -1]
    np.testing.assert_allclose(calc_discount_sum_rewards(rewards, 0.9), expected)


# ---- statistics and schedules ------------------------------------------------------------------


def test_window_stat_covers_the_last_window_size_values() -> None:
    stat = WindowStat(3)
    assert (stat.mean, stat.min, stat.max) == (None, None, None)
    for x in [5, 1, 2, 9]:
        stat.add(x)
    assert (stat.mean, stat.min, stat.max) == (4.0, 1, 9)  # 1, 2, 9
    arrays = WindowStat(2)
    arrays.add(np.array(1.0))
    arrays.add(np.array(3.0))
    assert arrays.mean == 2.0
    with pytest.raises(ValueError, match="window_size must be >= 1"):
        WindowStat(0)


def test_time_stat_times_the_blocks_it_wraps() -> None:
    stat = TimeStat(2)
    assert stat.mean is None
    for seconds in (0.0, 0.05, 0.02):
        with stat:
            time.sleep(seconds)
    assert 0.015 <= stat.min <= stat.max and 0.045 <= stat.max < 1.0 and stat.mean == pytest.approx(0.035, abs=0.02)


def test_piecewise_scheduler_gives_the_value_of_the_step_range() -> None:
    sched = PiecewiseScheduler([(0, 1.0), (3, 0.5), (5, 0.1)])
    assert [sched.step() for _ in range(6)] == [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]
    jump = PiecewiseScheduler([(0, 1.0), (3, 0.5), (5, 0.1)])
    assert jump.step(step_num=10) == 0.1  # past both changes at once
    assert PiecewiseScheduler([(0, -0.01)]).step() == -0.01
    with pytest.raises(ValueError, match="steps must increase"):
        PiecewiseScheduler([(0, 1.0), (0, 2.0)])
    with pytest.raises(ValueError, match="empty"):
        PiecewiseScheduler([])
    with pytest.raises(ValueError, match="step_num must be an int >= 1"):
        sched.step(0)


def test_linear_decay_scheduler_goes_down_to_zero_and_stays() -> None:
    sched = LinearDecayScheduler(0.001, 100)
    assert sched.step(step_num=25) == pytest.approx(0.00075)
    assert sched.step(step_num=np.int64(25)) == pytest.approx(0.0005)
    assert sched.step(step_num=1000) == 0.0 and sched.cur_step == 100
    with pytest.raises(ValueError, match="max_steps must be > 0"):
        LinearDecayScheduler(1.0, 0)


# ---- CSVLogger, machine_info, helpers ----------------------------------------------------------


def test_csv_logger_writes_dicts_as_rows(tmp_path: Path) -> None:
    path = tmp_path / "result.csv"
    log = CSVLogger(str(path))
    log.log_dict({"loss": 1, "reward": 2})
    log.log_dict({"loss": 3, "reward": 4})
    with pytest.raises(AssertionError, match="keys of the dict should be the same"):
        log.log_dict({"loss": 5})
    log.close()
    with path.open(newline="") as f:
        assert list(csv.reader(f)) == [["loss", "reward"], ["1", "2"], ["3", "4"]]


def test_machine_info(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3")
    assert machine_info.get_gpu_count() == 2 and machine_info.is_gpu_available()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert machine_info.get_gpu_count() == 0 and not machine_info.is_gpu_available()
    assert not machine_info.is_xpu_available()
    port = machine_info.get_free_tcp_port()
    assert isinstance(port, str) and machine_info.is_port_available(port)
    assert 40000 <= machine_info.get_port_from_range(40000, 40100) <= 40100
    ip = machine_info.get_ip_address()
    assert ip is None or (ip.count(".") == 3 and not ip.startswith("127."))


def test_small_helpers() -> None:
    class Base(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    class Good(Base):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

        def value(self, x: torch.Tensor) -> torch.Tensor:
            return x

    class Inherits(Base):  # its class defines no forward of its own
        pass

    utils.check_model_method(Good(), "forward", "PG")
    utils.check_model_method(Good(), "value", "A2C")
    with pytest.raises(AssertionError, match="PG's model needs to implement forward method"):
        utils.check_model_method(Inherits(), "forward", "PG")
    with pytest.raises(AssertionError, match="A2C's model needs to implement policy method"):
        utils.check_model_method(Good(), "policy", "A2C")
    assert utils.has_func(Good(), "value") and not utils.has_func(Good(), "nope")
    assert utils.to_str(utils.to_byte("héllo")) == "héllo" and utils.MAX_INT32 == 2**31 - 1
    assert utils._HAS_TORCH and not utils._HAS_PADDLE and not utils.isnotebook()
    with pytest.raises(AttributeError, match=r"parl\.utils\.VisualDL is not in actorrt\.compat\.parl.*docs/parl\.md"):
        _ = utils.VisualDL


# ---- logger and summary, in a script's process -------------------------------------------------


def run_script(folder: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    """``source`` as ``folder/name``, run through the runner there."""
    (folder / name).write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "actorrt.compat.parl", name], capture_output=True, text=True, cwd=folder, timeout=120
    )


LOGGING = """
import json, os, sys
from parl.utils import logger, summary

logger.info("before any directory")
logger.warning("careful")
logger.set_dir("./logs")
logger.info("into the file")
summary.add_scalar("reward", 1.5, 1)
summary.add_scalar("reward", 2.5, 2)
summary.flush()

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

events = EventAccumulator("logs")
events.Reload()
scalars = [(e.step, e.value) for e in events.Scalars("reward")]
print(json.dumps({"dir": logger.get_dir(), "files": sorted(os.listdir("logs")), "scalars": scalars}))
"""


def test_logger_prints_parls_lines_and_summary_writes_tensorboard_scalars(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "stale.txt").write_text("set_dir empties the folder")
    out = run_script(tmp_path, "train.py", LOGGING)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    stamp = r"\[\d\d-\d\d \d\d:\d\d:\d\d MainThread @"
    assert lines[0].startswith("[") and lines[0].endswith("] Argv: train.py")
    assert re.fullmatch(stamp + r"train\.py:5\] before any directory", lines[1]), lines[1]
    assert re.fullmatch(stamp + r"train\.py:6\] WRN careful", lines[2]), lines[2]
    seen = json.loads(lines[-1])
    assert seen["dir"] == "./logs" and "stale.txt" not in seen["files"] and "log.log" in seen["files"]
    log = (tmp_path / "logs" / "log.log").read_text()
    assert "into the file" in log and "before any directory" not in log
    assert seen["scalars"] == [[1, 1.5], [2, 2.5]]  # read back by TensorBoard


def test_summary_without_a_directory_uses_train_log_of_the_script(tmp_path: Path) -> None:
    (tmp_path / "train_log" / "es_train").mkdir(parents=True)
    (tmp_path / "train_log" / "es_train" / "old").write_text("emptied, as PARL does")
    out = run_script(tmp_path, "es_train.py", "from parl.utils import summary\nsummary.add_scalar('x', 1, 0)\n")
    assert out.returncode == 0, out.stderr
    files = os.listdir(tmp_path / "train_log" / "es_train")
    assert "old" not in files and "log.log" in files and any(f.startswith("events.out.tfevents") for f in files)
    assert "WRN [tensorboard] logdir is None, will save tensorboard files to train_log/es_train" in out.stdout
