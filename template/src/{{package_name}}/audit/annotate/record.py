"""Per call of a function of the sources: its tensors' shapes and dtypes, whether it returned, and
what can name an axis (docs/annotate.md). ``sys.settrace`` sees Python calls only."""

import ast
import contextlib
import dis
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch import nn

from ...run.errors import UserError
from .names import definitions

FORMAT, VERSION = "annotate-record", 1
_RETURNS = {dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap}
_LAZY = 0x20 | 0x80 | 0x200  # generators and coroutines: a yield is not a return
_CONVS = [getattr(nn, f"Conv{kind}{dims}d") for kind in ("", "Transpose") for dims in (1, 2, 3)]
_DIMS = {conv.forward.__code__: int(conv.__name__[-2]) for conv in _CONVS}  # Conv2d: 2


def new_record() -> dict:
    return {"format": FORMAT, "version": VERSION, "runs": 0, "functions": {}, "written": {}}


def load(path: Path) -> dict:
    """The record at ``path``, or a new one; refuses a file that is not one, leaving it be."""
    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
        record = json.loads(path.read_bytes()) if path.exists() else new_record()
        ok = (record["format"], record["version"]) == (FORMAT, VERSION)
        ok = ok and isinstance(record["runs"], int) and isinstance(record["written"], dict)
        for key, f in record["functions"].items():
            ok = ok and key == f"{f['file']}::{f['qualname']}" and isinstance(f["calls"], list)
        if ok:
            return record
    raise UserError(f"--record {path}: not an annotate record, or corrupt (left as it is)")


def save(record: dict, path: Path) -> None:
    """Written whole, then renamed: a run stopped while saving keeps the old record."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def functions_in(file: str) -> dict[int, tuple[str, str, list[str], bool]]:
    """A file's functions by the first line of their code: key, name, parameters, TorchScript."""
    tree = ast.parse(Path(file).read_bytes(), file)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args]
    scripted = {ast.unparse(c.args[0]) for c in calls if ast.unparse(c.func).endswith("jit.script")}
    found = {}
    for qualname, node in definitions(tree).items():
        a, marks = node.args, [ast.unparse(d) for d in node.decorator_list]
        every = (*a.posonlyargs, *a.args, a.vararg, a.kwarg, *a.kwonlyargs)
        script = qualname in scripted or any(m.endswith("script") for m in marks)
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        found[first] = (f"{file}::{qualname}", node.name, [p.arg for p in every if p], script)
    return found


def describe(value: Any, depth: int = 0) -> dict:
    """A value as the record keeps it; any type but a tensor, None, or a sequence: its name."""
    if isinstance(value, torch.Tensor) and not value.is_nested:
        return {"tensor": list(value.shape), "dtype": str(value.dtype)[6:]}  # after "torch."
    if value is None:
        return {"none": True}
    if isinstance(value, tuple | list) and not isinstance(value, torch.Size) and depth < 4:
        items = [describe(item, depth + 1) for item in value[:32]]
        if hasattr(value, "_fields"):
            return {"namedtuple": type(value).__name__, "items": items}
        return {"tuple" if isinstance(value, tuple) else "list": items}
    return {"other": type(value).__name__}


@contextlib.contextmanager
def recording(sources: list[str], calls: dict[tuple[str, str], int], files: dict) -> Iterator[None]:
    """Counts in ``calls`` each distinct call of a function under ``sources``, not installed."""
    roots, by_name, stack = [Path(path).resolve() for path in sources], {}, []

    def call(frame: FrameType, event: str, arg: Any) -> Any:  # only calls come here
        code = frame.f_code  # a file name is a string: its hash is kept
        if (dims := _DIMS.get(code)) is not None:  # which recorded parameters it takes
            for _, observed, tensors in stack:
                fed = [p for p, value in tensors.items() if value is frame.f_locals.get("input")]
                observed.setdefault("conv", {}).update(dict.fromkeys(fed, dims))
            return None
        lines: Any = by_name.get(code.co_filename, by_name)
        if lines is by_name:
            file = os.path.realpath(code.co_filename)  # site- or dist-packages: installed
            ours = file.endswith(".py") and "-packages" not in file
            if ours and any(Path(file).is_relative_to(root) for root in roots):
                with contextlib.suppress(OSError, SyntaxError, ValueError):
                    files[file] = functions_in(file)
            lines = by_name[code.co_filename] = files.get(file)
        found = lines and lines.get(code.co_firstlineno)
        if not found or found[1] != code.co_name or code.co_flags & _LAZY:
            return None  # nothing more from this call
        values = frame.f_locals  # every parameter, unless the file changed since
        args = {p: describe(values.get(p, ...)) for p in found[2]}
        caller = {"function": stack[-1][0], "args": stack[-1][1]["args"]} if stack else None
        tensors = {p: v for p in found[2] if isinstance(v := values.get(p), torch.Tensor)}
        ints = {p: v for p in found[2] if type(v := values.get(p)) is int}
        observed = {"args": args, "caller": caller, "count": 0, "ints": ints}
        stack.append((found[0], observed, tensors))
        frame.f_trace_lines = False
        return end

    def end(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":  # after the calls it made, in order
            key, observed, tensors = stack.pop()
            lasti = frame.f_lasti  # a return instruction, or where it raised
            done = arg is not None or lasti < 0 or frame.f_code.co_code[lasti] in _RETURNS
            observed.update(result=describe(arg) if done else None, complete=done)
            out = arg if isinstance(arg, tuple | list) else [arg]  # a step count is no size
            shapes = [t.shape for t in [*tensors.values(), *out] if isinstance(t, torch.Tensor)]
            ints = {p: v for p, v in observed.pop("ints").items() if any(v in s for s in shapes)}
            observed.update({"ints": ints} if ints else {})
            text = json.dumps(observed, sort_keys=True)
            calls[key, text] = calls.get((key, text), 0) + 1
        return end

    previous = sys.gettrace()
    sys.settrace(call)
    try:
        yield
    finally:
        sys.settrace(previous)


def merge(record: dict, calls: dict[tuple[str, str], int], files: dict) -> None:
    """Adds a run's calls to ``record``, with the TorchScript functions of the files it saw."""
    record["runs"] += 1
    functions, counts = record["functions"], Counter[tuple[str, str]]()
    for key, function in functions.items():
        for call in function["calls"]:
            counts[key, json.dumps({**call, "count": 0}, sort_keys=True)] += call["count"]
        function["calls"] = []
    counts.update(calls)
    called = {key for key, _ in counts}
    for file, found in files.items():
        for key, _, params, script in found.values():
            if script or key in called or key in functions:  # as this run saw them
                new = {"file": file, "qualname": key.split("::")[-1], "calls": []}
                functions[key] = functions.get(key, new) | {"params": params, "torchscript": script}
    for (key, text), count in counts.items():  # in the order first seen
        functions[key]["calls"].append({**json.loads(text), "count": count})
