"""The audit on a realistic single-file PPO for CartPole, written the way such scripts are
(storage from ``zeros``, GAE, ``.reshape``/``.view``/``.flatten``, minibatch epochs): clean,
it runs to its end with no finding; with the critic's ``.view(-1)`` dropped and the
advantages made a column, each stretching line is reported, in one run."""

import json
from pathlib import Path

import pytest

from ...audit.command import main

pytestmark = pytest.mark.no_broadcast_guard  # the audit runs a guard of its own

PPO_SCRIPT: str = """\
import argparse

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--num-envs", type=int, default=4)
parser.add_argument("--num-steps", type=int, default=64)
parser.add_argument("--iterations", type=int, default=2)
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()
gamma, gae_lambda, clip, epochs, minibatches = 0.99, 0.95, 0.2, 2, 4
batch_size = args.num_envs * args.num_steps
minibatch_size = batch_size // minibatches
torch.manual_seed(args.seed)
np.random.seed(args.seed)
envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * args.num_envs)
obs_size, n_actions = envs.single_observation_space.shape[0], envs.single_action_space.n


def mlp(outputs, gain):
    net = nn.Sequential(nn.Linear(obs_size, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
    net.append(nn.Linear(64, outputs))
    nn.init.orthogonal_(net[-1].weight, gain)
    return net


critic, actor = mlp(1, 1.0), mlp(n_actions, 0.01)
parameters = [*critic.parameters(), *actor.parameters()]
optimizer = torch.optim.Adam(parameters, lr=2.5e-4, eps=1e-5)
obs = torch.zeros((args.num_steps, args.num_envs, obs_size))
actions = torch.zeros((args.num_steps, args.num_envs))
logprobs = torch.zeros((args.num_steps, args.num_envs))
rewards = torch.zeros((args.num_steps, args.num_envs))
dones = torch.zeros((args.num_steps, args.num_envs))
values = torch.zeros((args.num_steps, args.num_envs))

next_obs = torch.Tensor(envs.reset(seed=args.seed)[0])
next_done = torch.zeros(args.num_envs)
for iteration in range(args.iterations):
    for step in range(args.num_steps):
        obs[step], dones[step] = next_obs, next_done
        with torch.no_grad():
            policy = Categorical(logits=actor(next_obs))
            action = policy.sample()
            values[step] = critic(next_obs).flatten()
        actions[step], logprobs[step] = action, policy.log_prob(action)
        next_obs, reward, terminated, truncated, _ = envs.step(action.numpy())
        rewards[step] = torch.tensor(reward).view(-1)
        next_obs = torch.Tensor(next_obs)
        next_done = torch.Tensor(np.logical_or(terminated, truncated))

    with torch.no_grad():
        next_value = critic(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        last_gae = 0
        for t in reversed(range(args.num_steps)):
            if t == args.num_steps - 1:
                next_nonterminal, next_values = 1.0 - next_done, next_value
            else:
                next_nonterminal, next_values = 1.0 - dones[t + 1], values[t + 1]
            delta = rewards[t] + gamma * next_values * next_nonterminal - values[t]
            advantages[t] = last_gae = delta + gamma * gae_lambda * next_nonterminal * last_gae
        returns = advantages + values

    b_obs = obs.reshape((-1, obs_size))
    b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1).long()
    b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
    b_inds = np.arange(batch_size)
    for epoch in range(epochs):
        np.random.shuffle(b_inds)
        for start in range(0, batch_size, minibatch_size):
            mb_inds = b_inds[start : start + minibatch_size]
            policy = Categorical(logits=actor(b_obs[mb_inds]))
            newlogprob = policy.log_prob(b_actions[mb_inds])
            newvalue = critic(b_obs[mb_inds]).view(-1)
            ratio = (newlogprob - b_logprobs[mb_inds]).exp()
            mb_advantages = b_advantages[mb_inds]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip, 1 + clip)
            pg_loss = torch.max(pg_loss1, pg_loss2).mean()
            v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
            loss = pg_loss - 0.01 * policy.entropy().mean() + 0.5 * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(parameters, 0.5)
            optimizer.step()
    print(f"iteration {iteration}: reward per step {rewards.mean():.3f}")
envs.close()
"""

PLANTED = {
    "newvalue = critic(b_obs[mb_inds]).view(-1)": "newvalue = critic(b_obs[mb_inds])",
    "mb_advantages = b_advantages[mb_inds]\n": "mb_advantages = b_advantages[mb_inds][:, None]\n",
}
"""The seed's two bugs: the critic's ``(N, 1)`` column, and ``(N, 1)`` advantages."""


def _audit(folder: Path, script: str) -> tuple[int, list[dict[str, object]]]:
    (folder / "ppo.py").write_text(script)
    status = main(["--report", str(folder / "report.json"), str(folder / "ppo.py"), "--seed", "2"])
    return status, json.loads((folder / "report.json").read_text())


def _line(text: str) -> int:
    return PPO_SCRIPT.splitlines().index(f"            {text}") + 1


def test_clean_ppo_script_audits_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _audit(tmp_path, PPO_SCRIPT) == (0, [])
    assert "iteration 1: reward per step" in capsys.readouterr().out


def test_both_planted_ppo_bugs_are_reported_at_their_lines_in_one_run(tmp_path: Path) -> None:
    script = PPO_SCRIPT
    for clean, planted in PLANTED.items():
        script = script.replace(clean, planted)
    status, report = _audit(tmp_path, script)
    uses = ["pg_loss1 = -mb_advantages * ratio"]
    uses.append("pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip, 1 + clip)")
    uses.append("v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()")
    assert status == 1
    assert [(f["line"], f["source"]) for f in report] == [(_line(use), use) for use in uses]
    assert [f["shapes"] for f in report] == [[[64, 1], [64]]] * 3
    assert {f["count"] for f in report} == {2 * 2 * 4}  # iterations x epochs x minibatches
