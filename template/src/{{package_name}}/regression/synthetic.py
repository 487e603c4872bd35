"""A seeded, non-linear regression set made in memory, so the example runs offline."""

import torch

from ..shapes import Float, Tensor


def make_synthetic_regression(
    num_samples: int, num_features: int = 8, noise_std: float = 0.1, seed: int = 0
) -> tuple[Float[Tensor, "batch feature"], Float[Tensor, " batch"]]:
    """Gaussian inputs and a smooth target built from the first five of them.

    The target mixes a sine, a product, a square and a saturation, so a linear model stays
    near R² 0.3 while an MLP can approach the noise ceiling (about 0.99 at ``noise_std=0.1``).
    Features past the fifth are distractors.
    """
    if num_features < 5:
        raise ValueError(f"num_features must be at least 5, got {num_features}")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, num_features, generator=generator)
    # Summed in place, term by term (the same sum, in the same order, as one expression):
    # at a million rows each temporary is another column's worth of memory.
    y = torch.sin(2.0 * x[:, 0])
    y += 0.5 * x[:, 1] * x[:, 2]
    y += 0.3 * x[:, 3] ** 2
    y += torch.tanh(2.0 * x[:, 4])
    y += noise_std * torch.randn(num_samples, generator=generator)
    return x, y
