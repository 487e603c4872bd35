"""Recording: every call of a function defined in the source files keeps the shape and dtype
of each tensor it was given and returned (inside tuples, lists and NamedTuples too), whether
it ran to its end, and its nearest recorded caller. Distinct calls are kept once, counted,
and accumulate across runs in the record file (its format: docs/annotate.md).

``sys.setprofile`` calls back on every Python call, torch's own included: the decision per
code object is made once and cached, so a call outside the sources costs one dict lookup.
"""

import ast
import dis
import json
import os
import runpy
import sys
import traceback
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import torch

from ...run.errors import UserError
from ..command import _module_exists, _program_frames

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
        ok = record["format"] == FORMAT and record["version"] == VERSION
        ok = ok and isinstance(record["runs"], int) and isinstance(record["written"], dict)
        ok = ok and all(isinstance(f["calls"], list) for f in record["functions"].values())
        ok = ok and all(
            f"{f['file']}::{f['qualname']}" == k for k, f in record["functions"].items()
        )
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


def run(program: list[str], module: bool) -> int | None:
    """Runs ``program`` as Python would (its ``sys.argv``, ``__name__ == "__main__"``, import
    path), and returns its exit status; None when ``-m MODULE`` names no module."""
    target, script = program[0], os.path.abspath(program[0])
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [target if module else script, *program[1:]]
    sys.path[0] = os.getcwd() if module else os.path.dirname(script)
    try:
        if not module:
            runpy.run_path(script, run_name="__main__")
        elif _module_exists(target):  # imports its parents, as python -m does
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            return None
    except SystemExit as exit:  # what Python's own exit makes of sys.exit(code)
        code = 0 if exit.code is None else exit.code
        if not isinstance(code, int):
            print(code, file=sys.stderr)
        return code if isinstance(code, int) else 1
    except BaseException as error:  # the program failed: shown as Python would
        sys.stdout.flush()
        traceback.print_exception(type(error), error, _program_frames(error.__traceback__))
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


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
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype).removeprefix("torch."))
    if value is None:
        return NONE
    if isinstance(value, tuple | list) and not isinstance(value, torch.Size) and depth < 4:
        items = tuple(describe(item, depth + 1) for item in value)
        if hasattr(value, "_fields"):
            return ("namedtuple", type(value).__name__, items)
        return ("tuple" if isinstance(value, tuple) else "list", items)
    return ("other", type(value).__name__)


def as_json(value: tuple | None) -> dict | None:
    if value is None:
        return None
    kind, *rest = value
    if kind == "tensor":
        return {"tensor": list(rest[0]), "dtype": rest[1]}
    if kind in ("tuple", "list"):
        return {kind: [as_json(item) for item in rest[0]]}
    if kind == "namedtuple":
        return {"namedtuple": rest[0], "items": [as_json(item) for item in rest[1]]}
    return {"none": True} if kind == "none" else {"other": rest[0]}


class Recorder:
    """While active (``with Recorder(sources):``), counts the distinct calls of every function
    defined in a file under ``sources``; installed packages and this command are left out."""

    def __init__(self, sources: list[str]) -> None:
        self.roots = [os.path.join(os.path.realpath(path), "") for path in sources]
        self.roots += [os.path.realpath(path) for path in sources]
        self.own = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "")
        self.decided: dict[int, tuple[CodeType, tuple[str, list[str]] | None]] = {}
        self.files: dict[str, tuple[dict[int, tuple[str, list[str]]], set[str]]] = {}
        self.stack: list[tuple[FrameType, str, tuple, tuple | None]] = []
        self.calls: dict[tuple, int] = {}

    def _decide(self, code: CodeType) -> tuple[str, list[str]] | None:
        file = os.path.realpath(code.co_filename)
        if file.startswith(self.own) or not file.startswith(tuple(self.roots)):
            return None
        if "site-packages" in file or "dist-packages" in file or not file.endswith(".py"):
            return None
        if file not in self.files:
            try:
                self.files[file] = functions_in(file)
            except (OSError, SyntaxError, ValueError):
                self.files[file] = ({}, set())
        found = self.files[file][0].get(code.co_firstlineno)
        if found is None or found[0].rpartition(".")[2] != code.co_name or code.co_flags & _LAZY:
            return None
        return f"{file}::{found[0]}", found[1]

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code  # by id, the code kept alive: its hash reads its constants
            try:
                function = self.decided[id(code)][1]
            except KeyError:
                function = self._decide(code)
                self.decided[id(code)] = (code, function)
            if function is not None:
                values = frame.f_locals
                args = tuple((p, describe(values[p])) for p in function[1] if p in values)
                caller = self.stack[-1][1:3] if self.stack else None
                self.stack.append((frame, function[0], args, caller))
        elif event == "return" and self.stack and self.stack[-1][0] is frame:
            _, key, args, caller = self.stack.pop()
            code = frame.f_code.co_code
            done = arg is not None or frame.f_lasti < 0 or code[frame.f_lasti] in _RETURNS
            observed = (key, args, describe(arg) if done else None, done, caller)
            self.calls[observed] = self.calls.get(observed, 0) + 1

    def __enter__(self) -> "Recorder":
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        self.stack.clear()

    def merge_into(self, record: dict) -> None:
        """Adds this run's calls to ``record``, and the functions ``torch.jit.script`` compiles
        in the files it saw (they never run as Python, so they have no calls)."""
        record["runs"] += 1
        functions = record["functions"]

        def entry(key: str) -> dict:
            file, qualname = key.split("::", 1)
            if key not in functions:
                lines = self.files[file][0].values()
                params = next((p for name, p in lines if name == qualname), [])
                functions[key] = {"file": file, "qualname": qualname, "params": params}
                functions[key].update(torchscript=False, calls=[])
            return functions[key]

        for file, (_, scripted) in self.files.items():
            for qualname in scripted:
                entry(f"{file}::{qualname}")["torchscript"] = True
        index = {(k, _without_count(c)): c for k, f in functions.items() for c in f["calls"]}
        for (key, args, result, done, caller), count in self.calls.items():
            call: dict[str, Any] = {"args": {name: as_json(value) for name, value in args}}
            call.update(result=as_json(result), complete=done)
            call["caller"] = caller and {
                "function": caller[0],
                "args": {name: as_json(value) for name, value in caller[1]},
            }
            seen = index.get((key, same := json.dumps(call, sort_keys=True)))
            if seen is None:
                index[key, same] = {**call, "count": count}
                entry(key)["calls"].append(index[key, same])
            else:
                seen["count"] += count


def _without_count(call: dict) -> str:
    return json.dumps({k: v for k, v in call.items() if k != "count"}, sort_keys=True)
