"""BENCHMARKS.md is what ``bench/benchmarks.py`` makes of the committed ``bench/results/``.

The page is generated; a figure typed into it by hand, or a result committed without
rebuilding the page, fails here. No bench runs: the page is rebuilt from the files alone.
"""

import importlib.util
import json
from pathlib import Path

from conftest import ROOT


def _benchmarks():
    spec = importlib.util.spec_from_file_location("benchmarks", ROOT / "bench" / "benchmarks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmarks_page_is_what_the_results_make() -> None:
    made = _benchmarks().page(ROOT / "bench" / "results")
    assert (ROOT / "BENCHMARKS.md").read_text() == made, "rebuild it: python bench/benchmarks.py"


def test_every_bench_has_its_script() -> None:
    missing = [
        script
        for script, _ in _benchmarks().BENCHES.values()
        if not (ROOT / "bench" / script).is_file()
    ]
    assert not missing


def test_a_bench_without_a_result_says_not_run(tmp_path: Path) -> None:
    benchmarks = _benchmarks()
    page = benchmarks.page(tmp_path)
    for name, (script, title) in benchmarks.BENCHES.items():
        section = page.split(f"## {name}: {title}\n")[1].split("\n## ")[0]
        assert section.strip().startswith("Not run: no result"), name
        assert f"bench/{script}" in section


def test_a_missed_target_is_marked(tmp_path: Path) -> None:
    record = {
        "bench": "busy",
        "command": "python bench/busy.py build/bench my_project",
        "date": "2030-01-01T00:00:00+00:00",
        "commit": "0123456789ab",
        "machine": {
            "cpu": "a CPU",
            "cores": 2,
            "load_average_before": [0.5, 0.5, 0.5],
            "load_average_after": [1.5, 1.0, 0.5],
        },
        "torch_threads": {"idle": [2], "loaded": [2], "forced": [1]},
        "versions": {"python": "3.12.0", "torch": "2.13.0"},
        "not_run": None,
        "figures": [
            {
                "name": "ppo: beside 1 busy process / idle",
                "value": 1.8,
                "unit": "",
                "target": "<= 1.5",
                "met": False,
            },
            {"name": "ppo: idle", "value": 2.5, "unit": "s"},
        ],
        "details": None,
    }
    (tmp_path / "busy.json").write_text(json.dumps(record))
    page = _benchmarks().page(tmp_path)
    assert "| ppo: beside 1 busy process / idle | 1.8 | ≤ 1.5: **missed** |" in page
    assert "| ppo: idle | 2.5 s |  |" in page
    assert "| `busy` | Training beside busy processes | 2030-01-01 | 0 of 1 |" in page
