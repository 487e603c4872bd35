"""The habits, enforced on the source tree so they survive later edits.

Parses every file under ``src/`` (the syntax tree, not text) and fails on a reshape that
is not an einops call: ``.view``, ``.reshape``, ``.squeeze``, ``.unsqueeze``, ``.flatten``
(as methods or ``torch.`` functions) and ``None``-indexing such as ``x[:, None]``.
Type expressions (``Iterator[None]``, ``Callable[..., None]``) are not tensors: annotations
are skipped, and so are subscripts of capitalised names and builtin generics.
"""

import ast

import pytest

from .helpers.paths import SOURCE_ROOT

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
