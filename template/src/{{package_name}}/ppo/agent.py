"""The actor-critic: separate tanh MLPs for the policy and the value, orthogonally initialised
(0.01 on the policy head, so the first policy is near uniform). Discrete actions are a
categorical over logits; Box actions a diagonal Gaussian with a learned, state-independent log
standard deviation. Log-probabilities and entropies are per sample, whatever the action's shape."""

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Distribution, Independent, Normal
from torch.nn import functional as F

from ..core.nets import MLP, ScalarMLP
from ..core.shapes import Float, Int, Tensor, compiled, typechecked

Action = Int[Tensor, " batch"] | Float[Tensor, "batch action"]


class ActorCritic(nn.Module):
    def __init__(
        self,
        observation_size: int,
        action_space: gym.spaces.Discrete | gym.spaces.Box,
        hidden_sizes: Sequence[int] = (64, 64),
    ) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        outputs = gym.spaces.flatdim(action_space)
        self.actor = MLP(observation_size, outputs, hidden_sizes, "tanh", output_gain=0.01)
        self.critic = ScalarMLP(observation_size, hidden_sizes, "tanh", output_gain=1.0)
        # A categorical policy has no log-std: its empty parameter never gets a gradient, and
        # DDP refuses a parameter that wants one and gets none.
        size = 0 if self.discrete else outputs
        self.log_std = nn.Parameter(torch.zeros(size), requires_grad=not self.discrete)
        # What runs the actor and the critic (a tuple: the modules are not registered twice).
        self.networks: tuple[Callable[..., Any], Callable[..., Any]] = (self.actor, self.critic)

    def compile_networks(self, **options: Any) -> None:
        """Compile the actor and the critic; their shapes stay checked at the compiled boundary."""
        self.networks = (compiled(self.actor, **options), compiled(self.critic, **options))

    def _gaussian(self, observation: Float[Tensor, "batch feature"]) -> Distribution:
        mean = self.networks[0](observation)
        std = torch.exp(self.log_std).expand_as(mean)
        return Independent(Normal(mean, std, validate_args=False), 1, validate_args=False)

    @typechecked
    def value(self, observation: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        return self.networks[1](observation)

    @typechecked
    def sample(self, observation: Float[Tensor, "batch feature"]) -> Action:
        """Draw an action for each row. A discrete draw is the argmax of the logits plus Gumbel
        noise: an exact sample from their softmax, without building a ``Categorical``. A row
        whose largest logit is NaN or infinite (a NaN observation, every action masked) raises,
        as ``torch.multinomial`` does; argmax would quietly pick one."""
        if self.discrete:
            logits = self.networks[0](observation).float()  # bf16 noise would be coarse
            if not bool(torch.isfinite(logits.amax(dim=-1)).all()):  # amax keeps a NaN
                raise ValueError(f"a row of the policy's logits has no finite maximum: {logits}")
            return (logits - torch.empty_like(logits).exponential_().log()).argmax(dim=-1)
        return self._gaussian(observation).sample()

    @typechecked
    def greedy(self, observation: Float[Tensor, "batch feature"]) -> Action:
        """The most likely action: argmax of the logits, or the Gaussian's mean."""
        out = self.networks[0](observation)
        return out.argmax(dim=-1) if self.discrete else out

    @typechecked
    def evaluate(
        self, observation: Float[Tensor, "batch feature"], action: Action
    ) -> tuple[Float[Tensor, " batch"], Float[Tensor, " batch"], Float[Tensor, " batch"]]:
        """Log-probability and entropy of given actions under the current policy, and the
        value of each observation. For discrete actions one ``log_softmax`` serves both: a
        ``Categorical`` gives the same values with twice the work."""
        if self.discrete:
            log_probs = torch.log_softmax(self.networks[0](observation), dim=-1)
            # Each row's log-probability of its action; nll_loss refuses one out of range.
            log_prob = -F.nll_loss(log_probs, action.long(), reduction="none")
            # Clamped as in Categorical: an action of probability 0 adds 0, not 0 * -inf.
            finite = log_probs.clamp(min=torch.finfo(log_probs.dtype).min)
            entropy = -(log_probs.exp() * finite).sum(dim=-1)
        else:
            distribution = self._gaussian(observation)
            log_prob, entropy = distribution.log_prob(action), distribution.entropy()
        return log_prob, entropy, self.value(observation)
