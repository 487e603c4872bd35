"""Runs the untyped model and agent a few steps at the sizes given (a script, run as users
run theirs), or with one shape bug planted at a function boundary (``--plant``)."""

import argparse

import torch
from einops import rearrange
from untyped_model import TinyGPT
from untyped_rl import Agent, policy_loss, value_loss

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=2)
parser.add_argument("--time", type=int, default=5)
parser.add_argument("--width", type=int, default=16)
parser.add_argument("--envs", type=int, default=3)
parser.add_argument("--plant", choices=["column", "short_targets", "obs", "none"], default="none")
args = parser.parse_args()
torch.manual_seed(0)

model = TinyGPT(vocab=11, width=args.width, heads=4, depth=2, max_time=16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(2):
    idx = torch.randint(11, (args.batch, args.time))
    targets = idx if args.plant != "short_targets" else idx[:, 1:]
    loss = model(idx, targets).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.generate(idx[:, :2], steps=2)

agent = Agent(obs_size=4, actions=2)
obs = torch.randn(args.envs, 4 if args.plant != "obs" else 5)
action, logprob, entropy, value = agent.get_action_and_value(obs)
_, newlogprob, _, newvalue = agent.get_action_and_value(obs, action)
returns = torch.randn(args.envs)
advantages = returns - rearrange(agent.get_value(obs), "b 1 -> b")
values = rearrange(newvalue, "b 1 -> b") if args.plant != "column" else newvalue
loss = policy_loss(advantages, (newlogprob - logprob).exp(), 0.2) + value_loss(values, returns)
print(f"trained, loss {loss.item():.3f}")
