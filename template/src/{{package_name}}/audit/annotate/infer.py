"""From recorded calls, annotations that pass every recorded size and refuse what no run showed.
A varied axis is named by the first rule that applies (docs/annotate.md); a fixed one, its size."""

import ast
import functools
import keyword
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from .names import definitions, facts

Path = tuple  # where a value sits: ("x",); ("return", 1) a tuple's item; ("h", "*") a list's
Axis = tuple[Path, int]  # a negative position counts from the end, where the rank varied
Seen = dict[Path, list[tuple[str, int, tuple[int, ...], str]]]  # (kind, call, shape, dtype)


@dataclass
class FunctionProposal:
    params: dict[str, str]
    result: str | None
    complete: bool


@dataclass
class Proposal:
    functions: dict[str, FunctionProposal] = field(default_factory=dict)
    named_from_code: list[str] = field(default_factory=list)
    literal_axes: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    torchscript: list[str] = field(default_factory=list)


_PLACEHOLDER = re.compile(r"([a-z]|dim|axis)\d+", re.IGNORECASE)
_BUILTINS = {"int", "float", "bool", "str", "bytes", "complex", "dict", "None"}
_KINDS = {"bool": "Bool", "uint": "UInt", "int": "Int", "complex": "Complex", "float": "Float"}
_ORDER = {"tensor": 0, "tuple": 1, "list": 2, "other": 3, "none": 4}


def _kind(dtype: str) -> str:
    """jaxtyping's dtype class, never a precision (``Int`` is signed only: uint8 is ``UInt``)."""
    name = dtype.replace("bfloat", "float")
    return next((kind for prefix, kind in _KINDS.items() if name.startswith(prefix)), "Shaped")


def _walk(value: dict | None, path: Path, call: int, seen: Seen) -> None:
    """Adds a recorded value to ``seen``; a NamedTuple is checked as the tuple it is."""
    if value is None:  # the result of a call that raised
        return
    items = value.get("list", value.get("tuple", value.get("items")))
    kind = next((k for k in ("tensor", "list", "none") if k in value), "")
    kind = kind or (f"tuple:{len(items)}" if items is not None else f"other:{value.get('other')}")
    seen[path].append((kind, call, tuple(value.get("tensor", ())), _kind(value.get("dtype", ""))))
    for index, item in enumerate(items or ()):
        _walk(item, (*path, "*" if "list" in value else index), call, seen)


@dataclass(eq=False)
class _Cluster:
    """Axes whose sizes agreed in every call where they were seen together."""

    axes: list[Axis]
    sizes: dict[int, int] | None  # per call; None where list items differed within a call
    seen: set[int]
    name: str | None = None
    origin: str = ""  # where the name comes from, for the summary


class _Function:
    def __init__(self, entry: dict, node: ast.AST | None) -> None:
        self.entry, self.display = entry, f"{os.path.basename(entry['file'])}::{entry['qualname']}"
        a = getattr(node, "args", None)
        self.variadic = {s.arg for s in (a.vararg, a.kwarg) if s} if a else set()  # left alone
        self.params = [p for p in entry["params"] if p not in self.variadic]
        self.seen = self.walk(entry["calls"])
        self.ranks: dict[Path, int] = {}  # ~ the common trailing axes where the rank varied
        self.positions: dict[Path, range] = {}  # of the axes: from the end where it varied
        order = [*self.params, "return"]
        for path in sorted(self.seen, key=lambda p: (order.index(p[0]), tuple(map(str, p)))):
            ranks = {len(shape) for kind, _, shape, _ in self.seen[path] if kind == "tensor"}
            if ranks:
                rank = self.ranks[path] = ranks.pop() if len(ranks) == 1 else ~min(ranks)
                self.positions[path] = range(rank) if rank >= 0 else range(rank + 1, 0)
        self.clusters: list[_Cluster] = []
        for axis, by_call in self.axes(self.seen).items():
            self._place(axis, by_call)
        self.cluster_of = {axis: c for c in self.clusters for axis in c.axes}

    def walk(self, calls: list[dict]) -> Seen:
        seen: Seen = defaultdict(list)
        for call, observed in enumerate(calls):
            for param in self.params:
                _walk(observed["args"].get(param), (param,), call, seen)
            _walk(observed.get("result"), ("return",), call, seen)
        return seen

    def axes(self, seen: Seen) -> dict[Axis, dict[int, set[int]]]:
        """Each axis's sizes, call by call."""
        found: dict[Axis, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
        for path, rank in self.ranks.items():
            for kind, call, shape, _ in seen.get(path, ()):
                fits = kind == "tensor" and (len(shape) == rank or ~len(shape) <= rank < 0)
                for position in self.positions[path] if fits else ():
                    found[path, position][call].add(shape[position])
        return found

    def _place(self, axis: Axis, by_call: dict[int, set[int]]) -> None:
        seen, sizes = set().union(*by_call.values()), {c: min(s) for c, s in by_call.items()}
        varied = any(len(s) > 1 for s in by_call.values())  # list items differed in a call
        for cluster in () if varied else self.clusters:
            theirs = cluster.sizes or {}  # that cluster's own dict, where it has sizes
            if (both := sizes.keys() & theirs.keys()) and all(sizes[c] == theirs[c] for c in both):
                cluster.axes.append(axis)
                theirs.update(sizes)
                cluster.seen |= seen
                return
        self.clusters.append(_Cluster([axis], None if varied else sizes, seen))

    def name(self, cluster: _Cluster, name: str, origin: str = "") -> None:
        """Names ``cluster``; a name another axis of the signature has takes a suffix."""
        used, (path, position) = {c.name for c in self.clusters}, cluster.axes[0]
        name = f"{name}_{_base(path)}" if name in used else name
        while name in used:
            name += "_"
        cluster.name = name
        cluster.origin = origin and f"{_label(path)}: axis {position} '{name}' ({origin})"


def _label(path: Path) -> str:
    return str(path[0]) + "".join(f"[{part}]" for part in path[1:])


def _base(path: Path) -> str:
    head = "result" if path[0] == "return" else str(path[0]).lstrip("_") or "arg"
    return head + "".join("_item" if part == "*" else str(part) for part in path[1:])


def _name_from_code(function: _Function, node: ast.AST | None) -> None:
    for param, position, name, rank, how in facts(node, function.params):
        have = function.ranks.get((param,), 0)  # negative where the rank varied: from the end
        position += have if have > 0 and position < 0 else 0
        cluster = function.cluster_of.get(((param,), position)) if rank in (None, have) else None
        valid = name.isidentifier() and not keyword.iskeyword(name) and name[0] != "_"
        if cluster and cluster.name is None and valid and not _PLACEHOLDER.fullmatch(name):
            function.name(cluster, name, how)


def _name_from_calls(function: _Function) -> None:
    """An axis always equal to one integer argument takes its name; a Conv input's, its layout."""
    calls = function.entry["calls"]
    ints = [call.get("ints", {}) for call in calls]
    for cluster in [c for c in function.clusters if c.name is None and len(c.seen) > 1]:
        sizes = (cluster.sizes or {}).items()
        same = [p for p in function.params if all(ints[c].get(p) == s for c, s in sizes)]
        if sizes and len(same) == 1 and not same[0].startswith("_"):
            function.name(cluster, same[0], f"= {same[0]}, an argument")
    for dims in {dims for call in calls for dims in call.get("conv", {}).values()}:
        names = ["channel", *("length", "height width", "depth height width")[dims - 1].split()]
        for path in [p for p, rank in function.ranks.items() if rank == dims + 2 and len(p) == 1]:
            for position, name in enumerate(names, 1):
                cluster = function.cluster_of[path, position]
                if cluster.name is None and len(cluster.seen) > 1:
                    function.name(cluster, name, f"a Conv{dims}d's layout")


def _name_across(functions: dict[str, _Function]) -> None:
    """An unnamed varied axis takes the one name a caller's or callee's axis of its sizes has."""
    links: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for key, function in functions.items():
        for observed in function.entry["calls"]:
            caller = observed.get("caller") or {}
            other = functions.get(caller.get("function", ""))
            if other is None or other is function:
                continue
            sides = ((function, observed), (other, caller))  # a caller has no result
            pair = [{a: s[0] for a, s in f.axes(f.walk([c])).items()} for f, c in sides]
            links[key][caller["function"]].append(pair)
            links[caller["function"]][key].append(pair[::-1])

    @functools.cache  # clusters never change members: only their names spread
    def tracks(mine: _Cluster, theirs: _Cluster, key: str, other: str) -> bool:
        matched: set[int] = set()
        for my_sizes, their_sizes in links[key][other]:
            a = set().union(*(my_sizes.get(axis, ()) for axis in mine.axes))
            b = set().union(*(their_sizes.get(axis, ()) for axis in theirs.axes))
            if a and b and (len(a) > 1 or a != b):
                return False
            matched |= a & b
        return bool(matched - {1})

    changed = True
    while changed:
        changed = False
        for key, function in functions.items():
            for cluster in [c for c in function.clusters if c.name is None and len(c.seen) > 1]:
                offered, taken = {}, {c.name for c in function.clusters}
                for other in links[key]:
                    clusters = functions[other].clusters
                    names = {c.name for c in clusters if c.name and tracks(cluster, c, key, other)}
                    if len(names) == 1 and (name := names.pop()) not in taken:
                        offered.setdefault(name, functions[other].display)
                if offered:
                    function.name(cluster, name := min(offered), f"as in {offered[name]}")
                    changed = True


def _render(function: _Function, path: Path) -> str | None:
    """The annotation of what was seen at ``path``, or None where none would be sound."""
    parts: list[str | None] = []
    kinds = {kind for kind, *_ in function.seen.get(path, ())}
    for kind in sorted(kinds, key=lambda k: _ORDER[k.split(":")[0]]):
        if kind == "tensor":
            dtypes = {dtype for k, _, _, dtype in function.seen[path] if k == "tensor"}
            dtype = dtypes.pop() if len(dtypes) == 1 else "Shaped"  # mixed dtypes
            clusters = [function.cluster_of[path, p] for p in function.positions[path]]
            dims = [c.name or str(next(iter(c.seen))) for c in clusters]
            # beartype checks one list item at random: sizes differing between items bind no name
            varied = any(c.sizes is None for c in clusters)
            text = "..." if varied else " ".join(["..."] * (function.ranks[path] < 0) + dims)
            parts.append(f'{dtype}[Tensor, "{" " + text if text and " " not in text else text}"]')
        elif kind == "list":
            inner = _render(function, (*path, "*"))
            parts.append(inner and f"list[{inner}]")
        elif kind.startswith("tuple:"):
            items = [_render(function, (*path, i)) for i in range(int(kind[6:]))]
            parts.append(None if None in items else f"tuple[{', '.join(map(str, items)) or '()'}]")
        else:  # None, or not a tensor: its builtin type; ``object`` inside a container
            name = "None" if kind == "none" else kind[6:]
            parts.append(name if name in _BUILTINS else "object" if len(path) > 1 else None)
    return None if not parts or None in parts else " | ".join(parts)  # type: ignore[arg-type]


def _propose(key: str, function: _Function, proposal: Proposal) -> None:
    """The fallback names (``batch``, ``<param>_axis<i>``), then the annotations."""
    ranks = function.ranks
    tensors = [(p,) for p in function.params if ranks.get((p,))]
    tensors = tensors or [path for path in ranks if path[0] == "return" and ranks[path]]
    firsts = {function.cluster_of.get((path, 0)) for path in tensors}
    if len(firsts) == 1 and (head := firsts.pop()) and head.name is None and len(head.seen) > 1:
        function.name(head, "batch")
    for cluster in function.clusters:
        if cluster.name is None and len(cluster.seen) > 1 and cluster.sizes is not None:
            path, position = cluster.axes[0]
            axis = f"axis{position}" if position >= 0 else f"axis_neg{-position}"
            function.name(cluster, f"{_base(path)}_{axis}")
    holds = {path[0] for path in ranks}
    params = {p: _render(function, (p,)) for p in function.params if p in holds}
    display, calls = function.display, function.entry["calls"]
    ran = any(call["complete"] for call in calls)  # else no result was seen
    result = _render(function, ("return",)) if "return" in holds else None
    stars = any("'tensor'" in repr(c["args"].get(s)) for c in calls for s in function.variadic)
    full = ran and None not in params.values() and not stars and (result or "return" not in holds)
    params = {p: text for p, text in params.items() if text}
    proposal.incomplete += [display] * (not ran)
    if params or result:
        proposal.functions[key] = FunctionProposal(params, result, bool(full))
    proposal.named_from_code += [f"{display} {c.origin}" for c in function.clusters if c.origin]
    fixed = [c for c in function.clusters if c.name is None and c.sizes is not None]
    literal = [f"{_label(p)} axis {i} = {next(iter(c.seen))}" for c in fixed for p, i in c.axes]
    proposal.literal_axes += [f"{display}: {', '.join(literal)} (never varied)"] * bool(literal)


def propose(record: dict, sources: dict[str, str]) -> Proposal:
    """The annotations ``record``'s calls support, named from ``sources`` where they can be."""
    proposal, functions = Proposal(), {}
    trees = {file: definitions(ast.parse(text)) for file, text in sources.items()}
    for key, entry in record["functions"].items():
        node = trees.get(entry["file"], {}).get(entry["qualname"])
        function = _Function(entry, node)
        if entry.get("torchscript"):  # it never runs as Python: no calls
            proposal.torchscript.append(function.display)
        elif function.ranks:  # it held a tensor
            functions[key] = function
            _name_from_code(function, node)
            _name_from_calls(function)
    _name_across(functions)
    for key, function in functions.items():
        _propose(key, function, proposal)
    return proposal
