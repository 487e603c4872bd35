"""A seeded, non-linear regression set made in memory, so the example runs offline."""

import torch

from ..core.shapes import Float, Tensor


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
    # Summed in place, term by term, through one scratch column: the same numbers as the
    # one-line expression, without a column-sized temporary per operation (at a million
    # rows each is 4 MB, which the allocator may keep after it is freed).
    y = torch.mul(x[:, 0], 2.0).sin_()
    term = torch.mul(x[:, 1], x[:, 2]).mul_(0.5)
    y += term
    y += torch.mul(x[:, 3], x[:, 3], out=term).mul_(0.3)
    y += torch.mul(x[:, 4], 2.0, out=term).tanh_()
    y += torch.randn(num_samples, generator=generator, out=term).mul_(noise_std)
    return x, y
