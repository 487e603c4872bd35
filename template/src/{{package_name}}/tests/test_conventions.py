"""The habits, enforced on the source tree so they survive later edits. No reshape but
einops: the syntax tree (not the text) of every file under ``src/`` is searched for ``.view``,
``.reshape``, ``.squeeze``, ``.unsqueeze``, ``.flatten`` (methods or ``torch.`` functions) and
``None``-indexing such as ``x[:, None]``, skipping annotations and subscripts of capitalised
names and builtin generics: ``Iterator[None]`` is no tensor. A quiet start: importing the
package installs no filter (what the command lines hide is ``test_run_files.py``'s)."""

import ast
import subprocess
import sys

import pytest

from .project import PACKAGE, SOURCE_ROOT, child_environment

FORBIDDEN_CALLS = {"view", "view_as", "reshape", "reshape_as", "squeeze", "unsqueeze", "flatten"}
BUILTIN_GENERICS = {"dict", "list", "tuple", "set", "frozenset", "type"}


def _is_type_expression(base: ast.expr) -> bool:
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return name[:1].isupper() or name in BUILTIN_GENERICS


def forbidden_reshapes(source: str, filename: str = "<string>") -> list[str]:
    found = []
    tree = ast.parse(source, filename)
    hints = [getattr(n, key, None) for n in ast.walk(tree) for key in ("annotation", "returns")]
    skipped = {id(inner) for root in hints if root for inner in ast.walk(root)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        name = getattr(getattr(node, "func", None), "attr", None)
        if isinstance(node, ast.Call) and name in FORBIDDEN_CALLS:
            found.append(f"{filename}:{node.lineno}: .{name}(...); use einops")
        elif isinstance(node, ast.Subscript) and not _is_type_expression(node.value):
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(isinstance(item, ast.Constant) and item.value is None for item in index):
                found.append(f"{filename}:{node.lineno}: None-indexing; use einops")
    return found


FLAGGED = ["x.view(-1)", "x.reshape(3, 2)", "x.squeeze()", "x.unsqueeze(-1)", "x.flatten()"]
FLAGGED += ["torch.squeeze(x, 1)", "x[:, None]", "x[None]", "x[..., None, :]"]
ALLOWED = ['rearrange(x, "batch 1 -> batch")', "x[:, 0]", "x[mask]", "Hook = Callable[..., None]"]
ALLOWED += ["def f() -> Iterator[None]: ...", "handlers: dict[str, None] = {}"]


@pytest.mark.parametrize("snippet", FLAGGED + ALLOWED)
def test_checker_flags_each_forbidden_reshape_and_nothing_else(snippet: str) -> None:
    assert bool(forbidden_reshapes(snippet)) is (snippet in FLAGGED)


def test_source_tree_has_no_forbidden_reshapes() -> None:
    files = sorted(SOURCE_ROOT.rglob("*.py"))
    assert files, f"no Python files under {SOURCE_ROOT}"
    found = [hit for path in files for hit in forbidden_reshapes(path.read_text(), str(path))]
    assert not found, "\n".join(found)


IMPORT_EVERY_MODULE = f"""
import contextlib, importlib, logging, pkgutil, warnings

for name in ("torch", "lightning", "gymnasium", "optuna", "pandas", "jsonargparse"):
    with contextlib.suppress(ImportError):  # the third parties' own filters are theirs
        importlib.import_module(name)
def filters():
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    return len(warnings.filters), sum(len(log.filters) for log in [logging.root, *loggers])
before = filters()
package = importlib.import_module("{PACKAGE}")
for module in pkgutil.walk_packages(package.__path__, "{PACKAGE}."):
    if ".tests" not in module.name and not module.name.endswith("__main__"):
        importlib.import_module(module.name)
print(*(after - then for after, then in zip(filters(), before)))
"""


@pytest.mark.slow  # a fresh interpreter, whose filters only these imports have touched
def test_importing_the_package_changes_no_warning_or_logging_filter() -> None:
    command = [sys.executable, "-c", IMPORT_EVERY_MODULE]
    done = subprocess.run(command, env=child_environment(), capture_output=True, text=True)
    assert done.stdout.split() == ["0", "0"], done.stdout + done.stderr
