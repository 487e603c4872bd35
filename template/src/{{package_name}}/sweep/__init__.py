"""Hyperparameter sweeps on Optuna: ``python -m <package>.sweep regression --trials 20``.

``__main__`` checks everything and starts the workers (:mod:`.worker`); a trial
(:mod:`.trial`) is an ordinary ``fit`` with values sampled from :mod:`.space`.
"""
