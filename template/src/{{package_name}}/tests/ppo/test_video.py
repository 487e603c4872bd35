"""``ppo.enjoy --video`` writes the greedy policy's first episode as an MP4, and refuses a
file that is not one, or a missing extra, in one line before the replay."""

import re
import sys
from pathlib import Path

import pytest

from ...ppo.enjoy import main
from ..project import refusal
from .conftest import checkpoint


@pytest.mark.slow  # ffmpeg writes and reads the video in child processes
def test_video_shows_the_first_deterministic_episode(trained: Path, tmp_path: Path) -> None:
    import imageio.v2 as imageio

    video = tmp_path / "videos" / "replay.mp4"
    report = main(["--ckpt_path", checkpoint(trained), "--episodes", "1", "--video", str(video)])
    frames = imageio.mimread(video)
    assert frames[0].ndim == 3  # RGB images
    # CartPole pays 1 per step: one frame per step of the first greedy episode.
    assert len(frames) == report["video_frames"] == report["deterministic_returns"][0]


def test_video_without_the_extra_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, trained: Path
) -> None:
    monkeypatch.setitem(sys.modules, "imageio", None)  # as if not installed
    args = ["--ckpt_path", checkpoint(trained), "--video", "replay.mp4"]
    line = refusal(capsys, lambda: main(args))
    assert re.match(
        r"error: --video needs the \[video\] extra \(pip install '\w+\[video\]'\): "
        r"cannot import imageio",
        line,
    ), line


def test_video_that_is_not_an_mp4_is_refused(
    capsys: pytest.CaptureFixture[str], trained: Path, tmp_path: Path
) -> None:
    args = ["--ckpt_path", checkpoint(trained), "--video", str(tmp_path / "replay.gif")]
    line = refusal(capsys, lambda: main(args))
    assert re.match(r"error: --video .*replay\.gif: the file name must end in \.mp4$", line), line
