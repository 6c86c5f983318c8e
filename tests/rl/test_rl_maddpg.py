"""MADDPG: one agent's update against a slow reference of the paper's (Lowe et al. 2017,
Algorithm 1, with the authors' Gumbel-softmax actions, policy regulariser and clipping), the
order switch, the targets, and Algorithm 1's loop over the agents."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import rl
from rl import ops
from rl.algorithms.maddpg import AgentBatch, learn_together

OBS_DIMS = (4, 3)
ACT_DIMS = (5, 2)
B = 8


def _agents(continuous: bool = False, actor_first: bool = False) -> list[rl.MADDPG]:
    torch.manual_seed(0)
    critic_in = sum(OBS_DIMS) + sum(ACT_DIMS)
    return [
        rl.MADDPG(
            rl.MADDPGActor(o, a, (16, 16), continuous),
            rl.CentralisedCritic(critic_in, (16, 16)),
            i,
            continuous=continuous,
            actor_first=actor_first,
        )
        for i, (o, a) in enumerate(zip(OBS_DIMS, ACT_DIMS, strict=True))
    ]


def _batch(seed: int = 0) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs = [torch.randn(B, d, generator=g) for d in OBS_DIMS]
    actions = [torch.softmax(torch.randn(B, d, generator=g), -1) for d in ACT_DIMS]
    return obs, actions, torch.randn(B, generator=g)


def _reference_update(
    agent: rl.MADDPG, obs: list[torch.Tensor], actions: list[torch.Tensor], y: torch.Tensor, seed: int
) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The paper's step for agent i, written out: critic onto y, then the actor through
    Q_i(x, a_1, .., softmax(l_i + g), .., a_N), each by Adam with its gradient clipped to 0.5
    (or the actor first, with ``actor_first``)."""
    actor, critic = copy.deepcopy(agent.model), copy.deepcopy(agent.critic)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
    i = agent.agent_index

    def critic_step() -> None:
        q = critic(obs, actions)
        loss = ((q - y) ** 2).mean()
        critic_opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), 0.5)
        critic_opt.step()

    def actor_step() -> None:
        out = actor(obs[i])
        u = torch.rand_like(out)
        mine = torch.softmax(out - torch.log(-torch.log(u)), -1)
        acts = [*actions[:i], mine, *actions[i + 1 :]]
        loss = -critic(obs, acts).mean() + 1e-3 * (out**2).mean()
        actor_opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), 0.5)
        actor_opt.step()

    torch.manual_seed(seed)
    for step in (actor_step, critic_step) if agent.actor_first else (critic_step, actor_step):
        step()
    return actor, critic


@pytest.mark.parametrize("actor_first", [False, True])
def test_one_agents_update_is_the_papers(actor_first: bool) -> None:
    agent = _agents(actor_first=actor_first)[1]
    obs, actions, y = _batch()
    actor, critic = _reference_update(agent, obs, actions, y, seed=3)
    target_actor_before = copy.deepcopy(agent.target_actor)
    torch.manual_seed(3)
    stats = agent.learn(AgentBatch(obs, actions, y))
    assert set(stats) == {"critic_loss", "actor_loss", "q_mean"}
    for mine, ref in ((agent.model, actor), (agent.critic, critic)):
        for (name, a), b in zip(mine.state_dict().items(), ref.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # 3. the targets: theta' <- tau theta + (1 - tau) theta'
    for a, before, now in zip(
        agent.target_actor.parameters(), target_actor_before.parameters(), agent.model.parameters(), strict=True
    ):
        torch.testing.assert_close(a, 0.01 * now + 0.99 * before)


def test_the_order_matters() -> None:
    """The actor's step sees the critic before or after its own step: different weights."""
    obs, actions, y = _batch()
    results = []
    for actor_first in (False, True):
        agent = _agents(actor_first=actor_first)[0]
        torch.manual_seed(1)
        agent.learn(AgentBatch(obs, actions, y))
        results.append(agent.model.get_weights())
    assert any(not np.allclose(a, b) for a, b in zip(results[0].values(), results[1].values(), strict=True))


def test_target_q_bootstraps_from_the_target_critic_unless_terminated() -> None:
    agent = _agents()[0]
    obs, actions, _ = _batch(1)
    with torch.no_grad():
        agent.target_critic.get_submodule("net.4").get_parameter("bias").fill_(2.0)
        q_next = agent.target_critic(obs, actions)
    rewards, terminated = torch.ones(B), torch.tensor([True, False] * (B // 2))
    y = agent.target_q(rewards, terminated, obs, actions)
    expected = rewards + 0.95 * (~terminated).float() * q_next
    torch.testing.assert_close(y, expected)


def test_relaxed_actions() -> None:
    """Discrete: softmax(l + Gumbel) (argmax distributed as softmax(l)); continuous: tanh(mean + std eps)."""
    logits = torch.tensor([[2.0, 0.0, -1.0]]).repeat(20_000, 1)
    torch.manual_seed(0)
    sample = ops.gumbel_softmax_sample(logits, torch.rand_like(logits))
    torch.testing.assert_close(sample.sum(-1), torch.ones(20_000))
    freq = torch.bincount(sample.argmax(-1), minlength=3).float() / 20_000
    torch.testing.assert_close(freq, torch.softmax(logits[0], -1), atol=0.01, rtol=0)

    agent = _agents(continuous=True)[1]
    obs = torch.randn(B, OBS_DIMS[1])
    mean, log_std = agent.model(obs)
    torch.manual_seed(4)
    got = agent.sample(obs).action
    torch.manual_seed(4)
    torch.testing.assert_close(got, torch.tanh(mean + log_std.exp() * torch.randn_like(mean)))
    torch.testing.assert_close(agent.predict(obs), torch.tanh(mean))
    assert _agents()[0].predict(torch.randn(B, OBS_DIMS[0])).sum(-1).allclose(torch.ones(B))


def test_learn_together_sets_every_target_before_any_agent_learns() -> None:
    agents = _agents()
    obs, actions, _ = _batch(2)
    next_obs, _, _ = _batch(3)
    rewards = [torch.randn(B), torch.randn(B)]
    terminated = [torch.zeros(B, dtype=torch.bool)] * 2
    before = copy.deepcopy(agents)
    torch.manual_seed(9)
    stats = learn_together(agents, obs, actions, rewards, next_obs, terminated)
    assert len(stats) == 2
    # The same by hand: every target action, then every y, then each agent's step.
    torch.manual_seed(9)
    with torch.no_grad():
        next_actions = [a.sample(o, target=True).action for a, o in zip(before, next_obs, strict=True)]
    ys = [a.target_q(rewards[i], terminated[i], next_obs, next_actions) for i, a in enumerate(before)]
    for agent, y in zip(before, ys, strict=True):
        agent.learn(AgentBatch(obs, actions, y))
    for mine, ref in zip(agents, before, strict=True):
        for a, b in zip(mine.model.parameters(), ref.model.parameters(), strict=True):
            torch.testing.assert_close(a, b)


def test_agent_index_and_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="agent_index"):
        rl.MADDPG(rl.MADDPGActor(2, 2), rl.CentralisedCritic(4), -1)
    with pytest.raises(ValueError, match="tau"):
        rl.MADDPG(rl.MADDPGActor(2, 2), rl.CentralisedCritic(4), 0, tau=0.0)
