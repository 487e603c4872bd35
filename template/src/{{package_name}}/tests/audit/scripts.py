"""Training scripts for the audit's tests, as text. Each :class:`Case` is one row of
``docs/shape_bugs.md`` that the guard catches, or the accuracy bug, written the way users
write it (``x[:, None]``, ``.squeeze()``, which this project's own source never does, hence
text rather than modules), with the bug planted on, or fixed on, one marked line."""

from dataclasses import dataclass

MARK = "LINE_UNDER_TEST"


@dataclass(frozen=True)
class Case:
    body: str
    planted: str
    fixed: str

    def script(self, planted: bool = True) -> str:
        return self.body.replace(MARK, self.planted if planted else self.fixed)

    @property
    def line(self) -> int:
        return next(i for i, text in enumerate(self.body.splitlines(), 1) if MARK in text)


CATALOG: dict[str, Case] = {
    "a column target in a regression loss": Case(
        """import torch
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(64, 3), torch.randn(64, 1)
net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(5):
    prediction = net(x).squeeze(-1)
    LINE_UNDER_TEST
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
""",
        "loss = F.mse_loss(prediction, y)",
        "loss = F.mse_loss(prediction, y.squeeze(-1))",
    ),
    "column advantages in a policy loss": Case(
        """import torch

logits = torch.randn(32, 2, requires_grad=True)
policy = torch.distributions.Categorical(logits=logits)
actions = policy.sample()
advantages = torch.randn(32)[:, None]
LINE_UNDER_TEST
loss.backward()
""",
        "loss = -(policy.log_prob(actions) * advantages).mean()",
        "loss = -(policy.log_prob(actions) * advantages[:, 0]).mean()",
    ),
    "the critic's column against returns": Case(
        """import torch

critic = torch.nn.Linear(4, 1)
observations, returns = torch.randn(16, 4), torch.randn(16)
values = critic(observations)
LINE_UNDER_TEST
value_loss.backward()
""",
        "value_loss = 0.5 * ((values - returns) ** 2).mean()",
        "value_loss = 0.5 * ((values.view(-1) - returns) ** 2).mean()",
    ),
    "Normal log_prob of a column mean": Case(
        """import torch

mean = torch.nn.Linear(4, 1)(torch.randn(16, 4))
actions = torch.randn(16)
LINE_UNDER_TEST
print(log_prob.shape)
""",
        "log_prob = torch.distributions.Normal(mean, 1.0).log_prob(actions)",
        "log_prob = torch.distributions.Normal(mean.flatten(), 1.0).log_prob(actions)",
    ),
    "same-rank outer broadcast": Case(
        """import torch

column, row = torch.randn(8, 1), torch.randn(1, 8)
LINE_UNDER_TEST
print(product.shape)
""",
        "product = column * row",
        "product = column * row.T",
    ),
    "accuracy against a column of predictions": Case(
        """import torch

logits, labels = torch.randn(20, 3), torch.randint(0, 3, (20,))
LINE_UNDER_TEST
print(f"accuracy {accuracy:.2f}")
""",
        "accuracy = (logits.argmax(-1, keepdim=True) == labels).float().mean()",
        "accuracy = (logits.argmax(-1) == labels).float().mean()",
    ),
}


TWO_BUGS = """import torch

torch.manual_seed(0)
critic = torch.nn.Linear(4, 1)
actor = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam([*critic.parameters(), *actor.parameters()], lr=1e-3)
for update in range(3):
    observations, returns = torch.randn(16, 4), torch.randn(16)
    advantages = (returns - critic(observations).detach().view(-1))[:, None]
    policy = torch.distributions.Categorical(logits=actor(observations))
    log_prob = policy.log_prob(policy.sample())
    policy_loss = -(log_prob * advantages).mean()  # planted
    value_loss = ((critic(observations) - returns) ** 2).mean()  # planted
    optimizer.zero_grad()
    (policy_loss + value_loss).backward()
    optimizer.step()
print("trained")
"""
"""Two planted bugs, each on a line that ends in ``# planted``; each runs three times."""

ATTENTION_MASKS = """import torch

torch.manual_seed(0)
B, T, D = 4, 6, 8
lengths = torch.tensor([6, 3, 5, 2])
padding = torch.arange(T)[None, :] < lengths[:, None]
causal = torch.arange(T)[:, None] >= torch.arange(T)[None, :]
mask = causal & padding[:, None, None, :]
pairwise = padding[:, :, None] & padding[:, None, :]
relative = torch.arange(T)[None, :] - torch.arange(T)[:, None]
bias = torch.nn.Embedding(2 * T - 1, 1)(relative + T - 1)[..., 0]
x = torch.randn(B, T, D)
q, k, v = torch.nn.Linear(D, 3 * D)(x).chunk(3, dim=-1)
scores = (q @ k.transpose(-2, -1)) / D**0.5 + bias
scores = scores[:, None].masked_fill(~mask, float("-inf"))
weights = scores.softmax(-1).nan_to_num()
out = (weights @ v[:, None])[:, 0] * padding[..., None]
print(out.shape, pairwise.sum().item())
"""
"""Attention written the usual way: padding, causal, combined, pairwise and relative-position
masks, all two-sided broadcasts by design; none is a finding."""

ATTENTION_LIBRARY: str = """import torch
from x_transformers import Decoder, TransformerWrapper

torch.manual_seed(0)
B, T, D = 4, 6, 16
lengths = torch.tensor([6, 3, 5, 2])
starts = T - lengths  # left padding
layers = Decoder(dim=D, depth=1, heads=2, alibi_pos_bias=True, num_residual_streams=2)
model = TransformerWrapper(num_tokens=20, max_seq_len=T, attn_layers=layers)
head = torch.nn.Linear(D, 1)
tokens, targets = torch.randint(1, 20, (B, T)), torch.randn(B)
padding = torch.arange(T)[None, :] >= starts[:, None]
embeddings = model(tokens, mask=padding, seq_start_pos=starts, return_embeddings=True)
pooled = (embeddings * padding[..., None]).sum(1) / lengths[:, None]
loss = ((head(pooled).squeeze(-1) - targets) ** 2).mean()
loss.backward()
print(f"loss {loss.item():.3f}")
"""
"""A padded, masked attention forward and backward on x-transformers, clean: its ALiBi
slopes (``torch.Tensor([...])``) and its two residual streams (einx) are no bug."""

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
"""A single-file PPO for CartPole, clean; ``test_ppo_audit.py`` plants two bugs in it
(typed ``str``, so that pyright lets a test look up a line of it built at run time)."""
