"""Hyperparameter sweeps on Optuna: ``python -m <package>.sweep regression --trials 20``.

- :mod:`.space`: the YAML search space and its objective, a ``summary.json`` key;
- :mod:`.trial`: one trial, an ordinary ``fit`` of the example, and its pruning reporter;
- :mod:`.storage`: where the study lives, and the trials of a worker that was killed;
- :mod:`.report`: ``best.yaml`` and the plots in the study's folder;
- :mod:`.worker`: a worker, which runs trials until the study holds enough;
- ``__main__``: the command line, which checks everything, starts the workers and reports.
"""
