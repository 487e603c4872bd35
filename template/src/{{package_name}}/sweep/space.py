"""The search space of a sweep, read from YAML (docs/sweeps.md shows one).

A key is a LightningCLI option path; a sampled value reaches the run as ``--key=value``.
Optuna stores only scalar choices, so a categorical whose choices are lists is stored as
each choice's JSON text (``"[64, 64]"``) and decoded before the run sees it. Optuna's
distributions and pruner check the ranges and options; the example's own parser checks the
option paths (``__main__``).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import yaml
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ..run.errors import UserError

KINDS = {"float": FloatDistribution, "int": IntDistribution, "categorical": CategoricalDistribution}


@dataclass(frozen=True)
class SearchSpace:
    path: Path
    key: str
    """The ``summary.json`` key whose value a trial is judged by."""
    direction: Literal["minimize", "maximize"]
    distributions: dict[str, BaseDistribution]
    encoded: frozenset[str]
    """The categoricals whose choices are stored as JSON text."""
    pruner: optuna.pruners.MedianPruner

    def sample(self, trial: optuna.Trial) -> dict[str, Any]:
        """Every parameter's value for ``trial``, as the run gets it."""
        values = {}
        for key, d in self.distributions.items():
            if isinstance(d, CategoricalDistribution):
                values[key] = self.decode(key, trial.suggest_categorical(key, d.choices))
            elif isinstance(d, IntDistribution):
                values[key] = trial.suggest_int(key, d.low, d.high, step=d.step, log=d.log)
            else:
                assert isinstance(d, FloatDistribution)
                values[key] = trial.suggest_float(key, d.low, d.high, step=d.step, log=d.log)
        return values

    def decode(self, key: str, stored: Any) -> Any:
        return json.loads(stored) if key in self.encoded else stored

    def edge_rows(self) -> list[dict[str, Any]]:
        """A few complete assignments that, between them, hold every bound and every choice:
        what the example's parser reads before any trial runs."""
        edges = {
            key: [self.decode(key, choice) for choice in dist.choices]
            if isinstance(dist, CategoricalDistribution)
            else [dist.low, dist.high]  # type: ignore[attr-defined]
            for key, dist in self.distributions.items()
        }
        rows = max(map(len, edges.values()))
        return [{key: edge[row % len(edge)] for key, edge in edges.items()} for row in range(rows)]


def overrides(values: dict[str, Any]) -> list[str]:
    """``--key=value`` for ``values``: a string as it is, anything else as JSON, which is YAML,
    which the parser reads."""
    return [
        f"--{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in values.items()
    ]


def load(path: str | Path) -> SearchSpace:
    """Read and check the space in ``path``; a mistake is a :class:`UserError` that names the
    file and the key."""
    path = Path(path)

    def refuse(message: str) -> UserError:
        return UserError(f"--space {path}: {message}")

    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise refuse(error.strerror or str(error)) from error
    except yaml.YAMLError as error:
        raise refuse(f"not YAML: {' '.join(str(error).split())}") from error
    if not isinstance(document, dict):
        raise refuse("expected a mapping with the keys objective and parameters")
    unknown = sorted(set(document) - {"objective", "parameters", "pruner"})
    if unknown:
        raise refuse(f"unknown key {unknown[0]!r}; the keys are objective, parameters, pruner")
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
    distributions, encoded = {}, set()
    for key, spec in parameters.items():
        kind = spec.get("type") if isinstance(spec, dict) else spec
        if not isinstance(spec, dict) or not isinstance(kind, str) or kind not in KINDS:
            raise refuse(f"{key}: unknown type {kind!r}; give float, int or categorical")
        # An option given as null is left to its default.
        options = {n: v for n, v in spec.items() if n != "type" and v is not None}
        if kind == "categorical":
            choices = options.get("choices")
            if not isinstance(choices, list) or not choices:
                raise refuse(f"{key}: choices must be a non-empty list")
            if len(set(map(json.dumps, choices))) < len(choices):
                raise refuse(f"{key}: choices are repeated")
            if not all(c is None or isinstance(c, bool | int | float | str) for c in choices):
                encoded.add(key)
                options["choices"] = [json.dumps(choice) for choice in choices]
        else:
            # Optuna would round a float bound of an int, take any truthy log, or compare a
            # string: the types are checked here.
            number = int if kind == "int" else (int, float)
            for name in ("low", "high", "step"):
                value = options.get(name)
                if value is not None and (isinstance(value, bool) or not isinstance(value, number)):
                    wanted = "a whole number" if kind == "int" else "a number"
                    raise refuse(f"{key}: {name} is {value!r}, not {wanted}")
            if not isinstance(options.get("log", False), bool):
                raise refuse(f"{key}: log is {options['log']!r}; give true or false")
        try:  # Optuna's own checks: the bounds, log and step, and options it does not take
            distributions[key] = KINDS[kind](**options)
        except (TypeError, ValueError) as error:
            raise refuse(f"{key}: {error}") from None
    return SearchSpace(path, objective["key"], direction, distributions, frozenset(encoded), pruner)
