"""From a record of calls and the sources, the jaxtyping annotation of every function that
held tensors. One promise shapes every rule: the annotation passes on sizes never recorded
and refuses what no run showed. So two axes share a name only if their sizes agreed in
every observed call (``(N, 1)`` against ``(N,)`` stays apart), an axis that varied always
gets a name, never its size, and one that never varied is written as its size unless the
code names it. Names come from the code first (``B, T, C = x.size()``, ``n = x.shape[0]``,
einops patterns, a caller's or callee's named axis), then ``batch``, then
``<param>_axis<i>``; never a numbered placeholder such as ``D1``, never a leading ``_``.
"""

import ast
import keyword
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

Path = tuple[str | int, ...]
"""Where a tensor sits: ``("x",)``, ``("return", 1)`` for a tuple's item, ``("h", "*")``
for a list's items."""
Axis = tuple[Path, int]
"""A tensor's axis; a negative position counts from the end where the rank varied."""


@dataclass
class FunctionProposal:
    params: dict[str, str]
    result: str | None
    complete: bool


@dataclass
class Proposal:
    functions: dict[str, FunctionProposal] = field(default_factory=dict)
    jaxtyping_names: dict[str, set[str]] = field(default_factory=dict)
    named_from_code: list[str] = field(default_factory=list)
    literal_axes: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    torchscript: list[str] = field(default_factory=list)


_PLACEHOLDER = re.compile(r"([a-z]|dim|axis)\d+", re.IGNORECASE)
_BUILTINS = {"int", "float", "bool", "str", "bytes", "complex", "dict"}
_EINOPS = {"rearrange", "reduce", "repeat", "parse_shape"}


def _valid(name: str) -> bool:
    """A name jaxtyping checks across arguments, which is no numbered placeholder."""
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and (not _PLACEHOLDER.fullmatch(name))
    )


def _kind(dtype: str) -> str:
    """jaxtyping's dtype class, never a precision: bf16 and float32 both give ``Float``."""
    for prefix, kind in ("bool", "Bool"), ("uint", "UInt"), ("int", "Int"), ("complex", "Complex"):
        if dtype.startswith(prefix):
            return kind
    return "Float" if dtype.startswith(("float", "bfloat")) else "Shaped"


class _Values:
    """The structure, dtypes and shapes of the values seen at each path, call by call."""

    def __init__(self) -> None:
        self.kinds: dict[Path, set[str]] = defaultdict(set)
        self.dtypes: dict[Path, set[str]] = defaultdict(set)
        self.shapes: dict[Path, list[tuple[int, tuple[int, ...]]]] = defaultdict(list)

    def add(self, value: dict | None, path: Path, call: int) -> None:
        if value is None:  # the result of a call that raised
            return
        if "tensor" in value:
            self.kinds[path].add("tensor")
            self.dtypes[path].add(_kind(value["dtype"]))
            self.shapes[path].append((call, tuple(value["tensor"])))
        elif "none" in value:
            self.kinds[path].add("none")
        elif "other" in value:
            self.kinds[path].add("other:" + value["other"])
        elif "list" in value:
            self.kinds[path].add("list")
            for item in value["list"]:
                self.add(item, (*path, "*"), call)
        else:  # a tuple or a NamedTuple: checked as the tuple it is
            items = value.get("tuple", value.get("items", []))
            self.kinds[path].add(f"tuple:{len(items)}")
            for index, item in enumerate(items):
                self.add(item, (*path, index), call)


@dataclass
class _Cluster:
    """Axes whose sizes agreed in every call where they were seen together."""

    axes: list[Axis]
    sizes: dict[int, int]  # call -> size
    seen: set[int]  # every size seen
    shareable: bool = True
    name: str | None = None
    origin: str = ""  # how the code names it, for the summary


class _Function:
    def __init__(self, key: str, entry: dict, node: ast.AST | None) -> None:
        self.key, self.entry = key, entry
        self.display = f"{os.path.basename(entry['file'])}::{entry['qualname']}"
        args = getattr(node, "args", None)
        self.variadic = {a.arg for a in (args.vararg, args.kwarg) if a} if args else set()
        self.params = [p for p in entry["params"] if p not in self.variadic]
        self.values = _Values()
        for call, seen in enumerate(entry["calls"]):
            for param in self.params:
                self.values.add(seen["args"].get(param), (param,), call)
            self.values.add(seen.get("result"), ("return",), call)
        self.ranks = {path: _rank(shapes) for path, shapes in self.values.shapes.items()}
        self.clusters: list[_Cluster] = []
        for path in sorted(self.ranks, key=self._order):
            for position in _positions(self.ranks[path]):
                self._place((path, position))
        self.cluster_of = {axis: c for c in self.clusters for axis in c.axes}

    def _order(self, path: Path) -> tuple:
        first = self.params.index(path[0]) if path[0] in self.params else len(self.params)
        return first, tuple(map(str, path))

    def _place(self, axis: Axis) -> None:
        path, position = axis
        by_call: dict[int, set[int]] = defaultdict(set)
        for call, shape in self.values.shapes[path]:
            if -len(shape) <= position < len(shape):
                by_call[call].add(shape[position])
        seen = set().union(*by_call.values())
        if any(len(sizes) > 1 for sizes in by_call.values()):  # list items that differ
            self.clusters.append(_Cluster([axis], {}, seen, shareable=False))
            return
        sizes = {call: next(iter(s)) for call, s in by_call.items()}
        for cluster in self.clusters:
            common = sizes.keys() & cluster.sizes.keys()
            if cluster.shareable and common and all(sizes[c] == cluster.sizes[c] for c in common):
                cluster.axes.append(axis)
                cluster.sizes.update(sizes)
                cluster.seen |= seen
                return
        self.clusters.append(_Cluster([axis], sizes, seen))

    def sizes(self, values: _Values) -> dict[Axis, int]:
        """The size of each axis in one call's ``values``, where it holds one tensor there."""
        found: dict[Axis, int] = {}
        for path, shapes in values.shapes.items():
            if path in self.ranks and len(shapes) == 1:
                shape = shapes[0][1]
                for position in _positions(self.ranks[path]):
                    if -len(shape) <= position < len(shape):
                        found[(path, position)] = shape[position]
        return found

    def used(self) -> set[str]:
        return {c.name for c in self.clusters if c.name}


def _rank(shapes: list[tuple[int, tuple[int, ...]]]) -> int:
    """The rank, or minus the number of trailing axes all shapes have where it varied."""
    ranks = {len(shape) for _, shape in shapes}
    return ranks.pop() if len(ranks) == 1 else -min(ranks)


def _positions(rank: int) -> range:
    return range(rank) if rank >= 0 else range(rank, 0)


def _own_nodes(node: ast.AST):
    """A function's own nodes: nested functions, classes and lambdas are theirs."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(
            child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
        ):
            yield child
            yield from _own_nodes(child)


def _definitions(tree: ast.AST, prefix: str = "") -> dict[str, ast.AST]:
    """Every function by its ``__qualname__``."""
    found: dict[str, ast.AST] = {}
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            found[prefix + child.name] = child
            found.update(_definitions(child, f"{prefix}{child.name}.<locals>."))
        elif isinstance(child, ast.ClassDef):
            found.update(_definitions(child, f"{prefix}{child.name}."))
        else:
            found.update(_definitions(child, prefix))
    return found


def _shape_of(node: ast.AST) -> str | None:
    """``p`` for ``p.shape`` or ``p.size()``."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
        return node.value.id if _attribute(node, "size") else None  # type: ignore[attr-defined]
    return node.value.id if _attribute(node, "shape") else None  # type: ignore[attr-defined]


def _attribute(node: ast.AST, name: str) -> bool:
    return (
        isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name)
    )


def _constant(node: ast.AST | None, default: int) -> int | None:
    if node is None:
        return default
    value = ast.literal_eval(node) if isinstance(node, ast.Constant | ast.UnaryOp) else None
    return value if isinstance(value, int) else None


def _indexed(node: ast.AST) -> tuple[str, int] | None:
    """``(p, i)`` for ``p.shape[i]``, ``p.size(i)``, ``p.size()[i]`` or ``len(p)``."""
    if isinstance(node, ast.Subscript) and (param := _shape_of(node.value)):
        index = _constant(node.slice, 0) if not isinstance(node.slice, ast.Slice) else None
        return None if index is None else (param, index)
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        if _attribute(node.func, "size") and (index := _constant(node.args[0], 0)) is not None:
            return node.func.value.id, index  # type: ignore[attr-defined]
        if isinstance(node.func, ast.Name) and node.func.id == "len":
            return (node.args[0].id, 0) if isinstance(node.args[0], ast.Name) else None
    return None


Fact = tuple[str, int, str, int | None, str]
"""The code names an axis: (parameter, position, name, the rank it needs or None, how)."""


def _unpacked(target: ast.Tuple, value: ast.AST) -> list[Fact]:
    """``B, T, C = x.size()``, ``*_, H, W = x.shape``, ``B, T = x.shape[:2]``."""
    start, whole = 0, value
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        if value.slice.step is not None:
            return []
        whole, start = value.value, _constant(value.slice.lower, 0)
    param, names = _shape_of(whole), target.elts
    if param is None or start is None:
        return []
    star = [i for i, n in enumerate(names) if isinstance(n, ast.Starred)]
    rank = len(names) if whole is value and not star else None
    how = ast.unparse(value)
    facts = []
    for i, node in enumerate(names):
        position = start + i if not star or i < star[0] else i - len(names)
        if isinstance(node, ast.Name):
            facts.append((param, position, node.id, rank, how))
    return facts


def _pattern(param: str, pattern: str, how: str) -> list[Fact]:
    """An einops pattern's names for ``param``'s axes; ``(h d)`` names no single axis."""
    tokens = re.findall(r"\([^)]*\)|\.\.\.|\S+", pattern)
    after = tokens.index("...") if "..." in tokens else None
    rank = None if after is not None else len(tokens)
    facts = []
    for i, token in enumerate(tokens):
        position = i if after is None or i < after else i - len(tokens)
        if token != "..." and not token.startswith("("):
            facts.append((param, position, token, rank, how))
    return facts


def _einops(call: ast.Call) -> list[Fact]:
    """Names from ``rearrange(x, "b t c -> ...")`` and kin, and from einsum's operands."""
    func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    strings = [
        a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
    ]
    if not strings or func not in _EINOPS | {"einsum"}:
        return []
    if func == "einsum" and call.args[0] is not None and isinstance(call.args[0], ast.Constant):
        lefts = [
            " ".join(s.replace("...", ".")).replace(".", "...")
            for s in strings[0].split("->")[0].split(",")
        ]
        operands = call.args[1:]  # torch's einsum: one letter per axis
    else:
        lefts = strings[0].split("->")[0].split(",")
        operands = call.args[:-1] if func == "einsum" else call.args[:1]
    facts = []
    for operand, left in zip(operands, lefts, strict=False):
        if isinstance(operand, ast.Name):
            facts += _pattern(operand.id, left.strip(), f"{func} pattern")
    return facts


def _facts(node: ast.AST, params: list[str]) -> list[Fact]:
    """What a function's own code says of its parameters' axes, in source order, up to each
    parameter's first reassignment (after it, the name holds another tensor)."""
    stored: dict[str, int] = {}
    found: list[tuple[int, Fact]] = []
    for child in _own_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            stored[child.id] = min(stored.get(child.id, child.lineno), child.lineno)
        target = getattr(child, "target", None) or (getattr(child, "targets", None) or [None])[0]
        value = getattr(child, "value", None)
        if isinstance(child, ast.Assign | ast.AnnAssign) and isinstance(target, ast.Tuple):
            found += [(child.lineno, fact) for fact in _unpacked(target, value)]  # type: ignore[arg-type]
        elif isinstance(child, ast.Assign | ast.AnnAssign) and isinstance(target, ast.Name):
            if value is not None and (indexed := _indexed(value)):
                fact = (*indexed, target.id, None, ast.unparse(value))
                found.append((child.lineno, fact))
        elif isinstance(child, ast.Call):
            found += [(child.lineno, fact) for fact in _einops(child)]
    found.sort(key=lambda item: item[0])
    return [f for line, f in found if f[0] in params and line <= stored.get(f[0], line)]


def _unique(name: str, used: set[str], suffix: str) -> str:
    """``name``, or it with the parameter's name where another axis of the signature has it."""
    if name in used:
        name = f"{name}_{suffix}"
    while name in used:
        name += "_"
    return name


def _label(path: Path) -> str:
    return str(path[0]) + "".join(f"[{part}]" for part in path[1:])


def _base(path: Path) -> str:
    head = "result" if path[0] == "return" else str(path[0]).lstrip("_") or "arg"
    return head + "".join("_item" if part == "*" else str(part) for part in path[1:])


def _name_from_code(function: _Function, facts: list[Fact]) -> None:
    for param, position, name, rank, how in facts:
        have = function.ranks.get((param,))
        if have is None or not _valid(name) or rank is not None and rank != have:
            continue
        if not (-abs(have) <= position < have if have > 0 else have <= position < 0):
            continue
        position = position % have if have > 0 else position
        cluster = function.cluster_of[((param,), position)]
        if cluster.name is None:
            cluster.name = _unique(name, function.used(), param)
            cluster.origin = f"{param}: axis {position} '{cluster.name}' ({how})"


def _tracks(mine: _Cluster, theirs: _Cluster, pairs: list[tuple[dict, dict]]) -> bool:
    """Whether ``mine`` had the size of ``theirs`` in every linked call, not always 1."""
    matched: set[int] = set()
    for my_sizes, their_sizes in pairs:
        a = {my_sizes[axis] for axis in mine.axes if axis in my_sizes}
        b = {their_sizes[axis] for axis in theirs.axes if axis in their_sizes}
        if a and b:
            if len(a) > 1 or a != b:
                return False
            matched |= a
    return bool(matched - {1})


def _name_across(functions: dict[str, _Function]) -> None:
    """An unnamed axis takes the name of a caller's or callee's named axis whose size it had
    in every call that links them; repeated until no name spreads further."""
    links: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for function in functions.values():
        for seen in function.entry["calls"]:
            caller = seen.get("caller") or {}
            other = functions.get(caller.get("function", ""))
            if other is None or other is function:
                continue
            mine, theirs = _Values(), _Values()
            for param in function.params:
                mine.add(seen["args"].get(param), (param,), 0)
            mine.add(seen.get("result"), ("return",), 0)
            for param in other.params:
                theirs.add(caller["args"].get(param), (param,), 0)
            pair = function.sizes(mine), other.sizes(theirs)
            links[function.key][other.key].append(pair)
            links[other.key][function.key].append(pair[::-1])
    changed = True
    while changed:
        changed = False
        for function in functions.values():
            for cluster in function.clusters:
                names: dict[str, str] = {}  # one per neighbour; which one is only a choice of words
                for key, pairs in links[function.key].items() if cluster.name is None else ():
                    found = {
                        c.name
                        for c in functions[key].clusters
                        if c.name and _tracks(cluster, c, pairs)
                    }
                    if len(found) == 1 and (name := found.pop()) not in function.used():
                        names.setdefault(name, functions[key].display)
                if names:
                    name = min(names)
                    path, position = cluster.axes[0]
                    cluster.name, changed = name, True
                    cluster.origin = (
                        f"{_label(path)}: axis {position} '{name}' (as in {names[name]})"
                    )


def _name_the_rest(function: _Function) -> None:
    """``batch`` for a varied leading axis every tensor argument shares, then a readable name
    for every other varied axis; an axis that never varied stays its size."""
    firsts = [
        function.cluster_of.get(((p,), 0)) for p in function.params if function.ranks.get((p,), 0)
    ]
    head = firsts[0] if firsts and all(c is firsts[0] for c in firsts) else None
    if head and head.name is None and len(head.seen) > 1 and "batch" not in function.used():
        head.name = "batch"
    for cluster in function.clusters:
        if cluster.name is None and len(cluster.seen) > 1:
            path, position = cluster.axes[0]
            axis = f"axis{position}" if position >= 0 else f"axis_neg{-position}"
            cluster.name = _unique(f"{_base(path)}_{axis}", function.used(), "named")


def _leaf(function: _Function, path: Path, kinds: set[str]) -> str:
    dtypes = function.values.dtypes[path]
    kind = next(iter(dtypes)) if len(dtypes) == 1 else "Shaped"  # mixed dtypes
    kinds.add(kind)
    rank = function.ranks[path]
    dims = ["..."] if rank < 0 else []
    for position in _positions(rank):
        cluster = function.cluster_of[(path, position)]
        dims.append(cluster.name or str(next(iter(cluster.seen))))
    text = " ".join(dims)
    return f'{kind}[Tensor, "{" " + text if len(dims) == 1 else text}"]'


_ORDER = {"tensor": 0, "tuple": 1, "list": 2, "other": 3, "none": 4}


def _render(function: _Function, path: Path, kinds: set[str]) -> str | None:
    """The annotation of what was seen at ``path``, or None where it cannot be sound."""
    parts: list[str | None] = []
    for kind in sorted(function.values.kinds[path], key=lambda k: _ORDER[k.split(":")[0]]):
        if kind == "tensor":
            parts.append(_leaf(function, path, kinds))
        elif kind == "none":
            parts.append("None")
        elif kind == "list":
            seen = function.values.kinds.get((*path, "*"))
            inner = _render(function, (*path, "*"), kinds) if seen else None
            parts.append(inner and f"list[{inner}]")
        elif kind.startswith("tuple:"):
            items = [_render(function, (*path, i), kinds) for i in range(int(kind[6:]))]
            parts.append(None if None in items else f"tuple[{', '.join(items) or '()'}]")  # type: ignore[arg-type]
        else:  # not a tensor: its type where a builtin; ``object`` inside a container
            name = kind[6:]
            parts.append(name if name in _BUILTINS else "object" if len(path) > 1 else None)
    return None if not parts or None in parts else " | ".join(parts)  # type: ignore[arg-type]


def _holds(function: _Function, path: Path) -> bool:
    return any(leaf[: len(path)] == path for leaf in function.ranks)


def _write(function: _Function, proposal: Proposal) -> None:
    entry, kinds = function.entry, set()
    params = {}
    for param in function.params:
        if _holds(function, (param,)) and (text := _render(function, (param,), kinds)):
            params[param] = text
    calls = entry["calls"]
    ran = any(call.get("complete") and call.get("result") is not None for call in calls)
    result = (
        _render(function, ("return",), kinds) if ran and _holds(function, ("return",)) else None
    )
    variadic = _Values()
    for call in calls:
        for name in function.variadic:
            variadic.add(call["args"].get(name), (name,), 0)
    typed = sum(_holds(function, (p,)) for p in function.params) == len(params)
    complete = (
        ran and typed and not variadic.shapes and (result or not _holds(function, ("return",)))
    )
    if not ran:
        proposal.incomplete.append(function.display)
    if params or result:
        proposal.functions[function.key] = FunctionProposal(params, result, bool(complete))
        proposal.jaxtyping_names.setdefault(entry["file"], set()).update(kinds)
    for cluster in function.clusters:
        if cluster.origin:
            proposal.named_from_code.append(f"{function.display} {cluster.origin}")
    literal = [
        f"{_label(path)} axis {position} = {next(iter(c.seen))}"
        for c in function.clusters
        if c.name is None
        for path, position in c.axes
    ]
    if literal:
        proposal.literal_axes.append(f"{function.display}: {', '.join(literal)} (never varied)")


def propose(record: dict, sources: dict[str, str]) -> Proposal:
    """The annotations ``record``'s calls support, named from ``sources`` where they can be."""
    proposal, trees, functions = Proposal(), {}, {}
    for key, entry in record["functions"].items():
        file = entry["file"]
        if file not in trees:
            trees[file] = _definitions(ast.parse(sources[file])) if file in sources else {}
        node = trees[file].get(entry["qualname"])
        function = _Function(key, entry, node)
        if not function.ranks:
            continue  # never held a tensor
        if entry.get("torchscript"):
            proposal.torchscript.append(function.display)
            continue
        functions[key] = function
        if node is not None:
            _name_from_code(function, _facts(node, function.params))
    _name_across(functions)
    for function in functions.values():
        _name_the_rest(function)
        _write(function, proposal)
    return proposal
