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
        """The 1-based line of the planted bug in :meth:`script`."""
        return next(i for i, text in enumerate(self.body.splitlines(), 1) if MARK in text)


CATALOG: dict[str, Case] = {
    "the seed's regression loss": Case(
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
    "the seed's RL advantages": Case(
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
"""The rows the guard catches; a one-sided mask, ``.squeeze()`` at batch size 1 and NaN are
outside the audit (``docs/shape_bugs.md``)."""


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
