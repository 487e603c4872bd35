"""The search space of a sweep, read from YAML (docs/sweeps.md shows one): what to tune,
over which values, and which ``summary.json`` key says how good a run was.

A key is a LightningCLI option path; a sampled value reaches the run as ``--key=value``.
Optuna stores only scalar choices, so a categorical whose choices are lists is stored as
each choice's JSON text (``"[64, 64]"``) and decoded back before the run sees it. Optuna's
distributions and pruner check the ranges and options; whether the option paths exist is
checked later, against the example's own parser.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ..run.errors import UserError

_KINDS = {
    "float": FloatDistribution,
    "int": IntDistribution,
    "categorical": CategoricalDistribution,
}


@dataclass(frozen=True)
class Parameter:
    key: str
    distribution: optuna.distributions.BaseDistribution
    encoded: bool = False
    """The choices are stored as JSON text (they are lists or mappings)."""

    def suggest(self, trial: optuna.Trial) -> Any:
        """Sample this parameter for ``trial`` and return the value the run gets."""
        dist = self.distribution
        if isinstance(dist, CategoricalDistribution):
            return self.decode(trial.suggest_categorical(self.key, dist.choices))
        if isinstance(dist, IntDistribution):
            return trial.suggest_int(self.key, dist.low, dist.high, step=dist.step, log=dist.log)
        assert isinstance(dist, FloatDistribution)
        return trial.suggest_float(self.key, dist.low, dist.high, step=dist.step, log=dist.log)

    def decode(self, stored: Any) -> Any:
        return json.loads(stored) if self.encoded else stored

    def edge_values(self) -> list[Any]:
        """Values that exercise the parser: both bounds, or every choice."""
        dist = self.distribution
        if isinstance(dist, CategoricalDistribution):
            return [self.decode(choice) for choice in dist.choices]
        return [dist.low, dist.high]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class SearchSpace:
    path: Path
    key: str
    """The ``summary.json`` key whose value a trial is judged by."""
    direction: Literal["minimize", "maximize"]
    parameters: tuple[Parameter, ...]
    pruner: optuna.pruners.MedianPruner

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
        raise UserError(f"--space {path}: not YAML: {' '.join(str(error).split())}") from error

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
    try:
        pruner = optuna.pruners.MedianPruner(**(document.get("pruner") or {}))
    except (TypeError, ValueError) as error:
        raise refuse(f"pruner (optuna's MedianPruner): {error}") from None
    return SearchSpace(
        path=path,
        key=objective["key"],
        direction=direction,
        parameters=tuple(_parameter(key, spec, refuse) for key, spec in parameters.items()),
        pruner=pruner,
    )


def _parameter(key: str, spec: object, refuse: Any) -> Parameter:
    # Whether the key is an option path, the example's parser says (see __main__).
    if not isinstance(spec, dict) or spec.get("type") not in _KINDS:
        kind = spec.get("type") if isinstance(spec, dict) else spec
        raise refuse(f"{key}: unknown type {kind!r}; give float, int or categorical")
    kind = spec["type"]
    # An option given as null is left to its default.
    options = {name: value for name, value in spec.items() if name != "type" and value is not None}
    encoded = False
    if kind == "categorical":
        choices = options.get("choices")
        if not isinstance(choices, list) or not choices:
            raise refuse(f"{key}: choices must be a non-empty list")
        if len(set(map(json.dumps, choices))) < len(choices):
            raise refuse(f"{key}: choices are repeated")
        encoded = not all(
            choice is None or isinstance(choice, bool | int | float | str) for choice in choices
        )
        if encoded:
            options["choices"] = [json.dumps(choice) for choice in choices]
    else:
        # Optuna's distributions would round a float bound of an int parameter, take any
        # truthy log, or compare a string: the types are checked here.
        number = int if kind == "int" else (int, float)
        for name in ("low", "high", "step"):
            value = options.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, number)):
                wanted = "a whole number" if kind == "int" else "a number"
                raise refuse(f"{key}: {name} is {value!r}, not {wanted}")
        if not isinstance(options.get("log", False), bool):
            raise refuse(f"{key}: log is {options['log']!r}; give true or false")
    try:  # Optuna's own checks: the bounds, log and step, and options it does not take
        return Parameter(key, _KINDS[kind](**options), encoded)
    except (TypeError, ValueError) as error:
        raise refuse(f"{key}: {error}") from None
