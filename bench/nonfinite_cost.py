"""Cost of ``python -m <package>.audit --nonfinite``: each program run plain, under the audit,
and under the audit with ``--nonfinite``, in this process through ``runpy`` after one warm-up
run of each (imports are not timed), in rotated order so that machine noise falls on all.
Times are CPU seconds of this process (one torch thread), which a busy machine disturbs less
than wall time. The report is the median per variant and the medians of the paired ratios.

The programs: the project's own audit test models (``tests/audit/untyped_driver.py``, the
untyped GPT and agent, and the single-file PPO of ``tests/audit/scripts.py``), the
masked-attention program of ``audit_cost.py``, and a small nanoGPT-style decoder trained
with AdamW at two sizes.

Usage: ``python bench/nonfinite_cost.py PROJECT_DIR PACKAGE [REPEATS]``.
"""

import contextlib
import importlib
import io
import runpy
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from audit_cost import PROGRAM as MASKED_ATTENTION

DECODER = """\
import math, sys
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, D, L, STEPS = map(int, sys.argv[1:6])
V, H = 65, 4


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = (y.view(b, t, H, c // H).transpose(1, 2) for y in self.c_attn(x).split(D, 2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(D), CausalSelfAttention(), nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.h, self.ln_f = nn.ModuleList(Block() for _ in range(L)), nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(V, (10000,))
for step in range(STEPS):
    ix = torch.randint(len(data) - T - 1, (B,))
    x = torch.stack([data[i : i + T] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + T] for i in ix])
    loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
"""


def main() -> None:
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    torch.set_num_threads(1)
    sys.path.insert(0, str(project / "src"))  # an installed package works as well
    audit = importlib.import_module(f"{package}.audit.command").main
    scripts = importlib.import_module(f"{package}.tests.audit.scripts")
    folder = Path(tempfile.mkdtemp())
    for name in ("untyped_driver.py", "untyped_model.py", "untyped_rl.py"):
        shutil.copy(project / "src" / package / "tests" / "audit" / name, folder / name)
    sys.path.insert(0, str(folder))  # the driver imports the model by name
    for name, text in {
        "ppo": scripts.PPO_SCRIPT,
        "masked": MASKED_ATTENTION,
        "gpt": DECODER,
    }.items():
        (folder / f"{name}.py").write_text(text)
    programs = {
        "untyped GPT and agent (tests/audit)": ["untyped_driver.py"],
        "single-file PPO, 2 iterations (tests/audit)": ["ppo.py", "--iterations", "2"],
        "masked attention, 300 Adam steps (audit_cost.py)": ["masked.py"],
        "decoder B8 T32 D64 L2, 60 AdamW steps": ["gpt.py", "8", "32", "64", "2", "60"],
        "decoder B12 T64 D128 L4, 20 AdamW steps": ["gpt.py", "12", "64", "128", "4", "20"],
    }
    for label, (script, *args) in programs.items():
        path = str(folder / script)

        def plain(path: str = path, args: list[str] = args) -> None:
            saved, sys.argv = sys.argv, [path, *args]
            try:
                runpy.run_path(path, run_name="__main__")
            finally:
                sys.argv = saved

        variants = {
            "plain": plain,
            "audit": lambda path=path, args=args: audit([path, *args]),
            "--nonfinite": lambda path=path, args=args: audit(["--nonfinite", path, *args]),
        }
        names = list(variants)
        times: dict[str, list[float]] = {name: [] for name in names}
        for repeat in range(-1, repeats):  # -1: the warm-up
            for name in names[repeat % 3 :] + names[: repeat % 3]:
                with (
                    contextlib.redirect_stdout(io.StringIO()),
                    contextlib.redirect_stderr(io.StringIO()),
                ):
                    start = time.process_time()
                    variants[name]()
                    seconds = time.process_time() - start
                if repeat >= 0:
                    times[name].append(seconds)

        def ratio(top: str, bottom: str, times: dict[str, list[float]] = times) -> float:
            pairs = zip(times[top], times[bottom], strict=True)
            return statistics.median(a / b for a, b in pairs)

        medians = "  ".join(f"{name} {statistics.median(times[name]):.3f} s" for name in names)
        print(f"{label}: {medians}", flush=True)
        print(
            f"  --nonfinite / audit {ratio('--nonfinite', 'audit'):.2f}, "
            f"--nonfinite / plain {ratio('--nonfinite', 'plain'):.2f}, "
            f"audit / plain {ratio('audit', 'plain'):.2f}",
            flush=True,
        )
    print(f"CPU seconds of this process, 1 torch thread, median of {repeats} repeats")


if __name__ == "__main__":
    main()
