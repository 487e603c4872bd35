"""Checkpoint files that a crash cannot corrupt, checked before a run resumes from one.

Lightning moves a checkpoint into place from the system's temp folder; from another
filesystem the move is a copy, and a crash during it leaves a truncated ``last.ckpt``. Here
the temporary file is renamed over the old one in its own folder, atomically. A file that
does not load, or does not fit the model, raises a ``UserError`` that names it."""

import inspect
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins import TorchCheckpointIO

from .errors import UserError


class CheckpointFiles(TorchCheckpointIO):
    def __init__(self, module: L.LightningModule | None = None) -> None:
        """``module``: the model a loaded checkpoint must fit; None checks only that it loads."""
        super().__init__()
        self.module = module

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None or "://" in str(path):  # remote: Lightning's way
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # A dot name that Lightning's search for "last*.ckpt" does not match; the pid keeps
        # two writers of one name apart.
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with temporary.open("wb") as handle:
                torch.save(checkpoint, handle)
                handle.flush()
                os.fsync(handle.fileno())  # the data is on disk before the name points at it
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)

    def load_checkpoint(self, path: str | Path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        load = super().load_checkpoint
        checkpoint = read(path, lambda: load(path, *args, **kwargs))
        if self.module is not None:
            check_fits(checkpoint, self.module, path)
        return checkpoint


def read(path: str | Path, load: Callable[[], Any] | None = None) -> dict[str, Any]:
    """``load()`` the checkpoint at ``path``, or raise a :class:`UserError` that names the
    file and says why it is not one. The default ``load`` maps the file without reading
    its tensors, so checking a large checkpoint costs little."""
    local = "://" not in str(path)
    if local and not Path(path).is_file():
        raise UserError(f"{path}: no such checkpoint file")
    unreadable = f"{path}: not a readable checkpoint, the file is truncated or corrupt"
    if local and not zipfile.is_zipfile(path):
        # torch.save writes a zip archive whose index comes last: a cut file has none.
        raise UserError(f"{unreadable} (not a whole zip archive, as torch.save writes)")
    try:
        checkpoint = load() if load else torch.load(path, "cpu", weights_only=True, mmap=local)
    # What torch.load raises on a zip archive that is not a whole checkpoint: a damaged
    # member or a pickle that does not load.
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError, ValueError) as error:
        reason = (str(error).strip() or "\n").splitlines()[0][:120]
        detail = f"{type(error).__name__}{': ' + reason if reason else ''}"
        raise UserError(f"{unreadable} ({detail})") from error
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserError(f"{path}: not a Lightning checkpoint (it has no state_dict)")
    return checkpoint


def check_hyperparameters(
    checkpoint: dict[str, Any], model_class: Callable[..., L.LightningModule], path: str | Path
) -> None:
    """Raise a :class:`UserError` if ``checkpoint`` was saved by a model whose
    hyperparameters ``model_class`` does not take: another example's checkpoint."""
    accepted = inspect.signature(model_class).parameters
    model = getattr(model_class, "__name__", "the model")
    saved = checkpoint.get("hyper_parameters", {})
    foreign = [key for key in saved if not key.startswith("_") and key not in accepted]
    if foreign:
        raise UserError(
            f"{path}: not a checkpoint of {model}: its hyperparameters "
            f"{', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''} are not {model}'s"
        )


def check_fits(checkpoint: dict[str, Any], module: L.LightningModule, path: str | Path) -> None:
    """Raise a :class:`UserError` unless ``checkpoint``'s weights have the names and shapes
    of ``module``'s, naming what differs: the model, or the hyperparameters that sized it."""
    theirs = {name: tuple(value.shape) for name, value in checkpoint["state_dict"].items()}
    ours = {name: tuple(value.shape) for name, value in module.state_dict().items()}
    model = type(module).__name__
    # The top-level modules that hold the weights: net.* or agent.*, say.
    held, has = (", ".join(sorted({f"{n.split('.')[0]}.*" for n in s})) for s in (theirs, ours))
    if held != has:
        raise UserError(
            f"{path}: not a checkpoint of {model}: it holds {held} weights, {model} has {has}"
        )
    if not module.strict_loading:
        ours = {name: shape for name, shape in ours.items() if name in theirs}
    differences = [
        f"{name} is {theirs.get(name, 'missing')} in the file, "
        f"{ours.get(name, 'absent')} in the model"
        for name in sorted(theirs.keys() | ours.keys())
        if theirs.get(name) != ours.get(name)
    ]
    if not differences:
        return
    saved = checkpoint.get("hyper_parameters", {})
    sized_by = [
        f"{key}={_plain(saved[key])} in the file, {_plain(value)} here"
        for key, value in module.hparams.items()
        if key in saved and not key.startswith("_") and _plain(saved[key]) != _plain(value)
    ]
    raise UserError(
        f"{path}: written for another {model}: "
        + "; ".join(sized_by or differences[:1])
        + f" ({len(differences)} tensors differ)"
    )


def _plain(value: object) -> object:
    """A hyperparameter as the file and the parser both give it: tuples as lists."""
    return [_plain(item) for item in value] if isinstance(value, tuple | list) else value
