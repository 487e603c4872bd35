"""The typed minibatch, ``Samples``, and the loss that takes it: a field of the wrong shape,
or under the wrong name, never reaches an optimizer step."""

from dataclasses import dataclass, fields

import gymnasium as gym
import pytest
import torch
from einops import rearrange, repeat
from jaxtyping import TypeCheckError
from torch.distributions import Categorical
from torch.nn import functional as F

from ...ppo.agent import ActorCritic
from ...ppo.module import STATISTICS, PPOModule, ppo_loss
from ...ppo.rollout import Samples
from ...shapes import Float, Tensor

PER_ROW = ["actions", "old_log_prob", "old_values", "advantages", "returns"]
"""The fields of shape ``(batch,)`` for a categorical policy."""


def _columns(batch: int) -> dict[str, Tensor]:
    return {
        "observations": torch.randn(batch, 4),
        "actions": torch.randint(0, 2, (batch,)),
        "old_log_prob": -torch.rand(batch),
        "old_values": torch.randn(batch),
        "advantages": torch.randn(batch),
        "returns": torch.randn(batch),
    }


def _loss(minibatch: object) -> tuple[Tensor, Tensor]:
    agent = ActorCritic(4, gym.spaces.Discrete(2), (8,))
    return ppo_loss(agent, minibatch, 0.2, None, 0.5, 0.0, True)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch", [1, 5])
def test_loss_takes_the_record_at_any_batch_size(batch: int) -> None:
    loss, statistics = _loss(Samples(**_columns(batch)))
    assert loss.shape == () and statistics.shape == (len(STATISTICS),)
    assert torch.isfinite(statistics).all()


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("name", PER_ROW)
def test_a_column_field_is_refused_naming_it(name: str, batch: int) -> None:
    columns = _columns(batch)
    columns[name] = rearrange(columns[name], "batch -> batch 1")
    with pytest.raises(TypeCheckError, match=f"parameter '{name}'"):
        Samples(**columns)


@pytest.mark.parametrize("name", PER_ROW)
def test_a_field_with_one_row_too_many_is_refused_naming_it(name: str) -> None:
    """``observations``, the first field, sets ``batch``; a later one that disagrees is named."""
    columns = _columns(5)
    columns[name] = torch.cat([columns[name], columns[name][:1]])
    with pytest.raises(TypeCheckError, match=f"parameter '{name}'"):
        Samples(**columns)


def test_a_misnamed_field_cannot_be_built() -> None:
    columns = _columns(5)
    columns["advantage"] = columns.pop("advantages")
    with pytest.raises(TypeError, match="advantage"):
        Samples(**columns)


@dataclass
class _LookAlike:
    """What a typo in a copied record looks like: one field named otherwise."""

    observations: Float[Tensor, "batch feature"]
    actions: Tensor
    old_log_prob: Float[Tensor, " batch"]
    old_values: Float[Tensor, " batch"]
    advantage: Float[Tensor, " batch"]
    returns: Float[Tensor, " batch"]


def test_the_loss_refuses_anything_but_the_record() -> None:
    columns = _columns(5)
    _loss(Samples(**columns))  # the valid signature is remembered first
    with pytest.raises(TypeCheckError, match="minibatch"):
        _loss(columns)  # the dict the loss took before the record
    columns["advantage"] = columns.pop("advantages")
    with pytest.raises(TypeCheckError, match="minibatch"):
        _loss(_LookAlike(**columns))


@pytest.mark.parametrize("name", ["old_log_prob", "old_values", "advantages", "returns"])
def test_a_field_changed_after_building_still_fails_inside_the_loss(name: str) -> None:
    """The record is not frozen (Lightning sets its fields when it moves it), so the loss
    does not rely on construction alone: each field meets a typed objective."""
    minibatch = Samples(**_columns(5))
    _loss(minibatch)
    setattr(minibatch, name, rearrange(getattr(minibatch, name), "batch -> batch 1"))
    with pytest.raises(TypeCheckError, match=f"parameter '{name}'"):
        _loss(minibatch)


def test_select_keeps_every_field_row_aligned() -> None:
    samples = Samples(**_columns(5))
    rows = torch.tensor([3, 0])
    chosen = samples.select(rows)
    for column in fields(Samples):
        torch.testing.assert_close(
            getattr(chosen, column.name), getattr(samples, column.name)[rows]
        )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("batch", [1, 5])
def test_discrete_evaluate_matches_a_categorical(batch: int, dtype: torch.dtype) -> None:
    """The ``log_softmax`` path gives a ``Categorical``'s log-probabilities, entropies and
    gradients, row by row, on a policy far from uniform; an action out of range raises."""
    torch.manual_seed(0)
    agent = ActorCritic(4, gym.spaces.Discrete(3), (8,))
    for weight in agent.actor.parameters():
        torch.nn.init.normal_(weight, std=2.0)  # distinct probabilities, not near 1/3 each
    observations = torch.randn(batch, 4)
    actions = ((torch.arange(batch) + 2) % 3).to(dtype)  # the last action first
    log_prob, entropy, _ = agent.evaluate(observations, actions)
    weights = list(agent.actor.parameters())
    distribution = Categorical(logits=agent.actor(observations))
    expected_log_prob = distribution.log_prob(actions)
    expected_entropy = distribution.entropy()
    torch.testing.assert_close(log_prob, expected_log_prob)
    torch.testing.assert_close(entropy, expected_entropy)
    ours = torch.autograd.grad((log_prob + entropy).sum(), weights)
    theirs = torch.autograd.grad((expected_log_prob + expected_entropy).sum(), weights)
    for got, want in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, want)
    with pytest.raises(TypeCheckError, match="action"):
        agent.evaluate(observations, rearrange(actions, "batch -> batch 1"))
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
    assert bool(((frequencies - probabilities).abs() <= 5 * standard_error + 1e-4).all()), (
        frequencies,
        probabilities,
    )


def test_a_discrete_draw_refuses_a_nan_or_infinite_logit() -> None:
    """A NaN observation, or a +inf logit, makes the draw raise instead of acting on it;
    a -inf logit (a masked action) is never drawn. One row is enough to raise."""
    agent = ActorCritic(4, gym.spaces.Discrete(3), (8,))
    observation = torch.randn(1, 4)
    observation[0, 2] = torch.nan
    with torch.no_grad(), pytest.raises(ValueError, match="NaN or \\+inf"):
        agent.sample(observation)
    last = [layer for layer in agent.actor.modules() if isinstance(layer, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.0, torch.inf, 0.0]))
        with pytest.raises(ValueError, match="NaN or \\+inf"):
            agent.sample(torch.randn(5, 4))
        last.bias.copy_(torch.tensor([0.0, -torch.inf, 0.0]))
        drawn = agent.sample(torch.randn(1000, 4))
    assert not bool((drawn == 1).any())
    assert bool((drawn == 0).any()) and bool((drawn == 2).any())


def test_a_gaussian_log_std_gets_a_gradient_without_an_entropy_bonus() -> None:
    """With ``entropy_coef`` 0 the entropy leaves the loss, but the log-std still learns
    through the log-probabilities (and DDP needs every trainable parameter to get one)."""
    agent = ActorCritic(3, gym.spaces.Box(-1.0, 1.0, (2,)), (8,))
    observations, actions = torch.randn(5, 3), torch.randn(5, 2)
    with torch.no_grad():
        old_log_prob, _, old_values = agent.evaluate(observations, actions)
    minibatch = Samples(
        observations=observations,
        actions=actions,
        old_log_prob=old_log_prob,
        old_values=old_values,
        advantages=torch.randn(5),
        returns=torch.randn(5),
    )
    loss, _ = ppo_loss(agent, minibatch, 0.2, None, 0.5, 0.0, True)
    loss.backward()
    assert agent.log_std.grad is not None and bool(agent.log_std.grad.abs().sum() > 0)


@pytest.mark.parametrize("num_minibatches", [1, 4])
def test_each_pass_covers_every_row_once(num_minibatches: int) -> None:
    """One minibatch is the rollout itself; several are a shuffled partition of its rows."""
    module = PPOModule(num_envs=2, num_steps=8, num_minibatches=num_minibatches)
    rollout = Samples(**_columns(16))
    minibatches = list(module.minibatches(rollout))
    assert len(minibatches) == num_minibatches
    assert all(len(minibatch.returns) == 16 // num_minibatches for minibatch in minibatches)
    if num_minibatches == 1:
        assert minibatches[0] is rollout
    seen = sorted(torch.cat([minibatch.returns for minibatch in minibatches]).tolist())
    assert seen == sorted(rollout.returns.tolist())
