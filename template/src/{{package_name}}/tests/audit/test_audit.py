"""``python -m <package>.audit``, run in this process through ``main(argv)``: every planted
bug of the catalog is reported at its line and its fixed script reports nothing; repeats
are counted once; the program keeps its argv, name, folder and exit status; ``--typecheck``
records every violated annotation and lets the program go on; usage errors exit 2."""

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ...audit.command import main
from .scripts import ATTENTION_LIBRARY, ATTENTION_MASKS, CATALOG, TWO_BUGS

# The audit runs its own guard; an outer one (--broadcast-guard) would raise at its findings.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Using a target size:UserWarning"),
    pytest.mark.no_broadcast_guard,
]
REPORT_KEYS = {"kind", "op", "shapes", "result", "file", "line", "source", "count"}


def _audit(folder: Path, script: str, *options: str) -> tuple[int, list[dict[str, Any]]]:
    """Write ``script`` as ``train.py`` in ``folder``, audit it, return status and report."""
    path = folder / "train.py"
    path.write_text(script)
    report = folder / "report.json"
    status = main([*options, "--report", str(report), str(path)])
    return status, json.loads(report.read_text())


def _places(report: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(finding["file"], finding["line"]) for finding in report]


@pytest.mark.parametrize("row", list(CATALOG), ids=list(CATALOG))
def test_each_planted_catalog_bug_is_reported_at_its_line(row: str, tmp_path: Path) -> None:
    case = CATALOG[row]
    status, report = _audit(tmp_path, case.script(planted=True))
    assert status == 1
    assert _places(report) == [(str(tmp_path / "train.py"), case.line)]
    assert report[0]["kind"] == "broadcast" and report[0]["source"] == case.planted


@pytest.mark.parametrize("row", list(CATALOG), ids=list(CATALOG))
def test_each_fixed_catalog_script_reports_nothing(row: str, tmp_path: Path) -> None:
    assert _audit(tmp_path, CATALOG[row].script(planted=False)) == (0, [])


def test_two_planted_bugs_are_both_reported_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = _audit(tmp_path, TWO_BUGS)
    planted = [i for i, line in enumerate(TWO_BUGS.splitlines(), 1) if line.endswith("# planted")]
    assert status == 1
    assert _places(report) == [(str(tmp_path / "train.py"), line) for line in planted]
    assert [finding["count"] for finding in report] == [3, 3]
    assert [finding["op"] for finding in report] == ["Tensor.mul", "Tensor.sub"]
    assert [finding["shapes"] for finding in report] == [[[16], [16, 1]], [[16, 1], [16]]]
    assert all(set(finding) == REPORT_KEYS and finding["result"] == [16, 16] for finding in report)
    captured = capsys.readouterr()
    assert captured.out == "trained\n"  # the program's output, unchanged
    assert "audit: 2 findings" in captured.err and "3 times" in captured.err
    assert "Tensor.mul stretched every operand: (16,) and (16, 1) -> (16, 16)" in captured.err


def test_attention_masks_built_the_usual_ways_report_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _audit(tmp_path, ATTENTION_MASKS) == (0, [])
    assert "audit: no finding\n" in capsys.readouterr().err


def test_stop_on_first_raises_at_the_first_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = _audit(tmp_path, TWO_BUGS, "--stop-on-first")
    assert status == 1 and len(report) == 1 and report[0]["count"] == 1
    captured = capsys.readouterr()
    assert "trained" not in captured.out
    assert "BroadcastError: Tensor.mul stretched every operand" in captured.err


def test_program_keeps_its_argv_name_folder_and_imports_and_the_report_stays_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A relative ``--report`` is written where the audit started, though the program moves."""
    (tmp_path / "sibling.py").write_text("VALUE = 42\n")
    (tmp_path / "train.py").write_text(
        "import json, os, sys\nfrom sibling import VALUE\n"
        'seen = {"argv": sys.argv[1:], "name": __name__, "cwd": os.getcwd(), "value": VALUE}\n'
        'open(os.path.join(os.path.dirname(__file__), "seen.json"), "w").write(json.dumps(seen))\n'
        "os.chdir('..')\n"
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    argv_before = sys.argv[:]
    args = ["--lr", "3e-4", "-m", "x", "--report", "y"]
    assert main(["--report", "report.json", str(tmp_path / "train.py"), *args]) == 0
    seen = json.loads((tmp_path / "seen.json").read_text())
    cwd = str(tmp_path / "elsewhere")
    assert seen == {"argv": args, "name": "__main__", "cwd": cwd, "value": 42}
    assert sys.argv == argv_before
    assert json.loads((tmp_path / "elsewhere" / "report.json").read_text()) == []
    assert not (tmp_path / "report.json").exists()
    assert f"report written to {tmp_path / 'elsewhere' / 'report.json'}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("sys.exit(3)", 3),
        ("sys.exit('bad config')", 1),
        ("raise RuntimeError('diverged')", 1),
        ("pass", 0),
    ],
)
def test_exit_status_is_the_programs_own_without_findings(
    ending: str, status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _audit(tmp_path, f"import sys\n{ending}\n") == (status, [])
    error = capsys.readouterr().err
    if "raise" in ending:
        assert "RuntimeError: diverged" in error and f"{tmp_path / 'train.py'}" in error
        assert "runpy" not in error and "command.py" not in error


def test_max_seconds_stops_a_long_run_and_reports_what_was_seen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endless = "import torch\nwhile True:\n    error = torch.randn(4, 1) - torch.randn(4)\n"
    status, report = _audit(tmp_path, endless, "--max-seconds", "0.5")
    assert status == 1 and len(report) == 1 and report[0]["count"] > 1
    clean = "import torch\nwhile True:\n    error = torch.randn(4) - torch.randn(4)\n"
    assert _audit(tmp_path, clean, "--max-seconds", "0.5") == (0, [])
    assert "--max-seconds reached" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_script_on_an_attention_library_reports_only_its_bugs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Clean, it reports nothing. A column target in the user's own loss is at the user's
    line; a bug that stretches inside x-transformers is reported there, with the library's
    name and the user's call."""
    script = str(tmp_path / "train.py")
    assert _audit(tmp_path, ATTENTION_LIBRARY) == (0, [])

    column = ATTENTION_LIBRARY.replace("head(pooled).squeeze(-1)", "head(pooled)")
    status, report = _audit(tmp_path, column)
    loss = "loss = ((head(pooled) - targets) ** 2).mean()"
    assert status == 1 and _places(report) == [(script, column.splitlines().index(loss) + 1)]
    assert "library" not in report[0]

    starts = ATTENTION_LIBRARY.replace("seq_start_pos=starts,", "seq_start_pos=starts[:, None],")
    status, report = _audit(tmp_path, starts)
    (call,) = [text for text in starts.splitlines() if text.startswith("embeddings = model(")]
    assert status == 1 and report[0]["library"] == "x_transformers"
    assert Path(report[0]["file"]).parent.name == "x_transformers"
    user = (report[0]["user_file"], report[0]["user_line"], report[0]["user_source"])
    assert user == (script, starts.splitlines().index(call) + 1, call)
    assert (
        f"inside x_transformers, called from {script}:{user[1]}: {call}" in capsys.readouterr().err
    )


@pytest.fixture
def forget_new_modules() -> Any:
    """Modules the audited programs import from ``tmp_path`` leave ``sys.modules`` after."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if not name.startswith(("torch", "jaxtyping", "beartype", "numpy", "einops")):
            del sys.modules[name]


USER_PACKAGE = {
    "__init__.py": "",
    "losses.py": """
        import torch
        from jaxtyping import Float
        from torch import Tensor


        def mse(
            pred: Float[Tensor, " batch"], target: Float[Tensor, " batch"]
        ) -> Float[Tensor, ""]:
            return ((pred - target) ** 2).mean()


        def scaled(x: Float[Tensor, " batch"], factor: int) -> Float[Tensor, " batch"]:
            return x * factor


        class Head(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = torch.nn.Linear(3, 1)

            def forward(self, x: Float[Tensor, "batch 3"]) -> Float[Tensor, " batch"]:
                return self.linear(x)
    """,
    "logs.py": """
        from typing import Any


        def log_step(step: str) -> None:
            pass


        def retry(x: int, *, retries: Any = None) -> int:
            return x


        def configure(x: int, **options: Any) -> int:
            return x
    """,
}

TYPED_SCRIPT = """import torch
from jaxtyping import Float
from userpkg.losses import Head, mse, scaled

for step in range(2):
    loss = mse(torch.randn(4, 1), torch.randn(4))
doubled = scaled(torch.randn(4), 2.5)
values = Head()(torch.randn(4, 3))


def own(x: Float[torch.Tensor, " batch"]) -> None:  # the script's own: not checked
    pass


own(torch.randn(3, 1))
print("finished")
"""


def _user_package(folder: Path) -> None:
    package = folder / "userpkg"
    package.mkdir()
    for name, text in USER_PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text))


def test_typecheck_records_every_violated_annotation_of_the_package_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], forget_new_modules: None
) -> None:
    _user_package(tmp_path)
    status, report = _audit(tmp_path, TYPED_SCRIPT, "--typecheck", "userpkg")
    assert status == 1 and "finished" in capsys.readouterr().out
    annotations = [finding for finding in report if finding["kind"] == "annotation"]
    script = str(tmp_path / "train.py")
    seen = {
        (f["function"], f["argument"], f["expected"], f["actual"], f["file"], f["line"], f["count"])
        for f in annotations
    }
    batch = "Float[Tensor, 'batch']"
    assert seen == {
        ("userpkg.losses.mse", "pred", batch, "float32 (4, 1)", script, 6, 2),
        ("userpkg.losses.scaled", "factor", "int", "float 2.5", script, 7, 1),
        ("userpkg.losses.Head.forward", "return", batch, "float32 (4, 1)", script, 8, 1),
    }
    assert all(set(f) >= REPORT_KEYS and f["op"] == f["function"] for f in annotations)
    # The stretch inside mse, which its annotation would have prevented, is a finding too.
    broadcasts = [(f["file"], f["line"]) for f in report if f["kind"] == "broadcast"]
    losses = tmp_path / "userpkg" / "losses.py"
    line = losses.read_text().splitlines().index("    return ((pred - target) ** 2).mean()") + 1
    assert broadcasts == [(str(losses), line)]


def test_typecheck_counts_a_violation_once_and_tells_a_parameter_named_ret_from_the_return(
    tmp_path: Path, forget_new_modules: None
) -> None:
    """Deduplicated by the value's type and shape, not the value: the first is displayed.
    jaxtyping passes the return value to its second stand-in as a keyword ``ret0``; a
    parameter of the user's own with such a name, or ``**options``, is not that keyword."""
    script = "from userpkg.logs import configure, log_step, retry\n\nfor step in range(4):\n"
    script += '    log_step(step)\nretry("a")\nconfigure("b", v=True)\n'
    _user_package(tmp_path)
    status, report = _audit(tmp_path, script, "--typecheck", "userpkg")
    assert status == 1
    assert [(f["function"], f["argument"], f["actual"], f["line"], f["count"]) for f in report] == [
        ("userpkg.logs.log_step", "step", "int 0", 4, 4),
        ("userpkg.logs.retry", "x", "str 'a'", 5, 1),
        ("userpkg.logs.configure", "x", "str 'b'", 6, 1),
    ]
    assert report[0]["result"] == [] and report[0]["shapes"] == []


def test_typecheck_with_stop_on_first_raises_jaxtypings_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], forget_new_modules: None
) -> None:
    _user_package(tmp_path)
    status, report = _audit(tmp_path, TYPED_SCRIPT, "--typecheck", "userpkg", "--stop-on-first")
    assert status == 1 and [f["argument"] for f in report] == ["pred"]
    assert "TypeCheckError" in capsys.readouterr().err


def test_module_mode_runs_a_package_module_as_main_with_its_own_arguments(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    forget_new_modules: None,
) -> None:
    _user_package(tmp_path)
    script = "import sys\nprint('args', sys.argv[1:])\n"
    script += CATALOG["same-rank outer broadcast"].script()
    (tmp_path / "userpkg" / "train.py").write_text(script)
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    assert main(["--report", str(report), "-m", "userpkg.train", "--lr", "1", "-m"]) == 1
    assert "args ['--lr', '1', '-m']" in capsys.readouterr().out
    (finding,) = json.loads(report.read_text())
    assert (finding["file"], finding["line"]) == (str(tmp_path / "userpkg" / "train.py"), 6)


def test_module_mode_shows_a_missing_dependency_of_its_package_as_python_would(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    forget_new_modules: None,
) -> None:
    """Only a missing target or parent package is a usage error; a missing import inside
    the package is the program's own failure: its traceback, and exit status 1."""
    package = tmp_path / "brokenpkg"
    package.mkdir()
    (package / "__init__.py").write_text("import no_such_dependency_anywhere\n")
    (package / "train.py").write_text("print('ran')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["-m", "brokenpkg.train"]) == 1
    captured = capsys.readouterr()
    assert "ran" not in captured.out and "error: no module named" not in captured.err
    assert "No module named 'no_such_dependency_anywhere'" in captured.err
    assert str(package / "__init__.py") in captured.err  # the traceback names the import


USAGE_ERRORS = {
    "unknown option": ["--nope", "train.py"],
    "no program": ["--stop-on-first"],
    "missing script": ["no_such_script.py"],
    "missing module": ["-m", "no_such_module_anywhere"],
    "missing submodule": ["-m", "json.no_such_submodule"],
    "report folder missing": ["--report", "no/such/folder/r.json", "train.py"],
    "max-seconds not positive": ["--max-seconds", "0", "train.py"],
    "max-seconds not a number": ["--max-seconds", "soon", "train.py"],
    "typecheck of nothing": ["--typecheck", "no_such_package_anywhere", "train.py"],
    "batch not positive": ["--behaviour", "--batch", "0", "train.py"],
    "time not an integer": ["--behaviour", "--time", "ten", "train.py"],
    "batch equal to time": ["--behaviour", "--batch", "7", "--time", "7", "train.py"],
    "batch without --behaviour": ["--batch", "7", "train.py"],
    "causal without --behaviour": ["--causal", "Block", "train.py"],
    "verdicts folder missing": ["--behaviour", "--verdicts", "no/such/folder/v.json", "train.py"],
}


@pytest.mark.parametrize("case", list(USAGE_ERRORS), ids=list(USAGE_ERRORS))
def test_usage_error_exits_2_with_one_error_line(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('ran')\n")
    with pytest.raises(SystemExit) as exited:
        main(USAGE_ERRORS[case])
    captured = capsys.readouterr()
    assert exited.value.code == 2 and captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
