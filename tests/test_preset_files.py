"""Each preset renders exactly the files listed here, and `copier update` follows the answers.

The lists are written by hand, so a file that a preset gains or loses shows up in review
as a change to this file, not in a snapshot regenerated from whatever the template renders.
What a preset leaves out is decided in copier.yml's ``_exclude``; this file is its check,
and it also refuses an excluded folder left behind empty.
A project made from the template and committed, as users do, loses the PPO files when an
update turns ``include_ppo`` off and gains them when it turns it on.
"""

from pathlib import Path

import copier
import pytest
from conftest import PRESETS, commit_all, git, preset_answers, render

PACKAGE = "src/my_project"
TESTS = f"{PACKAGE}/tests"

# Every preset: the typed core (shapes, losses, metrics, nets, guards), its tests and tools.
CORE = [
    ".copier-answers.yml",
    ".github/workflows/ci.yml",
    ".gitignore",
    ".pre-commit-config.yaml",
    "LICENSE",
    "README.md",
    "noxfile.py",
    "pyproject.toml",
    "docs/shape_bugs.md",
    "docs/audit.md",
    "docs/defences.md",
    "docs/shape_checks.md",
    f"{PACKAGE}/__init__.py",
    f"{PACKAGE}/py.typed",
    f"{PACKAGE}/shapes.py",
    f"{PACKAGE}/losses.py",
    f"{PACKAGE}/metrics.py",
    f"{PACKAGE}/nets.py",
    f"{PACKAGE}/run_summary.py",
    f"{PACKAGE}/pytest_plugin.py",
    f"{PACKAGE}/audit/__init__.py",
    f"{PACKAGE}/audit/__main__.py",
    f"{PACKAGE}/audit/annotations.py",
    f"{PACKAGE}/audit/command.py",
    f"{PACKAGE}/audit/findings.py",
    f"{PACKAGE}/guards/__init__.py",
    f"{PACKAGE}/guards/broadcast.py",
    f"{PACKAGE}/guards/callbacks.py",
    f"{TESTS}/__init__.py",
    f"{TESTS}/conftest.py",
    f"{TESTS}/helpers/__init__.py",
    f"{TESTS}/helpers/annotation_cases.py",
    f"{TESTS}/helpers/annotation_reading.py",
    f"{TESTS}/helpers/audit_scripts.py",
    f"{TESTS}/helpers/child_processes.py",
    f"{TESTS}/helpers/in_process_cli.py",
    f"{TESTS}/helpers/command_line.py",
    f"{TESTS}/helpers/paths.py",
    f"{TESTS}/test_annotation_cases.py",
    f"{TESTS}/test_audit.py",
    f"{TESTS}/test_audit_command_line.py",
    f"{TESTS}/test_broadcast_guard.py",
    f"{TESTS}/test_broadcast_masks.py",
    f"{TESTS}/test_conventions.py",
    f"{TESTS}/test_losses.py",
    f"{TESTS}/test_metrics.py",
    f"{TESTS}/test_nets.py",
    f"{TESTS}/test_nonfinite_locator_unit.py",
    f"{TESTS}/test_pytest_plugin.py",
    f"{TESTS}/test_seed_bug.py",
    f"{TESTS}/test_shape_bug_catalog.py",
    f"{TESTS}/test_shapes.py",
]

# Either example: the LightningCLI entry point, trainer presets and the Slurm script.
ANY_EXAMPLE = [
    "configs/logger/csv.yaml",
    "configs/logger/mlflow.yaml",
    "configs/logger/tensorboard.yaml",
    "configs/logger/wandb.yaml",
    "configs/trainer/cpu.yaml",
    "configs/trainer/ddp.yaml",
    "configs/trainer/gpu.yaml",
    "configs/trainer/multi_node.yaml",
    "docs/bad_input.md",
    "docs/clusters.md",
    "docs/resuming.md",
    "docs/tracking.md",
    "slurm/train.sbatch",
    "slurm/sweep.sbatch",
    "docs/sweeps.md",
    f"{PACKAGE}/sweep/__init__.py",
    f"{PACKAGE}/sweep/__main__.py",
    f"{PACKAGE}/sweep/pruner.py",
    f"{PACKAGE}/sweep/report.py",
    f"{PACKAGE}/sweep/space.py",
    f"{PACKAGE}/sweep/storage.py",
    f"{PACKAGE}/sweep/trial.py",
    f"{PACKAGE}/sweep/worker.py",
    f"{TESTS}/test_sweep_pruner.py",
    f"{TESTS}/test_sweep_space.py",
    f"{PACKAGE}/checkpoints.py",
    f"{PACKAGE}/cli.py",
    f"{PACKAGE}/errors.py",
    f"{PACKAGE}/preemption.py",
    f"{PACKAGE}/tracking.py",
    f"{TESTS}/helpers/cluster.py",
    f"{TESTS}/helpers/refusals.py",
    f"{TESTS}/test_quiet_start.py",
    f"{TESTS}/test_run_files.py",
    f"{TESTS}/test_tracking.py",
    f"{TESTS}/test_trainer_presets.py",
]

REGRESSION = [
    "configs/regression.yaml",
    "configs/sweep/regression.yaml",
    "docs/predict.md",
    "docs/regression.md",
    f"{PACKAGE}/regression/__init__.py",
    f"{PACKAGE}/regression/__main__.py",
    f"{PACKAGE}/regression/column.py",
    f"{PACKAGE}/regression/data.py",
    f"{PACKAGE}/regression/module.py",
    f"{PACKAGE}/regression/predict.py",
    f"{PACKAGE}/regression/synthetic.py",
    f"{PACKAGE}/regression/table.py",
    f"{TESTS}/regression/__init__.py",
    f"{TESTS}/regression/test_bad_input.py",
    f"{TESTS}/regression/test_column.py",
    f"{TESTS}/regression/test_compile_and_precision.py",
    f"{TESTS}/regression/test_ddp_resume.py",
    f"{TESTS}/regression/test_multi_node.py",
    f"{TESTS}/regression/test_nonfinite_locator.py",
    f"{TESTS}/regression/test_predict.py",
    f"{TESTS}/regression/test_regression.py",
    f"{TESTS}/regression/test_regression_guard.py",
    f"{TESTS}/regression/test_sweep.py",
    f"{TESTS}/regression/test_table.py",
]

PPO = [
    "configs/ppo.yaml",
    "configs/pendulum.yaml",
    "configs/sweep/ppo.yaml",
    "docs/ppo_learning_curve.png",
    "docs/ppo.md",
    f"{PACKAGE}/policy_gradient.py",
    f"{PACKAGE}/ppo/__init__.py",
    f"{PACKAGE}/ppo/__main__.py",
    f"{PACKAGE}/ppo/agent.py",
    f"{PACKAGE}/ppo/enjoy.py",
    f"{PACKAGE}/ppo/envs.py",
    f"{PACKAGE}/ppo/evaluate.py",
    f"{PACKAGE}/ppo/module.py",
    f"{PACKAGE}/ppo/plot.py",
    f"{PACKAGE}/ppo/reporting.py",
    f"{PACKAGE}/ppo/rollout.py",
    f"{PACKAGE}/ppo/solved.py",
    f"{TESTS}/ppo/__init__.py",
    f"{TESTS}/ppo/test_agent.py",
    f"{TESTS}/ppo/test_bad_input.py",
    f"{TESTS}/ppo/test_compile_and_precision.py",
    f"{TESTS}/ppo/test_enjoy.py",
    f"{TESTS}/ppo/test_policy_gradient.py",
    f"{TESTS}/ppo/test_ppo.py",
    f"{TESTS}/ppo/test_ppo_audit.py",
    f"{TESTS}/ppo/test_ppo_ddp.py",
    f"{TESTS}/ppo/test_ppo_guard.py",
    f"{TESTS}/ppo/test_ppo_loss.py",
    f"{TESTS}/ppo/test_ppo_slurm.py",
    f"{TESTS}/ppo/test_sweep.py",
]

EXPECTED = {
    "minimal": CORE,
    "regression": CORE + ANY_EXAMPLE + REGRESSION,
    "ppo": CORE + ANY_EXAMPLE + PPO,
    "default": CORE + ANY_EXAMPLE + REGRESSION + PPO,
}


def _paths(project: Path) -> list[Path]:
    """Everything in the project, relative to it, leaving out the user's ``.git``."""
    paths = (path.relative_to(project) for path in project.rglob("*"))
    return [path for path in paths if path.parts[0] != ".git"]


def _difference(expected: list[str], project: Path) -> str:
    """What a reader needs to fix the list or the template, or "" when they agree."""
    rendered = [path.as_posix() for path in _paths(project) if (project / path).is_file()]
    sections = {
        "listed here twice": {name for name in expected if expected.count(name) > 1},
        "missing (listed here, not rendered)": set(expected) - set(rendered),
        "unexpected (rendered, not listed here)": set(rendered) - set(expected),
        # An excluded folder must not be left behind empty.
        "empty folders": {
            path.as_posix()
            for path in _paths(project)
            if (project / path).is_dir() and not any((project / path).iterdir())
        },
    }
    return "\n".join(
        f"{title}:\n" + "\n".join(f"  {name}" for name in sorted(names))
        for title, names in sections.items()
        if names
    )


def _assert_files(project: Path, expected: list[str]) -> None:
    difference = _difference(expected, project)
    if difference:
        pytest.fail(f"{project}\n{difference}", pytrace=False)


def test_every_preset_has_a_file_list() -> None:
    assert sorted(EXPECTED) == PRESETS


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_renders_exactly_its_files(preset: str, tmp_path: Path) -> None:
    _assert_files(render(tmp_path / "project", preset_answers(preset)), EXPECTED[preset])


def _committed_project(template: Path, destination: Path, preset: str) -> Path:
    render(destination, preset_answers(preset), template)
    git(destination, "init", "-q")
    commit_all(destination, "project from the template")
    return destination


def _update(project: Path, data: dict[str, object]) -> None:
    copier.run_update(project, data=data, defaults=True, overwrite=True, unsafe=False, quiet=True)


def test_update_turning_ppo_off_removes_its_files(template_snapshot: Path, tmp_path: Path) -> None:
    project = _committed_project(template_snapshot, tmp_path / "project", "default")
    _assert_files(project, EXPECTED["default"])

    _update(project, {"include_ppo": False})

    _assert_files(project, EXPECTED["regression"])
    assert "include_ppo: false" in (project / ".copier-answers.yml").read_text()


def test_update_turning_ppo_on_adds_its_files(template_snapshot: Path, tmp_path: Path) -> None:
    project = _committed_project(template_snapshot, tmp_path / "project", "regression")

    _update(project, {"include_ppo": True})

    _assert_files(project, EXPECTED["default"])
    assert "include_ppo: true" in (project / ".copier-answers.yml").read_text()
