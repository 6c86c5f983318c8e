"""OpenAI-ES on CartPole-v1 with remote evaluation workers (antithetic pairs, centred ranks,
a shared noise table: workers get noise offsets, not vectors), or CMA-ES (``--algo cmaes``:
workers get the candidate vectors).

    python examples/es_cartpole.py                         # embedded cluster, 2 workers
    python examples/es_cartpole.py --workers 1             # compare: the same run on one worker
    python examples/es_cartpole.py --algo cmaes            # CMA-ES (pycma) on the same workers
    python examples/es_cartpole.py --address HOST:PORT --workers 8
    tensorboard --logdir runs

Each generation evaluates ``--population`` perturbed policies (one episode each) and
``--theta-episodes`` episodes of the unperturbed policy; solved when the mean return of the
unperturbed policy over its last 20 episodes is >= 475. Prints the final JSON line (with
generations, frames/s and workers) and exits 0 when solved.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass

import torch

import actorrt
import rl
from rl.collector import CollectorConfig, env_spaces
from rl.learners.es import ESLearner


@dataclass
class Config(rl.TrainingRun):
    """Train OpenAI-ES (or CMA-ES) on CartPole-v1 with remote evaluation workers."""

    algo: str = "es"
    """``es`` (OpenAI-ES) or ``cmaes`` (CMA-ES; --population, --sigma and --seed apply, not --lr)."""

    env_id: str = "CartPole-v1"
    """gymnasium environment id."""
    seed: int = 0
    """Seed for the initial policy, the noise offsets and the workers' environments."""
    total_steps: int = 3_000_000
    """Environment steps to train for, perturbed and unperturbed episodes together (it stops at the first generation that reaches them)."""
    workers: int = 2
    """Remote evaluation workers (actorrt actors)."""
    population: int = 48
    """Perturbed policies per generation (an even number: antithetic pairs)."""
    sigma: float = 0.1
    """Standard deviation of the parameter noise."""
    lr: float = 0.03
    """Adam step size on the flat parameter vector."""
    l2_coeff: float = 0.005
    """Weight decay coefficient."""
    hidden: int = 16
    """Width of the policy's hidden layer."""
    noise_size: int = 2**22
    """Values in the shared noise table (float32; built identically in every process)."""
    noise_seed: int = 123
    """Seed of the shared noise table."""
    theta_episodes: int = 4
    """Episodes of the unperturbed policy per generation (what "solved" is judged on)."""
    solved_return: float = 475.0
    """Mean return of the unperturbed policy over its last 20 episodes that counts as solved."""
    run_dir: str = "runs/es_cartpole"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    address: str | None = None
    """Master HOST:PORT of a running cluster; default: an embedded cluster."""


class MakePolicy:
    """Builds the policy network; runs in the learner and in every worker (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.MLPPolicy:
        obs_space, action_space = env_spaces(CollectorConfig(self.config.env_id))
        return rl.MLPPolicy(obs_space, action_space, hidden=(self.config.hidden,))


class MakeAgent:
    """Builds the learner's agent around ES."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        torch.manual_seed(c.seed)
        if c.algo == "cmaes":
            return rl.Agent(rl.CMAES(MakePolicy(c)(), sigma=c.sigma, population=c.population, seed=c.seed))
        if c.algo != "es":
            raise ValueError(f"unknown algo {c.algo!r} (es or cmaes)")
        es = rl.ES(
            MakePolicy(c)(),
            rl.NoiseTable(c.noise_size, c.noise_seed),
            population=c.population,
            sigma=c.sigma,
            lr=c.lr,
            l2_coeff=c.l2_coeff,
            seed=c.seed,
        )
        return rl.Agent(es)


async def run(config: Config) -> tuple[dict, ESLearner]:
    """Train on a cluster; return the final JSON line's fields and the learner."""
    if config.algo not in ("es", "cmaes"):
        raise SystemExit(f"es_cartpole.py: --algo must be es or cmaes, not {config.algo!r}")
    rl.use_torch_threads()
    logger = rl.TrainingLogger(
        config.run_dir, config.total_steps, tensorboard=config.tensorboard, progress=config.progress
    )
    try:
        async with actorrt.connect(config.address, num_cpus=max(2, config.workers), preload=["rl.learners"]):
            learner = ESLearner(
                MakeAgent(config),
                MakePolicy(config),
                config.env_id,
                num_workers=config.workers,
                theta_episodes=config.theta_episodes,
                seed=config.seed,
                logger=logger,
            )
            if config.restore:
                learner.agent.restore(config.restore)
            async with learner:
                try:
                    result = await learner.train(config.total_steps, config.solved_return, config.stop_when_solved)
                except (asyncio.CancelledError, KeyboardInterrupt):  # Ctrl-C: keep what was trained
                    if config.save:
                        learner.agent.save(config.save)
                        logger.note(f"stopped: the agent as trained so far is saved in {config.save}")
                    raise
            if config.save:
                learner.agent.save(config.save)
    finally:
        logger.close()
    name = "CMA-ES" if config.algo == "cmaes" else "ES"
    logger.plot(f"{name} on {config.env_id} ({config.workers} workers)", config.solved_return)
    line = {
        "env": config.env_id,
        "algo": name,
        **result.json_fields(),
        "generations": result.updates,
        "workers": config.workers,
    }
    return line, learner


if __name__ == "__main__":
    with rl.user_errors():
        cfg = rl.parse_config(Config, description=__doc__)
        line, _ = actorrt.run(run(cfg))
        print(json.dumps(line), flush=True)
        sys.exit(0 if line["solved"] else 1)
