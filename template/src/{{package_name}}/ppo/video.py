"""``python -m <package>.ppo.enjoy --video FILE.mp4``: the greedy policy's first episode as
an MP4. It needs the ``[video]`` extra: imageio with its own ffmpeg, and pygame, which
gymnasium's classic-control environments draw their frames with.
"""

import importlib
import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from ..run.errors import UserError
from .evaluate import evaluate
from .module import PPOModule


def check(path: str) -> None:
    """Refuse, before the replay starts, a file that is not an MP4 or a missing extra."""
    if Path(path).suffix.lower() != ".mp4":
        raise UserError(f"--video {path}: the file name must end in .mp4")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # pygame's greeting on import
    for package in ("imageio", "imageio_ffmpeg", "pygame"):  # gymnasium draws with pygame
        try:
            importlib.import_module(package)
        except ImportError as error:
            project = str(__package__).partition(".")[0]
            raise UserError(
                f"--video needs the [video] extra (pip install '{project}[video]'): "
                f"cannot import {package} ({error})"
            ) from error


def record(module: PPOModule, seed: int, path: str) -> int:
    """Write an MP4 of the greedy policy's episode on the environment seeded ``seed`` (the
    first of :func:`evaluate`'s) to ``path``; returns its number of frames."""
    import imageio.v2 as imageio

    # Frames are drawn off screen; without this, SDL looks for a display and may complain.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    frames: list[Any] = []  # RGB images, as imageio's annotation spells them
    evaluate(module.agent, module.hparams.env_id, 1, seed, frames=frames)
    with gym.make(module.hparams.env_id) as probe:
        fps = probe.metadata.get("render_fps") or 30
    # Even sides, as H.264's usual pixel format needs; imageio pads an odd side.
    imageio.mimwrite(path, frames, fps=fps, macro_block_size=2)
    return len(frames)
