"""The typed minibatch, ``Samples``, and the loss that takes it: a field of the wrong shape,
or under the wrong name, never reaches an optimizer step."""

from dataclasses import fields, make_dataclass

import gymnasium as gym
import pytest
import torch
from einops import rearrange
from jaxtyping import TypeCheckError

from ...core.shapes import Tensor
from ...ppo.agent import ActorCritic
from ...ppo.module import STATISTICS, PPOModule, ppo_loss
from ...ppo.rollout import Samples

PER_ROW = ["actions", "old_log_prob", "old_values", "advantages", "returns"]
"""The fields of shape ``(batch,)`` for a categorical policy."""


def _columns(batch: int) -> dict[str, Tensor]:
    columns = {"observations": torch.randn(batch, 4), "actions": torch.randint(0, 2, (batch,))}
    columns["old_log_prob"] = -torch.rand(batch)  # a log-probability is at most 0
    return columns | {name: torch.randn(batch) for name in ("old_values", "advantages", "returns")}


def _loss(minibatch: object) -> tuple[Tensor, Tensor]:
    agent = ActorCritic(4, gym.spaces.Discrete(2), (8,))
    return ppo_loss(agent, minibatch, 0.2, None, 0.5, 0.0, True)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("name", PER_ROW)
def test_a_field_of_one_row_too_many_is_refused_naming_it(name: str, batch: int) -> None:
    """``observations``, the first field, sets ``batch``: a later field that disagrees is
    named. (A column in any field: ``test_annotation_cases.py``.)"""
    columns = _columns(batch)
    columns[name] = torch.cat([columns[name], columns[name][:1]])
    with pytest.raises(TypeCheckError, match=f"parameter '{name}'"):
        Samples(**columns)


@pytest.mark.parametrize("batch", [1, 5])
def test_the_loss_refuses_anything_but_the_record_and_a_misnamed_field(batch: int) -> None:
    columns = _columns(batch)
    loss, statistics = _loss(Samples(**columns))  # the valid signature is remembered first
    assert loss.shape == () and statistics.shape == (len(STATISTICS),)
    assert torch.isfinite(statistics).all()
    with pytest.raises(TypeCheckError, match="minibatch"):
        _loss(columns)  # the dict the loss took before the record
    columns["advantage"] = columns.pop("advantages")
    with pytest.raises(TypeError, match="advantage"):
        Samples(**columns)  # a misnamed field cannot be built
    # What a typo in a copied record looks like: one field named otherwise.
    renamed = [(f.name.replace("advantages", "advantage"), f.type) for f in fields(Samples)]
    with pytest.raises(TypeCheckError, match="minibatch"):
        _loss(make_dataclass("LookAlike", renamed)(**columns))


@pytest.mark.parametrize("name", ["old_log_prob", "old_values", "advantages", "returns"])
def test_a_field_changed_after_building_still_fails_inside_the_loss(name: str) -> None:
    """The record is not frozen (Lightning sets its fields when it moves it), so the loss
    does not rely on construction alone: each field meets a typed objective."""
    minibatch = Samples(**_columns(5))
    _loss(minibatch)
    setattr(minibatch, name, rearrange(getattr(minibatch, name), "batch -> batch 1"))
    with pytest.raises(TypeCheckError, match=f"parameter '{name}'"):
        _loss(minibatch)


def test_a_gaussian_log_std_gets_a_gradient_without_an_entropy_bonus() -> None:
    """With ``entropy_coef`` 0 the entropy leaves the loss, but the log-std still learns
    through the log-probabilities (and DDP needs every trainable parameter to get one)."""
    agent = ActorCritic(3, gym.spaces.Box(-1.0, 1.0, (2,)), (8,))
    observations, actions = torch.randn(5, 3), torch.randn(5, 2)
    with torch.no_grad():
        old_log_prob, _, old_values = agent.evaluate(observations, actions)
    advantages, returns = torch.randn(2, 5)
    minibatch = Samples(observations, actions, old_log_prob, old_values, advantages, returns)
    loss, _ = ppo_loss(agent, minibatch, 0.2, None, 0.5, 0.0, True)
    loss.backward()
    assert agent.log_std.grad is not None and bool(agent.log_std.grad.abs().sum() > 0)


@pytest.mark.parametrize("num_minibatches", [1, 4])
def test_each_pass_covers_every_row_once(num_minibatches: int) -> None:
    """One minibatch is the rollout itself; several are a shuffled partition of its rows,
    each row's fields kept together (``Samples.select``)."""
    module = PPOModule(num_envs=2, num_steps=8, num_minibatches=num_minibatches)
    rollout = Samples(**_columns(16))
    minibatches = list(module.minibatches(rollout))
    assert len(minibatches) == num_minibatches
    assert all(len(minibatch.returns) == 16 // num_minibatches for minibatch in minibatches)
    if num_minibatches == 1:
        assert minibatches[0] is rollout
    joined = {f.name: torch.cat([getattr(m, f.name) for m in minibatches]) for f in fields(Samples)}
    rows = [rollout.returns.tolist().index(value) for value in joined["returns"].tolist()]
    assert sorted(rows) == list(range(16))  # every row once
    for name, column in joined.items():  # and each of its fields from that row
        assert torch.equal(column, getattr(rollout, name)[rows])
