"""Recording: every call of a function defined in the source files keeps the shape and dtype
of each tensor it was given and returned (in tuples, lists and NamedTuples too), whether it
ran to its end, and its nearest recorded caller; distinct calls are counted and accumulate
across runs in the record file (docs/annotate.md). ``sys.settrace`` calls back on Python
calls only (not on torch's C calls, as ``sys.setprofile`` would): one lookup by file name
leaves a call outside the sources, which is then not traced further."""

import ast
import dis
import json
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from ...run.errors import UserError

FORMAT, VERSION = "annotate-record", 1
NONE: tuple = ("none",)
_RETURNS = {dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap}
_LAZY = 0x20 | 0x80 | 0x200  # generators and coroutines: a yield is not a return


def new_record() -> dict:
    return {"format": FORMAT, "version": VERSION, "runs": 0, "functions": {}, "written": {}}


def load(path: Path) -> dict:
    """The record at ``path`` (a new one where there is none); a file that is not one is
    refused, and left as it was."""
    if not path.exists():
        return new_record()
    try:
        record = json.loads(path.read_text())
        functions = record["functions"].items()
        ok = (record["format"], record["version"]) == (FORMAT, VERSION) and all(
            f"{f['file']}::{f['qualname']}" == key and isinstance(f["calls"], list)
            for key, f in functions
        )
        ok = ok and isinstance(record["runs"], int) and isinstance(record["written"], dict)
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise UserError(f"--record {path}: not an annotate record, or corrupt (left as it is)")
    return record


def save(record: dict, path: Path) -> None:
    """Written whole and then renamed, so that a run stopped while saving keeps the old one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def functions_in(file: str) -> tuple[dict[int, tuple[str, list[str]]], set[str]]:
    """The functions of a source file by the line Python's code object starts at (the first
    decorator's): their qualified name and parameters; and the names of those compiled by
    ``torch.jit.script`` (as a decorator, or ``torch.jit.script(name)``)."""
    tree = ast.parse(Path(file).read_bytes(), file)
    found: dict[int, tuple[str, list[str]]] = {}
    scripted = {
        ast.unparse(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("jit.script")
        and node.args
    }

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = prefix + child.name
                a = child.args
                star = [p for p in (a.vararg, a.kwarg) if p]
                params = [p.arg for p in (*a.posonlyargs, *a.args, *star, *a.kwonlyargs)]
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                found[first] = (qualname, params)
                marks = [ast.unparse(d) for d in child.decorator_list]
                if any(m.endswith("jit.script") or m == "script" for m in marks):
                    scripted.add(qualname)
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found, scripted


def describe(value: Any, depth: int = 0) -> tuple:
    """A value as the record keeps it, hashable: a tensor's sizes and dtype, None, the items
    of a tuple, list or NamedTuple, or the name of any other type."""
    if isinstance(value, torch.Tensor) and not value.is_nested:
        return ("tensor", value.shape, value.dtype)  # made readable when saved
    if value is None:
        return NONE
    if isinstance(value, tuple | list) and not isinstance(value, torch.Size) and depth < 4:
        items = tuple(describe(item, depth + 1) for item in value[:32])
        if hasattr(value, "_fields"):
            return ("namedtuple", type(value).__name__, items)
        return ("tuple" if isinstance(value, tuple) else "list", items)
    return ("other", type(value).__name__)


def as_json(value: tuple | None) -> dict | None:
    if value is None:
        return None
    kind, *rest = value
    if kind == "tensor":
        return {"tensor": list(rest[0]), "dtype": str(rest[1]).removeprefix("torch.")}
    if kind in ("tuple", "list"):
        return {kind: [as_json(item) for item in rest[0]]}
    if kind == "namedtuple":
        return {"namedtuple": rest[0], "items": [as_json(item) for item in rest[1]]}
    return {"none": True} if kind == "none" else {"other": rest[0]}


class Recorder:
    """While active, counts the distinct calls of every function defined in a file under
    ``sources``; installed packages and this command are left out."""

    def __init__(self, sources: list[str]) -> None:
        self.roots = tuple(os.path.realpath(path) for path in sources)
        self.own = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
        self.files: dict[str, tuple[dict[int, tuple[str, list[str]]], set[str]]] = {}
        self.calls: dict[tuple, int] = {}

    def _functions(self, name: str) -> dict[int, tuple] | None:
        """The recorded functions of the file a code object names, by their first line."""
        file = os.path.realpath(name)
        if not any(file == root or file.startswith(root + os.sep) for root in self.roots):
            return None
        if file.startswith(self.own) or "-packages" in file or not file.endswith(".py"):
            return None  # this command, site-packages and dist-packages
        try:
            self.files[file] = functions_in(file)
        except (OSError, SyntaxError, ValueError):
            return None
        found = self.files[file][0].items()
        return {n: ((f"{file}::{q}", tuple(p)), p, q.rpartition(".")[2]) for n, (q, p) in found}

    def __enter__(self) -> "Recorder":
        calls, functions, by_name = self.calls, self._functions, {}
        stack: list[tuple[FrameType, tuple, tuple, Any]] = []

        def call(frame: FrameType, event: str, arg: Any) -> Any:  # only calls come here
            code = frame.f_code  # a file name is a string: its hash is kept
            lines: Any = by_name.get(code.co_filename, by_name)
            if lines is by_name:
                lines = by_name[code.co_filename] = functions(code.co_filename)
            found = lines and lines.get(code.co_firstlineno)
            if not found or found[2] != code.co_name or code.co_flags & _LAZY:
                return None  # nothing more from this call
            values = frame.f_locals  # every parameter, unless the file changed since
            args = tuple([describe(values.get(p, ...)) for p in found[1]])
            stack.append((frame, found[0], args, stack[-1][1:3] if stack else None))
            frame.f_trace_lines = False
            return end

        def end(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "return" and stack and stack[-1][0] is frame:
                _, key, args, caller = stack.pop()
                lasti = frame.f_lasti  # a return instruction, or where it raised
                done = arg is not None or lasti < 0 or frame.f_code.co_code[lasti] in _RETURNS
                observed = (key, args, describe(arg) if done else None, done, caller)
                calls[observed] = calls.get(observed, 0) + 1
            return end

        self.previous = sys.gettrace()
        sys.settrace(call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self.previous)

    def merge_into(self, record: dict) -> None:
        """Adds this run's calls to ``record``, and the functions ``torch.jit.script`` compiles
        in the files it saw (they never run as Python, so they have no calls)."""
        record["runs"] += 1
        functions = record["functions"]

        def entry(key: str) -> dict:  # its parameters as this run saw them
            file, qualname = key.split("::", 1)
            lines = self.files[file][0].values()
            params = next((p for name, p in lines if name == qualname), [])
            new = {"file": file, "qualname": qualname, "torchscript": False, "calls": []}
            functions[key] = {**new, **functions.get(key, {}), "params": params}
            return functions[key]

        for file, (_, scripted) in self.files.items():
            for qualname in scripted:
                entry(f"{file}::{qualname}")["torchscript"] = True
        index = {(k, _without_count(c)): c for k, f in functions.items() for c in f["calls"]}
        for ((key, params), args, result, done, caller), count in self.calls.items():
            call: dict[str, Any] = {"args": dict(zip(params, map(as_json, args), strict=True))}
            call.update(result=as_json(result), complete=done)
            call["caller"] = caller and {
                "function": caller[0][0],
                "args": dict(zip(caller[0][1], map(as_json, caller[1]), strict=True)),
            }
            seen = index.get((key, same := json.dumps(call, sort_keys=True)))
            if seen is None:
                index[key, same] = {**call, "count": count}
                entry(key)["calls"].append(index[key, same])
            else:
                seen["count"] += count


def _without_count(call: dict) -> str:
    return json.dumps({k: v for k, v in call.items() if k != "count"}, sort_keys=True)
