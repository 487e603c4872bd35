"""The policy-gradient objectives: hand-computed GAE, zero diagnostics at ratio 1, and
column advantages (shape (N, 1) against (N,)) refused."""

import pytest
import torch
from einops import rearrange
from jaxtyping import TypeCheckError

from ...core import policy_gradient as pg

F, T = False, True


def _time_env(env0: list, env1: list, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return rearrange(torch.tensor([env0, env1], dtype=dtype), "env time -> time env")


def test_gae_by_hand_termination_truncation_and_episode_boundary() -> None:
    # gamma = lambda = 0.5, so gamma * lambda = 0.25.
    # env 0 terminates at t=1 (no bootstrap, no flow from t=2), a new episode runs t=2..3
    #   and the rollout ends mid-episode, bootstrapping from next_values[3] = 0.1.
    #   deltas: 1 + .5*.4 - .5 = .7 | 1 - .4 = .6 | 1 + .5*.2 - .3 = .8 | 1 + .5*.1 - .2 = .85
    #   A3 = .85, A2 = .8 + .25*.85 = 1.0125, A1 = .6, A0 = .7 + .25*.6 = .85
    # env 1 is truncated at t=2: it bootstraps from the final observation's value 2.0 but
    #   takes no advantage from t=3, which belongs to the next episode.
    #   deltas: .5 | .5 | 1 + .5*2 - 1 = 1 | .5
    #   A3 = .5, A2 = 1, A1 = .5 + .25*1 = .75, A0 = .5 + .25*.75 = .6875
    rewards = _time_env([1, 1, 1, 1], [1, 1, 1, 1])
    values = _time_env([0.5, 0.4, 0.3, 0.2], [1, 1, 1, 1])
    next_values = _time_env([0.4, 9.0, 0.2, 0.1], [1, 1, 2, 1])
    terminated = _time_env([F, T, F, F], [F, F, F, F], torch.bool)
    truncated = _time_env([F, F, F, F], [F, F, T, F], torch.bool)
    advantages, returns = pg.gae(rewards, values, next_values, terminated, truncated, 0.5, 0.5)
    expected = _time_env([0.85, 0.6, 1.0125, 0.85], [0.6875, 0.75, 1.0, 0.5])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + values)


def test_gae_with_lambda_one_and_no_ends_is_discounted_return_minus_value() -> None:
    rewards, values = torch.ones(3, 1), torch.zeros(3, 1)
    flags = torch.zeros(3, 1, dtype=torch.bool)
    advantages, _ = pg.gae(rewards, values, torch.zeros(3, 1), flags, flags, 0.9, 1.0)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1 + 0.9 + 0.81, 1 + 0.9, 1.0]))


def test_approx_kl_and_clip_fraction_by_hand() -> None:
    log_prob = torch.randn(16)
    assert pg.clip_fraction(log_prob, log_prob.clone(), 0.2) == 0.0
    assert pg.approx_kl(log_prob, log_prob.clone()) == 0.0
    log_ratio = torch.tensor([0.1, -0.2])
    expected = torch.mean(torch.exp(log_ratio) - 1 - log_ratio)
    torch.testing.assert_close(pg.approx_kl(log_ratio, torch.zeros(2)), expected)
    assert pg.clip_fraction(torch.log(torch.tensor([1.5, 1.1])), torch.zeros(2), 0.2) == 0.5


def test_clipped_surrogate_takes_the_pessimistic_term() -> None:
    log_prob, advantages = torch.log(torch.tensor([1.5, 0.5])), torch.tensor([1.0, -1.0])
    # ratio 1.5, A=1: max(-1.5, -1.2) = -1.2.  ratio 0.5, A=-1: max(0.5, 0.8) = 0.8.
    loss = pg.clipped_surrogate_loss(log_prob, torch.zeros(2), advantages, 0.2)
    torch.testing.assert_close(loss, torch.tensor((-1.2 + 0.8) / 2))


def test_value_loss_with_and_without_clipping() -> None:
    values, old, returns = torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([1.0])
    losses = [pg.value_loss(values, old, returns, None), pg.value_loss(values, old, returns, 0.5)]
    # clipped value 0.5: max((2-1)^2, (0.5-1)^2) = 1; and for returns 3: max(1, 6.25).
    losses.append(pg.value_loss(values, old, torch.tensor([3.0]), 0.5))
    torch.testing.assert_close(torch.stack(losses), torch.tensor([1.0, 1.0, 6.25]))


def test_normalize_advantages() -> None:
    normalized = pg.normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    torch.testing.assert_close(normalized.mean(), torch.tensor(0.0))
    torch.testing.assert_close(normalized.std(), torch.tensor(1.0), atol=1e-4, rtol=0)


def test_every_objective_works_at_batch_size_one() -> None:
    one = torch.tensor([0.3])
    values = [pg.normalize_advantages(one), pg.entropy_bonus(one), pg.approx_kl(one, one)]
    values += [pg.clipped_surrogate_loss(one, one, one, 0.2), pg.clip_fraction(one, one, 0.2)]
    values += [pg.value_loss(one, one, one, clip) for clip in (0.2, None)]
    values.append(pg.reinforce_loss(one, one))
    assert all(torch.isfinite(value).all() for value in values)


def test_column_advantages_raise_naming_argument_and_shapes() -> None:
    log_prob, advantages = torch.randn(6), torch.randn(6, 1)
    with pytest.raises(TypeCheckError) as error:
        pg.clipped_surrogate_loss(log_prob, log_prob.detach(), advantages, 0.2)
    message = str(error.value)
    assert "parameter 'advantages'" in message
    assert "f32[6]" in message and "f32[6,1]" in message
