"""The search space of a sweep, read from YAML (docs/sweeps.md shows one): what to tune,
over which values, and which ``summary.json`` key says how good a run was.

A key is a LightningCLI option path; a sampled value reaches the run as ``--key=value``.
Optuna stores only scalar choices, so a categorical whose choices are lists is stored as
each choice's JSON text (``"[64, 64]"``) and decoded back before the run sees it. Optuna's
distributions check the ranges; whether the option paths exist is checked later, against
the example's own parser.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ..run.errors import UserError

_OPTIONS = {
    "float": ({"low", "high"}, {"log", "step"}),
    "int": ({"low", "high"}, {"log", "step"}),
    "categorical": ({"choices"}, set()),
}
_PRUNER_OPTIONS = {"n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"}


@dataclass(frozen=True)
class Parameter:
    key: str
    distribution: optuna.distributions.BaseDistribution
    encoded: bool = False
    """The choices are stored as JSON text (they are lists or mappings)."""

    def suggest(self, trial: optuna.Trial) -> Any:
        """Sample this parameter for ``trial`` and return the value the run gets."""
        distribution = self.distribution
        if isinstance(distribution, CategoricalDistribution):
            return self.decode(trial.suggest_categorical(self.key, distribution.choices))
        if isinstance(distribution, IntDistribution):
            return trial.suggest_int(
                self.key,
                distribution.low,
                distribution.high,
                step=distribution.step,
                log=distribution.log,
            )
        assert isinstance(distribution, FloatDistribution)
        return trial.suggest_float(
            self.key,
            distribution.low,
            distribution.high,
            step=distribution.step,
            log=distribution.log,
        )

    def decode(self, stored: Any) -> Any:
        return json.loads(stored) if self.encoded else stored

    def edge_values(self) -> list[Any]:
        """Values that exercise the parser: both bounds, or every choice."""
        distribution = self.distribution
        if isinstance(distribution, CategoricalDistribution):
            return [self.decode(choice) for choice in distribution.choices]
        return [distribution.low, distribution.high]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class SearchSpace:
    path: Path
    key: str
    """The ``summary.json`` key whose value a trial is judged by."""
    direction: Literal["minimize", "maximize"]
    parameters: tuple[Parameter, ...]
    pruner: dict[str, int]
    """Arguments of Optuna's ``MedianPruner``."""

    def overrides(self, values: dict[str, Any]) -> list[str]:
        """``--key=value`` arguments for ``values``: a string as it is, anything else as
        JSON, which is YAML, which the parser reads."""
        return [
            f"--{key}={value if isinstance(value, str) else json.dumps(value)}"
            for key, value in values.items()
        ]

    def edge_rows(self) -> list[dict[str, Any]]:
        """A few complete assignments that, between them, hold every bound and every choice."""
        edges = {parameter.key: parameter.edge_values() for parameter in self.parameters}
        rows = max(len(values) for values in edges.values())
        return [
            {key: values[row % len(values)] for key, values in edges.items()} for row in range(rows)
        ]


def load(path: str | Path) -> SearchSpace:
    """Read and check the space in ``path``; raise a :class:`UserError` that names the file
    and the key on any mistake."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise UserError(f"--space {path}: {error.strerror or error}") from error
    except yaml.YAMLError as error:
        reason = " ".join(str(error).split())
        raise UserError(f"--space {path}: not YAML: {reason}") from error

    def refuse(message: str) -> UserError:
        return UserError(f"--space {path}: {message}")

    if not isinstance(document, dict):
        raise refuse("expected a mapping with the keys objective and parameters")
    unknown = set(document) - {"objective", "parameters", "pruner"}
    if unknown:
        raise refuse(
            f"unknown key {sorted(unknown)[0]!r}; the keys are objective, parameters, pruner"
        )
    objective = document.get("objective")
    if not isinstance(objective, dict) or not isinstance(objective.get("key"), str):
        raise refuse("objective needs a key: objective: {key: val_r2, direction: maximize}")
    if set(objective) - {"key", "direction"}:
        raise refuse(f"objective has unknown keys {sorted(set(objective) - {'key', 'direction'})}")
    direction = objective.get("direction")
    if direction not in ("minimize", "maximize"):
        raise refuse(f"objective.direction is {direction!r}; give minimize or maximize")
    parameters = document.get("parameters")
    if not isinstance(parameters, dict) or not parameters:
        raise refuse("parameters must map at least one option path to its range")
    pruner = document.get("pruner") or {}
    if not isinstance(pruner, dict) or set(pruner) - _PRUNER_OPTIONS:
        raise refuse(f"pruner takes only {sorted(_PRUNER_OPTIONS)} (optuna's MedianPruner)")
    if not all(isinstance(value, int) and value >= 0 for value in pruner.values()):
        raise refuse("pruner's values are counts: whole numbers, 0 or more")
    return SearchSpace(
        path=path,
        key=objective["key"],
        direction=direction,
        parameters=tuple(_parameter(key, spec, refuse) for key, spec in parameters.items()),
        pruner=pruner,
    )


def _parameter(key: object, spec: object, refuse: Any) -> Parameter:
    if not isinstance(key, str) or not all(part.isidentifier() for part in key.split(".")):
        raise refuse(f"{key!r} is not an option path such as model.learning_rate")
    if not isinstance(spec, dict) or spec.get("type") not in _OPTIONS:
        kind = spec.get("type") if isinstance(spec, dict) else spec
        raise refuse(f"{key}: unknown type {kind!r}; give float, int or categorical")
    kind = spec["type"]
    required, optional = _OPTIONS[kind]
    given = set(spec) - {"type"}
    if required - given:
        raise refuse(f"{key}: a {kind} parameter needs {' and '.join(sorted(required - given))}")
    if given - required - optional:
        raise refuse(f"{key}: a {kind} parameter takes no {sorted(given - required - optional)[0]}")
    if kind == "categorical":
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise refuse(f"{key}: choices must be a non-empty list")
        if len(set(map(json.dumps, choices))) < len(choices):
            raise refuse(f"{key}: choices are repeated")
        encoded = not all(
            choice is None or isinstance(choice, bool | int | float | str) for choice in choices
        )
        stored = [json.dumps(choice) for choice in choices] if encoded else choices
        return Parameter(key, CategoricalDistribution(stored), encoded)

    # Optuna's distributions check the bounds, log and step, but would round a float bound
    # of an int parameter, or compare a string: the types are checked here.
    number = int if kind == "int" else (int, float)
    low, high, step, log = spec["low"], spec["high"], spec.get("step"), spec.get("log", False)
    for name, value in (("low", low), ("high", high), ("step", step)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, number)):
            wanted = "a whole number" if kind == "int" else "a number"
            raise refuse(f"{key}: {name} is {value!r}, not {wanted}")
    if not isinstance(log, bool):
        raise refuse(f"{key}: log is {log!r}; give true or false")
    try:
        if kind == "int":
            step = 1 if step is None else step
            return Parameter(key, IntDistribution(low, high, log=log, step=step))
        return Parameter(key, FloatDistribution(float(low), float(high), log=log, step=step))
    except ValueError as error:  # Optuna's own check of the bounds, log and step
        raise refuse(f"{key}: {error}") from None
