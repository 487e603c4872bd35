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
ANNOTATE = ("__init__", "__main__", "edit", "infer", "names", "record")

# Every preset: the typed core (shapes, losses, metrics, nets, guards), its tests and tools.
CORE = [
    ".copier-answers.yml",
    ".github/workflows/ci.yml",
    ".gitignore",
    "LICENSE",
    "README.md",
    "noxfile.py",
    "pyproject.toml",
    "docs/install.md",
    "docs/shape_bugs.md",
    "docs/defences.md",
    f"{PACKAGE}/__init__.py",
    f"{PACKAGE}/py.typed",
    f"{PACKAGE}/core/shapes.py",
    f"{PACKAGE}/core/losses.py",
    f"{PACKAGE}/core/metrics.py",
    f"{PACKAGE}/core/nets.py",
    f"{PACKAGE}/run/summary.py",
    f"{PACKAGE}/core/__init__.py",
    f"{PACKAGE}/core/broadcast.py",
    f"{PACKAGE}/core/masks.py",
    f"{PACKAGE}/core/attention.py",
    f"{PACKAGE}/core/standardise.py",
    f"{PACKAGE}/run/__init__.py",
    f"{PACKAGE}/run/guards.py",
    f"{TESTS}/__init__.py",
    f"{TESTS}/conftest.py",
    f"{TESTS}/project.py",
    f"{TESTS}/annotation_cases.py",
    f"{TESTS}/annotation_reading.py",
    f"{TESTS}/test_annotation_cases.py",
    f"{TESTS}/test_broadcast_guard.py",
    f"{TESTS}/test_conventions.py",
    f"{TESTS}/test_losses.py",
    f"{TESTS}/test_masks.py",
    f"{TESTS}/test_behaviour.py",
    f"{TESTS}/test_nets.py",
    f"{TESTS}/test_nonfinite_locator_unit.py",
    f"{TESTS}/test_column_target.py",
    f"{TESTS}/test_shape_bug_catalog.py",
    f"{TESTS}/test_shapes.py",
    f"{TESTS}/test_shape_memo.py",
]

# Either example: the LightningCLI entry point, its run files, trainer and logger presets.
ANY_EXAMPLE = [
    "configs/logger/csv.yaml",
    "configs/logger/tensorboard.yaml",
    "configs/trainer/cpu.yaml",
    "configs/trainer/ddp.yaml",
    "configs/trainer/gpu.yaml",
    "docs/clusters.md",
    "docs/tracking.md",
    f"{PACKAGE}/run/checkpoints.py",
    f"{PACKAGE}/run/cli.py",
    f"{PACKAGE}/run/data.py",
    f"{PACKAGE}/run/errors.py",
    f"{PACKAGE}/run/ranges.py",
    f"{PACKAGE}/run/threads.py",
    f"{PACKAGE}/run/tracking.py",
    f"{TESTS}/test_run_files.py",
    f"{TESTS}/test_threads.py",
    f"{TESTS}/test_tracking.py",
    f"{TESTS}/test_user_mistakes.py",
]

# The regression or the sequence example: the pieces their tables and training share.
TABLE_EXAMPLE = [
    f"{PACKAGE}/run/schedule.py",
    f"{PACKAGE}/run/tables.py",
    f"{PACKAGE}/run/validation.py",
]

REGRESSION = [
    "configs/regression.yaml",
    "docs/regression.md",
    f"{PACKAGE}/regression/__init__.py",
    f"{PACKAGE}/regression/__main__.py",
    f"{PACKAGE}/regression/data.py",
    f"{PACKAGE}/regression/module.py",
    f"{PACKAGE}/regression/predict.py",
    f"{PACKAGE}/regression/table.py",
    f"{TESTS}/regression/__init__.py",
    f"{TESTS}/regression/test_bad_input.py",
    f"{TESTS}/regression/test_ddp_resume.py",
    f"{TESTS}/regression/test_nonfinite_locator.py",
    f"{TESTS}/regression/test_predict.py",
    f"{TESTS}/regression/test_regression.py",
    f"{TESTS}/regression/test_table.py",
]

PPO = [
    "configs/ppo.yaml",
    "configs/pendulum.yaml",
    "docs/ppo.md",
    f"{PACKAGE}/core/policy_gradient.py",
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
    f"{TESTS}/ppo/__init__.py",
    f"{TESTS}/ppo/conftest.py",
    f"{TESTS}/ppo/test_agent.py",
    f"{TESTS}/ppo/test_bad_input.py",
    f"{TESTS}/ppo/test_enjoy.py",
    f"{TESTS}/ppo/test_policy_gradient.py",
    f"{TESTS}/ppo/test_ppo.py",
    f"{TESTS}/ppo/test_ppo_ddp.py",
    f"{TESTS}/ppo/test_ppo_loss.py",
]

SEQUENCE = [
    "configs/sequence.yaml",
    "docs/sequence.md",
    f"{PACKAGE}/sequence/__init__.py",
    f"{PACKAGE}/sequence/__main__.py",
    f"{PACKAGE}/sequence/data.py",
    f"{PACKAGE}/sequence/japanese_vowels.csv.gz",
    f"{PACKAGE}/sequence/module.py",
    f"{TESTS}/sequence/__init__.py",
    f"{TESTS}/sequence/test_sequence.py",
]

# Each optional feature: its files with any example, then those it brings for one example.
FEATURES: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "include_sweeps": (
        [
            "docs/sweeps.md",
            f"{PACKAGE}/sweep/__init__.py",
            f"{PACKAGE}/sweep/__main__.py",
            f"{PACKAGE}/sweep/report.py",
            f"{PACKAGE}/sweep/space.py",
            f"{PACKAGE}/sweep/storage.py",
            f"{PACKAGE}/sweep/trial.py",
            f"{PACKAGE}/sweep/worker.py",
            f"{TESTS}/sweep/__init__.py",
            f"{TESTS}/sweep/test_space.py",
        ],
        {
            "regression": [
                "configs/sweep/regression.yaml",
                f"{TESTS}/sweep/test_regression_sweep.py",
            ],
            "ppo": ["configs/sweep/ppo.yaml", f"{TESTS}/sweep/test_ppo_sweep.py"],
            "sequence": ["configs/sweep/sequence.yaml", f"{TESTS}/sweep/test_sequence_sweep.py"],
        },
    ),
    "include_audit": (
        [
            "docs/audit.md",
            "docs/annotate.md",
            f"{PACKAGE}/pytest_plugin.py",
            f"{PACKAGE}/audit/__init__.py",
            f"{PACKAGE}/audit/__main__.py",
            f"{PACKAGE}/audit/annotations.py",
            f"{PACKAGE}/audit/behaviour.py",
            f"{PACKAGE}/audit/command.py",
            f"{PACKAGE}/audit/findings.py",
            f"{PACKAGE}/audit/nonfinite.py",
            *(f"{PACKAGE}/audit/annotate/{name}.py" for name in ANNOTATE),
            f"{TESTS}/audit/__init__.py",
            f"{TESTS}/audit/scripts.py",
            f"{TESTS}/audit/test_audit.py",
            f"{TESTS}/audit/test_audit_command_line.py",
            f"{TESTS}/audit/test_behaviour_audit.py",
            f"{TESTS}/audit/test_pytest_plugin.py",
            f"{TESTS}/audit/test_annotate.py",
            f"{TESTS}/audit/test_annotate_infer.py",
            f"{TESTS}/audit/test_nonfinite.py",
            *(f"{TESTS}/audit/untyped_{name}.py" for name in ("decoder", "driver", "encoder")),
            *(f"{TESTS}/audit/untyped_{name}.py" for name in ("model", "rl")),
        ],
        {"ppo": [f"{TESTS}/audit/test_ppo_audit.py"]},
    ),
    "include_cluster": (
        [
            "configs/trainer/multi_node.yaml",
            "slurm/train.sbatch",
            f"{PACKAGE}/preemption.py",
            f"{TESTS}/cluster/__init__.py",
            f"{TESTS}/cluster/allocation.py",
            f"{TESTS}/cluster/test_sbatch.py",
        ],
        {
            "regression": [f"{TESTS}/cluster/test_multi_node.py"],
            "ppo": [f"{TESTS}/cluster/test_ppo_slurm.py"],
        },
    ),
    "include_trackers": (
        [
            "configs/logger/mlflow.yaml",
            "configs/logger/wandb.yaml",
            f"{PACKAGE}/run/trackers.py",
            f"{TESTS}/trackers/__init__.py",
            f"{TESTS}/trackers/test_trackers.py",
        ],
        {},
    ),
    "include_video": ([], {"ppo": [f"{PACKAGE}/ppo/video.py", f"{TESTS}/ppo/test_video.py"]}),
}
ALL_FEATURES = [name for name in FEATURES]


def expected(answers: dict[str, object]) -> list[str]:
    """The files a project with these answers holds (an unnamed answer: its default)."""
    examples = [
        name for name in ("regression", "ppo", "sequence") if answers.get(f"include_{name}", True)
    ]
    files = list(CORE)
    if examples:
        files += ANY_EXAMPLE
    if "regression" in examples or "sequence" in examples:
        files += TABLE_EXAMPLE
    files += REGRESSION if "regression" in examples else []
    files += PPO if "ppo" in examples else []
    files += SEQUENCE if "sequence" in examples else []
    for feature, (common, per_example) in FEATURES.items():
        if answers.get(feature) and (examples or feature == "include_audit"):
            files += common + [
                name for example in examples for name in per_example.get(example, [])
            ]
    if answers.get("include_sweeps") and answers.get("include_cluster") and examples:
        files.append("slurm/sweep.sbatch")
    return files


EXPECTED = {preset: expected(preset_answers(preset)) for preset in PRESETS}


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


def test_a_fresh_project_has_no_optional_feature(tmp_path: Path) -> None:
    project = render(tmp_path / "project", {})
    _assert_files(project, expected({}))
    answers = (project / ".copier-answers.yml").read_text()
    assert all(f"{feature}: false" in answers for feature in FEATURES)


def test_the_full_preset_turns_every_feature_on() -> None:
    assert all(preset_answers("full").get(feature) for feature in FEATURES)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_renders_exactly_its_files(preset: str, tmp_path: Path) -> None:
    _assert_files(render(tmp_path / "project", preset_answers(preset)), EXPECTED[preset])


@pytest.mark.parametrize("feature", ALL_FEATURES)
def test_a_feature_alone_adds_exactly_its_files(feature: str, tmp_path: Path) -> None:
    answers = {feature: True}
    _assert_files(render(tmp_path / "project", answers), expected(answers))


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

    _assert_files(project, expected({"include_ppo": False}))
    assert "include_ppo: false" in (project / ".copier-answers.yml").read_text()


def test_update_turning_ppo_on_adds_its_files(template_snapshot: Path, tmp_path: Path) -> None:
    project = _committed_project(template_snapshot, tmp_path / "project", "regression")

    _update(project, {"include_ppo": True})

    _assert_files(project, expected({"include_sequence": False}))
    assert "include_ppo: true" in (project / ".copier-answers.yml").read_text()
