"""The audit on a realistic single-file PPO for CartPole, written the way such scripts are
(storage from ``zeros``, GAE, ``.reshape``/``.view``/``.flatten``, minibatch epochs): clean,
it runs to its end with no finding; with the critic's ``.view(-1)`` dropped and the
advantages made a column, each stretching line is reported, in one run."""

import json
from pathlib import Path

import pytest

from ...audit.command import main
from .scripts import PPO_SCRIPT

pytestmark = pytest.mark.no_broadcast_guard  # the audit runs a guard of its own

PLANTED = {
    "newvalue = critic(b_obs[mb_inds]).view(-1)": "newvalue = critic(b_obs[mb_inds])",
    "mb_advantages = b_advantages[mb_inds]\n": "mb_advantages = b_advantages[mb_inds][:, None]\n",
}
"""Two bugs: the critic's ``(N, 1)`` column, and ``(N, 1)`` advantages."""


def _audit(folder: Path, script: str) -> tuple[int, list[dict[str, object]]]:
    (folder / "ppo.py").write_text(script)
    status = main(["--report", str(folder / "report.json"), str(folder / "ppo.py"), "--seed", "2"])
    return status, json.loads((folder / "report.json").read_text())


def test_clean_ppo_script_audits_clean_and_each_planted_bug_is_reported_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _audit(tmp_path, PPO_SCRIPT) == (0, [])
    assert "iteration 1: reward per step" in capsys.readouterr().out
    script = PPO_SCRIPT
    for clean, planted in PLANTED.items():
        script = script.replace(clean, planted)
    status, report = _audit(tmp_path, script)
    uses = ["pg_loss1 = -mb_advantages * ratio"]
    uses.append("pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip, 1 + clip)")
    uses.append("v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()")
    lines = [PPO_SCRIPT.splitlines().index(f"            {use}") + 1 for use in uses]
    assert status == 1
    assert [(f["line"], f["source"]) for f in report] == list(zip(lines, uses, strict=True))
    assert [f["shapes"] for f in report] == [[[64, 1], [64]]] * 3
    assert {f["count"] for f in report} == {2 * 2 * 4}  # iterations x epochs x minibatches
