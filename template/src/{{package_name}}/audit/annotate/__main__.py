"""Record the shapes the sources' functions see while a program runs as Python would, then
annotate them from all recorded runs (with no program: from the record). docs/annotate.md."""

import argparse
import difflib
import os
import sys
from pathlib import Path

from ...run.errors import UserError, user_errors
from ..command import _Parser, as_python_would, run_program
from . import edit, record
from .infer import Proposal, propose


@user_errors()
def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=f"python -m {__package__}", description=__doc__, allow_abbrev=False)
    add = parser.add_argument
    add("--record", type=Path, default=Path("annotate.json"), metavar="FILE", help="the record")
    add("--source", type=Path, action="append", default=[], metavar="PATH", help="recorded")
    add("--write", action="store_true", help="edit the sources rather than write annotate.diff")
    add("--decorate", action="store_true", help="and add @jaxtyped(typechecker=beartype)")
    add("-m", dest="module", action="store_true", help="run MODULE as python -m does")
    add("program", nargs=argparse.REMAINDER, metavar="SCRIPT | MODULE")
    options = parser.parse_args(argv)
    program = options.program[1:] if options.program[:1] == ["--"] else options.program
    if options.module and not program:
        parser.error("-m needs a MODULE to run")
    path, cwd = options.record.absolute(), os.getcwd()
    if missing := [source for source in options.source if not source.exists()]:
        raise UserError(f"--source {missing[0]}: no such file or folder")
    if program and not options.module and not os.path.isfile(program[0]):
        raise UserError(f"no such script: {program[0]}")
    if not path.parent.is_dir():
        raise UserError(f"--record {options.record}: no folder {path.parent}")
    kept = record.load(path)
    edit.plan(kept, Proposal())  # the record still fits the sources, before anything runs
    if program:
        default = cwd if options.module else os.path.dirname(os.path.abspath(program[0]))
        sources, calls, files = [str(s) for s in options.source] or [default], {}, {}
        with as_python_would(program, options.module):
            status = run_program(program, options.module, record.recording(sources, calls, files))
        if status is None:
            raise UserError(f"no module named {program[0]!r}")
        record.merge(kept, calls, files)
        if status != 0:
            record.save(kept, path)
            print(f"annotate: status {status}: its calls kept, no source changed", file=sys.stderr)
            return status
    files = {function["file"] for function in kept["functions"].values()}
    proposal = propose(kept, {file: Path(file).read_text() for file in files})
    changes, written = edit.plan(kept, proposal, options.decorate)
    if options.write:
        for file, (_, new) in changes.items():
            Path(file).write_bytes(new.encode())
        kept["written"] = written
    else:
        diff = []
        for file, (old, new) in sorted(changes.items()):
            name = file if (relative := os.path.relpath(file, cwd)).startswith("..") else relative
            a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
            diff += difflib.unified_diff(a, b, f"a/{name}", f"b/{name}")
        Path(cwd, "annotate.diff").write_text("".join(diff))
    record.save(kept, path)
    annotated = sorted(proposal.functions)  # those with an annotation to write
    sections = {
        f"{len(annotated)} functions annotated": [os.path.relpath(k, cwd) for k in annotated],
        "axes named from the code": proposal.named_from_code,
        "axes left literal (record a run in which they vary)": proposal.literal_axes,
        "held tensors but never ran in full": proposal.incomplete,
        "left alone: compiled by torch.jit.script": proposal.torchscript,
    }
    lines = [f"annotate: {kept['runs']} runs recorded in {options.record}"]
    for title, items in sections.items():
        lines += [f"annotate: {title}:", *(f"  {item}" for item in items)] if items else []
    done = f"{len(changes)} files edited" if options.write else "the change is in annotate.diff"
    lines.append(f"annotate: {done}" + " (--write applies it)" * (not options.write))
    print("\n".join(lines), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
