"""Shape-typed building blocks for PyTorch Lightning: every loss, metric and ``forward``
states the shapes it accepts, and a wrong shape raises at the call instead of broadcasting."""
