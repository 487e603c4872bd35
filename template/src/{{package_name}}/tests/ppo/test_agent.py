"""The discrete paths that skip a ``Categorical``: ``evaluate`` gives its log-probabilities,
entropies and gradients, ``sample`` draws from its softmax and refuses logits it cannot draw
from. Compiled, a wrong shape still raises (a compiled fit: ``test_run_files.py``)."""

import gymnasium as gym
import pytest
import torch
from einops import rearrange, repeat
from jaxtyping import TypeCheckError
from torch.distributions import Categorical
from torch.nn import functional as F

from ...ppo.agent import ActorCritic


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("batch", [1, 5])
def test_discrete_evaluate_matches_a_categorical(batch: int, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    agent = ActorCritic(4, gym.spaces.Discrete(3), (8,))
    for weight in agent.actor.parameters():
        torch.nn.init.normal_(weight, std=2.0)  # distinct probabilities, not near 1/3 each
    observations = torch.randn(batch, 4)
    actions = ((torch.arange(batch) + 2) % 3).to(dtype)  # the last action first
    log_prob, entropy, _ = agent.evaluate(observations, actions)
    distribution = Categorical(logits=agent.actor(observations))
    theirs = (distribution.log_prob(actions), distribution.entropy())
    torch.testing.assert_close((log_prob, entropy), theirs)
    weights = list(agent.actor.parameters())
    ours = torch.autograd.grad((log_prob + entropy).sum(), weights)
    torch.testing.assert_close(ours, torch.autograd.grad((theirs[0] + theirs[1]).sum(), weights))
    for wrong in (-1, 3):
        with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
            agent.evaluate(observations, torch.full((batch,), wrong, dtype=dtype))


def test_a_discrete_draw_follows_the_softmax_of_the_logits() -> None:
    """Over many draws, each row's action frequencies are its softmax probabilities (within
    five standard errors), on a policy far from uniform; one row draws one action."""
    torch.manual_seed(0)
    agent = ActorCritic(4, gym.spaces.Discrete(3), (8,))
    for weight in agent.actor.parameters():
        torch.nn.init.normal_(weight, std=1.0)
    observations = torch.randn(3, 4)
    draws = 20_000
    with torch.no_grad():
        probabilities = torch.softmax(agent.actor(observations), dim=-1)
        assert agent.sample(observations[:1]).shape == (1,)
        stacked = repeat(observations, "batch feature -> (draw batch) feature", draw=draws)
        drawn = rearrange(agent.sample(stacked), "(draw batch) -> draw batch", draw=draws)
    frequencies = F.one_hot(drawn, 3).float().mean(dim=0)
    standard_error = (probabilities * (1 - probabilities) / draws).sqrt()
    within = ((frequencies - probabilities).abs() <= 5 * standard_error + 1e-4).all()
    assert bool(within), (frequencies, probabilities)


def test_a_discrete_draw_refuses_a_row_without_a_finite_maximum() -> None:
    """A NaN observation (one row is enough), a +inf logit or a row with every action masked
    (-inf) makes the draw raise instead of acting on it; a masked action is never drawn."""
    agent = ActorCritic(4, gym.spaces.Discrete(3), (8,))
    with torch.no_grad(), pytest.raises(ValueError, match="no finite maximum"):
        agent.sample(torch.tensor([[0.5, -1.0, torch.nan, 2.0]]))
    last = [layer for layer in agent.actor.modules() if isinstance(layer, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        for bias in ([0.0, torch.inf, 0.0], [-torch.inf] * 3):
            last.bias.copy_(torch.tensor(bias))
            with pytest.raises(ValueError, match="no finite maximum"):
                agent.sample(torch.randn(5, 4))
        last.bias.copy_(torch.tensor([0.0, -torch.inf, 0.0]))
        drawn = agent.sample(torch.randn(1000, 4))
    assert set(drawn.tolist()) == {0, 2}


def test_compiled_agent_rejects_a_column_observation() -> None:
    torch._dynamo.reset()
    agent = ActorCritic(4, gym.spaces.Discrete(2), (8,))
    agent.compile_networks(backend="aot_eager")
    for _ in range(2):
        assert agent.value(torch.randn(5, 4)).shape == (5,)
        assert agent.sample(torch.randn(5, 4)).shape == (5,)
    with pytest.raises(TypeCheckError):
        agent.value(torch.randn(5, 4, 1))
