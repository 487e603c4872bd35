"""Typed policy-gradient objectives: GAE, PPO's clipped losses and their diagnostics.

Log-probabilities of shape ``(N,)`` times advantages of shape ``(N, 1)`` broadcast to
``(N, N)``, and the mean becomes ``mean(log_prob) * mean(advantages)``: one credit for
every action, and an agent that plateaus for no visible reason. Every function here types
its per-sample arguments ``PerSample``, one ``batch`` axis, so that mistake raises at the call."""

import torch

from .shapes import Bool, Float, Scalar, Tensor, typechecked

PerSample = Float[Tensor, " batch"]


@typechecked
def gae(
    rewards: Float[Tensor, "time env"],
    values: Float[Tensor, "time env"],
    next_values: Float[Tensor, "time env"],
    terminated: Bool[Tensor, "time env"],
    truncated: Bool[Tensor, "time env"],
    gamma: float,
    gae_lambda: float,
) -> tuple[Float[Tensor, "time env"], Float[Tensor, "time env"]]:
    """Generalised advantage estimates and the returns the critic should regress to.
    ``next_values[t]`` is the value of the observation that followed step ``t``; after a
    truncation that is the final observation before the reset. Termination cuts the bootstrap
    (the episode really ended); truncation keeps it (time ran out) but, like termination, stops
    the advantage from flowing in from the next episode."""
    not_terminated = (~terminated).to(rewards.dtype)
    continues = (~(terminated | truncated)).to(rewards.dtype)
    deltas = rewards + gamma * not_terminated * next_values - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * gae_lambda * continues[t] * running
        advantages[t] = running
    return advantages, advantages + values


@typechecked
def normalize_advantages(advantages: PerSample) -> PerSample:
    """Zero mean and unit standard deviation over the minibatch; zero for a single element."""
    centred = advantages - advantages.mean()
    if advantages.numel() < 2:
        return centred
    return centred / (advantages.std() + 1e-8)


@typechecked
def clipped_surrogate_loss(
    log_prob: PerSample, old_log_prob: PerSample, advantages: PerSample, clip_coef: float
) -> Scalar:
    """PPO's policy loss: the mean of ``max(-A * ratio, -A * clip(ratio, 1 - c, 1 + c))``."""
    ratio = torch.exp(log_prob - old_log_prob)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    return torch.maximum(unclipped, clipped).mean()


@typechecked
def value_loss(
    values: PerSample, old_values: PerSample, returns: PerSample, clip_coef: float | None
) -> Scalar:
    """Squared error of the critic, or with ``clip_coef`` the larger of the unclipped and
    clipped errors (the new value kept within ``clip_coef`` of the one that collected the data).
    No 0.5 factor: the coefficient belongs to the caller."""
    unclipped = (values - returns) ** 2
    if clip_coef is None:
        return unclipped.mean()
    clipped_values = old_values + torch.clamp(values - old_values, -clip_coef, clip_coef)
    return torch.maximum(unclipped, (clipped_values - returns) ** 2).mean()


@typechecked
def entropy_bonus(entropy: PerSample) -> Scalar:
    """Mean policy entropy; subtract ``coef * entropy_bonus`` from the loss to explore."""
    return entropy.mean()


@typechecked
def approx_kl(log_prob: PerSample, old_log_prob: PerSample) -> Scalar:
    """Low-variance, non-negative estimate of KL(old || new): mean of ``(r - 1) - log r``."""
    log_ratio = log_prob - old_log_prob
    return (torch.exp(log_ratio) - 1.0 - log_ratio).mean()


@typechecked
def clip_fraction(log_prob: PerSample, old_log_prob: PerSample, clip_coef: float) -> Scalar:
    """Share of samples whose probability ratio left ``[1 - c, 1 + c]``."""
    ratio = torch.exp(log_prob - old_log_prob)
    return ((ratio - 1.0).abs() > clip_coef).to(log_prob.dtype).mean()


@typechecked
def reinforce_loss(log_prob: PerSample, advantages: PerSample) -> Scalar:
    """Vanilla policy gradient: ``-mean(log_prob * A)``, advantages treated as constants."""
    return -(log_prob * advantages.detach()).mean()
