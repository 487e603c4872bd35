"""The edit, with libcst so that all it does not touch stays byte for byte: the recorded
functions' annotations, the (real) imports they need, and with ``--decorate`` one innermost
``@jaxtyped(typechecker=beartype)`` line per annotated function. The user's annotations are
kept, except a bare ``Tensor``; this command's (the record's ``written``) are recomputed, so
annotating again from the same runs changes nothing."""

import difflib
import os
import re
from pathlib import Path
from typing import Any

import libcst as cst

from ...run.errors import UserError

DECORATOR = "jaxtyped(typechecker=beartype)"
BARE = re.compile(r"(None\|)?(torch\.)?Tensor(\|None)?|(typing\.)?Optional\[(torch\.)?Tensor\]")
"""A bare tensor annotation, spaces and quotes removed: replaced, though the user wrote it."""


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _same(text: str) -> str:
    return "".join(text.split()).strip("'\"")


class _Annotate(cst.CSTTransformer):
    """Annotates the functions named by qualified name in ``proposals``, and notes every
    function's qualified name in ``found``, and what it wrote in ``written``."""

    def __init__(self, proposals: dict[str, Any], ours: dict[str, dict], decorate: bool) -> None:
        self.proposals, self.ours, self.decorate = proposals, ours, decorate
        self.scope: list[str] = []
        self.found: set[str] = set()
        self.written: dict[str, dict[str, str]] = {}
        self.annotated = False

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.append(node.name.value)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.scope.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.found.add(".".join([*self.scope, node.name.value]))
        self.scope += [node.name.value, "<locals>"]

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        del self.scope[-2:]
        qualname = ".".join([*self.scope, updated.name.value])
        proposal = self.proposals.get(qualname)
        if proposal is None or not (proposal.params or proposal.result):
            return updated
        ours, written = self.ours.get(qualname, {}), self.written.setdefault(qualname, {})
        self.annotated = True

        def annotate(old: cst.Annotation | None, name: str, text: str) -> cst.Annotation | None:
            now = _same(_code(old.annotation)) if old is not None else ""
            if now and not BARE.fullmatch(now) and now != _same(ours.get(name, "\0")):
                return old  # the user's own
            written[name] = text
            new = cst.parse_expression(text)
            return cst.Annotation(new) if old is None else old.with_changes(annotation=new)

        def param(node: Any) -> Any:
            text = proposal.params.get(node.name.value) if isinstance(node, cst.Param) else None
            if text is None:
                return node
            new = node.with_changes(annotation=annotate(node.annotation, node.name.value, text))
            if node.annotation is None and isinstance(node.equal, cst.AssignEqual):
                space = cst.SimpleWhitespace(" ")
                new = new.with_changes(equal=cst.AssignEqual(space, space))
            return new

        p = updated.params
        params = p.with_changes(
            params=[param(x) for x in p.params],
            posonly_params=[param(x) for x in p.posonly_params],
            kwonly_params=[param(x) for x in p.kwonly_params],
            star_arg=param(p.star_arg),
            star_kwarg=param(p.star_kwarg),
        )
        returns = updated.returns
        if proposal.result:
            returns = annotate(returns, "return", proposal.result)
        decorators = list(updated.decorators)
        if self.decorate and not any("jaxtyped" in _code(d.decorator) for d in decorators):
            decorators.append(cst.Decorator(cst.parse_expression(DECORATOR)))
        return updated.with_changes(params=params, returns=returns, decorators=decorators)


def _bound(module: cst.Module) -> set[str]:
    """The names a module's top level binds by import or assignment."""
    names: set[str] = set()
    for line in module.body:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import | cst.ImportFrom) and not isinstance(
                small.names, cst.ImportStar
            ):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    names.add(_code(bound).split(".")[0])
            elif isinstance(small, cst.Assign):
                names.update(_code(t.target) for t in small.targets)
    return names


def _with_imports(module: cst.Module, needed: dict[str, list[str]]) -> cst.Module:
    """``module`` importing each of ``needed`` (module -> names) that it does not bind yet, on
    new lines after its leading imports (before its first definition, which may use them)."""
    bound, body = _bound(module), list(module.body)
    simple = [isinstance(line, cst.SimpleStatementLine) for line in body] + [False]
    first_def = simple.index(False)
    at = 1 if first_def and _code(body[0]).lstrip()[:1] in "\"'" else 0  # after a docstring
    for index, line in enumerate(body[:first_def]):
        if any(isinstance(s, cst.Import | cst.ImportFrom) for s in line.body):  # type: ignore[attr-defined]
            at = index + 1
    new = [
        cst.parse_statement(f"from {source} import {', '.join(missing)}\n")
        for source, names in sorted(needed.items())
        if (missing := sorted(set(names) - bound))
    ]
    return module.with_changes(body=[*body[:at], *new, *body[at:]])


def plan(
    record: dict, proposal: Any, decorate: bool = False
) -> tuple[dict[str, tuple[str, str]], dict[str, dict]]:
    """The files that change (file -> old and new text) and the new ``written`` of the
    record; refuses a recorded file that is gone or no longer parses, and a recorded function
    no longer found by its qualified name. ``proposal`` None: only these checks."""
    by_file: dict[str, dict[str, Any]] = {}
    for key, function in record["functions"].items():
        found = proposal.functions.get(key) if proposal is not None else None
        if function.get("torchscript"):
            found = None
        by_file.setdefault(function["file"], {})[function["qualname"]] = found
    changes, written = {}, {}
    for file, functions in sorted(by_file.items()):
        try:  # as bytes: line endings stay as they are
            module = cst.parse_module(old := Path(file).read_bytes().decode())
        except OSError:
            raise UserError(f"{file}: recorded, but it no longer exists") from None
        except (cst.ParserSyntaxError, UnicodeDecodeError) as error:
            reason = str(error).strip().splitlines()[0]
            raise UserError(f"{file}: no longer parses ({reason})") from None
        ours = {q: record["written"].get(f"{file}::{q}", {}) for q in functions}
        editor = _Annotate({q: p for q, p in functions.items() if p}, ours, decorate)
        module = module.visit(editor)
        for qualname in sorted(set(functions) - editor.found):
            raise UserError(
                f"{file}: {qualname} is recorded but no longer defined there "
                "(record again into a new --record file)"
            )
        texts = [text for done in editor.written.values() for text in done.values()]
        names = proposal.jaxtyping_names.get(file, ()) if proposal is not None else ()
        needed = {"jaxtyping": [n for n in names if any(re.search(rf"\b{n}\[", t) for t in texts)]}
        if any(re.search(r"(?<!\.)\bTensor\b", t) for t in texts):
            needed["torch"] = ["Tensor"]
        if decorate and editor.annotated:
            needed["jaxtyping"].append("jaxtyped")
            needed["beartype"] = ["beartype"]
        new = _with_imports(module, needed).code
        written.update({f"{file}::{q}": w for q, w in editor.written.items() if w})
        if new != old:
            changes[file] = (old, new)
    return changes, written


def diff(changes: dict[str, tuple[str, str]], cwd: str) -> str:
    """The unified diff of ``changes``, with paths relative to ``cwd`` where they can be."""
    text = []
    for file, (old, new) in sorted(changes.items()):
        name = os.path.relpath(file, cwd)
        name = file if name.startswith("..") else name
        a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
        text += difflib.unified_diff(a, b, f"a/{name}", f"b/{name}")
    return "".join(text)
