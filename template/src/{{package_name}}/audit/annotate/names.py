"""What a function's own code says of its parameters' axes: ``B, T, C = x.size()``, ``len(x)``,
einops patterns, torch's einsum... up to the parameter's first reassignment (docs/annotate.md)."""

import ast
import re

Fact = tuple[str, int, str, int | None, str]
"""(parameter, axis position (negative: from the end), name, the rank it needs or None, how)."""

Function = ast.FunctionDef | ast.AsyncFunctionDef


def definitions(tree: ast.AST, prefix: str = "") -> dict[str, Function]:
    """Every function of a module by its ``__qualname__``."""
    found: dict[str, Function] = {}
    for child in ast.iter_child_nodes(tree):
        inner = f"{prefix}{child.name}." if isinstance(child, ast.ClassDef) else prefix
        if isinstance(child, Function):
            found[prefix + child.name], inner = child, f"{prefix}{child.name}.<locals>."
        found.update(definitions(child, inner))
    return found


def facts(function: ast.AST | None, params: list[str]) -> list[Fact]:
    """The axis names ``function``'s own statements give its parameters, in source order."""
    stored, found = {}, []  # first store of each name; (line, fact)
    for node in _own_nodes(getattr(function, "body", [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored[node.id] = min(stored.get(node.id, node.lineno), node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            found += [(node.lineno, fact) for fact in _assigned(target, node.value)]
        elif isinstance(node, ast.Call):
            found += [(node.lineno, fact) for fact in _patterns(node)]
    found.sort(key=lambda item: item[0])
    return [fact for line, fact in found if fact[0] in params and line <= stored.get(fact[0], line)]


def _own_nodes(nodes):
    """The nodes of a function's body: those of nested functions, classes and lambdas are theirs."""
    for node in nodes:
        if not isinstance(node, Function | ast.ClassDef | ast.Lambda):
            yield node
            yield from _own_nodes(ast.iter_child_nodes(node))


def _shape_of(node: ast.AST, attribute: str = "shape") -> str | None:
    """``p`` for ``p.shape`` or ``p.size()``; for ``p.size`` where ``attribute`` is "size"."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node, attribute = node.func, "size"
    if isinstance(node, ast.Attribute) and node.attr == attribute:
        return getattr(node.value, "id", None)
    return None


def _integer(node: ast.AST) -> int | None:
    return int(text) if (text := ast.unparse(node)).removeprefix("-").isdecimal() else None


def _assigned(target: ast.AST, value: ast.AST) -> list[Fact]:
    how = ast.unparse(value)
    if isinstance(target, ast.Name):  # n = x.shape[0], x.size()[0], x.size(0), len(x)
        param, index = None, None
        if isinstance(value, ast.Subscript):
            param, index = _shape_of(value.value), _integer(value.slice)
        elif isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            is_len = isinstance(value.func, ast.Name) and value.func.id == "len"
            param = getattr(value.args[0], "id", None) if is_len else _shape_of(value.func, "size")
            index = 0 if is_len else _integer(value.args[0])
        return [(param, index, target.id, None, how)] if param and index is not None else []
    if not isinstance(target, ast.Tuple):
        return []
    start, whole = 0, value  # B, T, C = x.size();  *_, H, W = x.shape;  B, T = x.shape[:2]
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        whole, start = value.value, _integer(value.slice.lower or ast.Constant(0))
        start = start if value.slice.step is None else None
    names, param = target.elts, _shape_of(whole)
    star = next((i for i, n in enumerate(names) if isinstance(n, ast.Starred)), len(names))
    if param is None or start is None:
        return []
    rank = len(names) if whole is value and star == len(names) else None
    return [
        (param, start + i if i < star else i - len(names), name.id, rank, how)
        for i, name in enumerate(names)
        if isinstance(name, ast.Name)
    ]


def _patterns(call: ast.Call) -> list[Fact]:
    """einops patterns name axes, but not a composite ``(h d)``; torch's einsum, one letter each."""
    func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    texts = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if func not in {"rearrange", "reduce", "repeat", "parse_shape", "einsum"} or not texts:
        return []
    eq_first = isinstance(call.args[0], ast.Constant)  # torch.einsum("bij,bjk->bik", x, y)
    operands = call.args[1:] if eq_first else call.args[:-1] if func == "einsum" else call.args[:1]
    token = r"\.\.\.|\w" if eq_first else r"\([^)]*\)|\.\.\.|\S+"
    found: list[Fact] = []
    for operand, side in zip(operands, texts[0].split("->")[0].split(","), strict=False):
        tokens = re.findall(token, side)
        after = tokens.index("...") if "..." in tokens else len(tokens)
        rank = len(tokens) if after == len(tokens) else None
        found += [
            (operand.id, i if i < after else i - len(tokens), name, rank, f"{func} pattern")
            for i, name in enumerate(tokens)
            if isinstance(operand, ast.Name) and name != "..." and not name.startswith("(")
        ]
    return found
