"""The habits, enforced on the source tree so they survive later edits.

No reshape but einops: every file under ``src/`` is parsed (the syntax tree, not text) for
``.view``, ``.reshape``, ``.squeeze``, ``.unsqueeze``, ``.flatten`` (methods or ``torch.``
functions) and ``None``-indexing such as ``x[:, None]``. Annotations are skipped, and so
are subscripts of capitalised names and builtin generics: ``Iterator[None]`` is no tensor.

A quiet start: importing the package installs no filter (what the command lines hide while
they run is tested in ``test_run_files.py``).
"""

import ast
import subprocess
import sys

import pytest

from .project import PACKAGE, SOURCE_ROOT, child_environment

FORBIDDEN_CALLS = {"view", "view_as", "reshape", "reshape_as", "squeeze", "unsqueeze", "flatten"}
BUILTIN_GENERICS = {"dict", "list", "tuple", "set", "frozenset", "type"}


def _annotation_nodes(tree: ast.AST) -> set[int]:
    roots: list[ast.expr | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(inner) for root in roots if root is not None for inner in ast.walk(root)}


def _is_type_expression(node: ast.Subscript) -> bool:
    base = node.value
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return name[:1].isupper() or name in BUILTIN_GENERICS


def forbidden_reshapes(source: str, filename: str = "<string>") -> list[str]:
    found = []
    tree = ast.parse(source, filename)
    in_annotation = _annotation_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in in_annotation:
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in FORBIDDEN_CALLS
        ):
            found.append(f"{filename}:{node.lineno}: .{node.func.attr}(...); use einops")
        elif isinstance(node, ast.Subscript) and not _is_type_expression(node):
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(isinstance(item, ast.Constant) and item.value is None for item in index):
                found.append(f"{filename}:{node.lineno}: None-indexing; use einops")
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        "y = x.view(-1)",
        "y = x.reshape(3, 2)",
        "y = x.squeeze()",
        "y = x.unsqueeze(-1)",
        "y = x.flatten()",
        "y = torch.squeeze(x, 1)",
        "y = x[:, None]",
        "y = x[None]",
        "y = x[..., None, :]",
    ],
)
def test_checker_flags_each_forbidden_reshape(snippet: str) -> None:
    assert forbidden_reshapes(snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        'y = rearrange(x, "batch 1 -> batch")',
        "y = x[:, 0]",
        "y = x[mask]",
        "def f() -> Iterator[None]: ...",
        "Hook = Callable[..., None]",
        "handlers: dict[str, None] = {}",
    ],
)
def test_checker_allows_einops_and_plain_indexing(snippet: str) -> None:
    assert not forbidden_reshapes(snippet)


def test_source_tree_has_no_forbidden_reshapes() -> None:
    files = sorted(SOURCE_ROOT.rglob("*.py"))
    assert files, f"no Python files under {SOURCE_ROOT}"
    found = [hit for path in files for hit in forbidden_reshapes(path.read_text(), str(path))]
    assert not found, "\n".join(found)


IMPORT_EVERY_MODULE = f"""
import importlib, logging, pkgutil, warnings

for name in ("torch", "lightning", "gymnasium", "optuna", "pandas", "jsonargparse"):
    try:  # the third parties' own filters are theirs
        importlib.import_module(name)
    except ImportError:
        pass


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
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE],
        env=child_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["0", "0"], done.stdout + done.stderr
