"""Hyperparameter sweeps on Optuna: ``python -m <package>.sweep regression --trials 20``."""
