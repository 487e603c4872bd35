"""The sweep's pruner: Optuna's ``MedianPruner``, which also learns from the trials running
beside the one it judges. Use it where several workers share a study.

Optuna's median pruner compares a trial's value at a step with the values that *complete*
trials had at that step, and stays off until ``n_startup_trials`` trials are complete. In a
serial study every earlier trial is complete by then. With K workers, the K - 1 trials
running beside it are not, although most of them have long passed that step: early in a
study the pruner then stays off for trials that one worker would have stopped, and later it
judges against less history. Those trials run to the end, and a parallel study spends more
time on trials than a serial one.

:class:`ParallelMedianPruner` counts a running trial as soon as it has reported the step
being judged, much as a serial study would have counted it by then. It cannot know whether
that trial will itself be pruned later, and a serial study would leave it out then, so the
match is close, not exact. With one worker nothing runs beside the judged trial (unless a
dead worker left one RUNNING, until the sweep marks it failed), and the decisions are
``MedianPruner``'s. Pruned and failed trials are left out, as there.
"""

from collections.abc import Container, Sequence

import optuna
from optuna.pruners import MedianPruner
from optuna.trial import FrozenTrial, TrialState


class ParallelMedianPruner(MedianPruner):
    """``MedianPruner`` (same arguments) that counts the running trials past the judged step
    among the complete ones."""

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        return super().prune(_WithRunning(study, trial), trial)  # type: ignore[arg-type]


class _WithRunning:
    """The study as ``MedianPruner.prune`` reads it: its complete trials are the complete
    ones plus every other running trial that has a value at ``trial``'s last step."""

    def __init__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._study = study
        self._trial = trial

    @property
    def direction(self) -> optuna.study.StudyDirection:
        return self._study.direction

    def get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> Sequence[FrozenTrial]:
        if states is None or TrialState.COMPLETE not in states or TrialState.RUNNING in states:
            return self._study.get_trials(deepcopy=deepcopy, states=states)
        step = self._trial.last_step
        return [  # one read of the study: the asked states, and the running trials past step
            other
            for other in self._study.get_trials(deepcopy=deepcopy)
            if other.state in states
            or (
                other.state == TrialState.RUNNING
                and other.number != self._trial.number
                and step in other.intermediate_values
            )
        ]
