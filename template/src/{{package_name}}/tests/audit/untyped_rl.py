"""An actor-critic written the way single-file RL scripts are, without annotations, in a
file that postpones its annotations: the annotate command's tests check that what it writes
here is still read by the runtime checks."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical


class Agent(nn.Module):
    def __init__(self, obs_size, actions):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_size, 32), nn.Tanh(), nn.Linear(32, 1))
        self.actor = nn.Sequential(nn.Linear(obs_size, 32), nn.Tanh(), nn.Linear(32, actions))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def policy_loss(advantages, ratio, clip):
    return torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)).mean()


def value_loss(values, returns):
    return 0.5 * ((values - returns) ** 2).mean()
