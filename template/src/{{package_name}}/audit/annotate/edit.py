"""The edit, with libcst so that all else stays byte for byte. The user's annotations are kept
but a bare ``Tensor``; this command's own (``written``) are recomputed (docs/annotate.md)."""

import re
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, ImportItem
from libcst.metadata import QualifiedNameProvider

from ...run.errors import UserError
from .infer import Proposal

JAXTYPING = {"Float", "Int", "UInt", "Bool", "Complex", "Shaped"}  # what infer writes
DECORATOR = cst.Decorator(cst.parse_expression("jaxtyped(typechecker=beartype)"))
BARE = re.compile(r"(None\|)?(torch\.)?Tensor(\|None)?|(typing\.)?Optional\[(torch\.)?Tensor\]")


def _same(node: cst.CSTNode | str) -> str:
    text = node if isinstance(node, str) else cst.Module([]).code_for_node(node)
    return "".join(text.split()).strip("'\"")


class _Annotate(cst.CSTTransformer):
    """Annotates the functions ``proposals`` name; ``found``: all it met, ``written``: its text."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, file: str, proposals: dict, ours: dict, decorate: bool) -> None:
        super().__init__()
        self.file, self.proposals, self.ours, self.decorate = file, proposals, ours, decorate
        self.found, self.inside, self.written, self.decorated = set(), [], {}, False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False  # its parameters are not the function's

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        (name,) = self.get_metadata(QualifiedNameProvider, node, ())
        self.found.add(name.name)
        self.inside.append(f"{self.file}::{name.name}")  # the key, innermost last

    def _hint(self, old: cst.Annotation | None, name: str) -> cst.Annotation | None:
        proposal = self.proposals.get(key := self.inside[-1])
        text = proposal and (proposal.result if name == "return" else proposal.params.get(name))
        now, ours = _same(old.annotation) if old else "", self.ours.get(key, {})
        if not text or (now and now != _same(ours.get(name, "\0")) and not BARE.fullmatch(now)):
            return old  # nothing to write, or the user's own
        self.written.setdefault(key, {})[name] = text
        new = cst.parse_expression(text)
        return old.with_changes(annotation=new) if old else cst.Annotation(new)

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        hint = self._hint(updated.annotation, updated.name.value)
        if hint is updated.annotation:
            return updated
        return updated.with_changes(annotation=hint, equal=cst.MaybeSentinel.DEFAULT)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        returns, decorators = self._hint(updated.returns, "return"), updated.decorators
        known = " ".join(_same(decorator.decorator) for decorator in decorators)
        if self.inside.pop() in self.proposals and self.decorate and "jaxtyped" not in known:
            decorators, self.decorated = [*decorators, DECORATOR], True
        return updated.with_changes(returns=returns, decorators=decorators)


def plan(record: dict, proposal: Proposal, decorate: bool = False) -> tuple[dict, dict]:
    """The changes (file -> old and new text) and the new ``written``; refuses a stale record."""
    changes, written, functions = {}, {}, record["functions"].values()
    for file in sorted({function["file"] for function in functions}):
        try:  # as bytes: line endings stay as they are
            module = cst.parse_module(old := Path(file).read_bytes().decode())
        except (OSError, cst.ParserSyntaxError, UnicodeDecodeError) as error:
            reason = str(error).strip().splitlines()[0]
            raise UserError(f"{file}: recorded, but no longer parses ({reason})") from None
        editor = _Annotate(file, proposal.functions, record["written"], decorate)
        module = cst.MetadataWrapper(module, unsafe_skip_copy=True).visit(editor)
        recorded = {function["qualname"] for function in functions if function["file"] == file}
        for gone in sorted(recorded - editor.found):
            again = "record again into a new --record file"
            raise UserError(f"{file}: {gone} is recorded but no longer defined there ({again})")
        texts = " ".join(text for done in editor.written.values() for text in done.values())
        used = set(re.findall(r"(?<![.\w])(?:\w+(?=\[)|Tensor\b)", texts))
        needed = [ImportItem("jaxtyping", name) for name in sorted(used & JAXTYPING)]
        needed += [ImportItem("torch", "Tensor")] * ("Tensor" in used)
        if editor.decorated:
            needed += [ImportItem("jaxtyping", "jaxtyped"), ImportItem("beartype", "beartype")]
        new = AddImportsVisitor(CodemodContext(), needed).transform_module(module).code
        written.update(editor.written)
        if new != old:
            changes[file] = (old, new)
    return changes, written
