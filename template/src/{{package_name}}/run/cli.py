"""What every command line here shares: a parser whose refusals end the output in one
line, checks on a run's folders and checkpoint files before it starts, one checkpoint
folder per run root, and a clean end to a multi-process run.
"""

import importlib.util
import logging
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from .checkpoints import CheckpointFiles, check_hyperparameters, read
from .data import per_process
from .errors import UserError, user_errors
from .guards import BroadcastGuardCallback, NonFiniteLocator
from .summary import RunSummary
from .threads import CpuThreads
from .tracking import link_logs_to_run_root


class OneLineErrorParser(LightningArgumentParser):
    def __init__(self, *args: Any, links_from_data: bool = True, **kwargs: Any) -> None:
        """``links_from_data``: false for ``predict`` (see :class:`DataExampleCLI`)."""
        # argparse takes a unique prefix of an option for the option: --model.num_env=2 would
        # quietly set --model.num_envs. A mistyped key must be refused, not guessed.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.links_from_data = links_from_data

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        """jsonargparse reports a wrong type over two lines: the last line of a failed run
        names both the key and the reason."""
        lines = (line.strip() for line in message.splitlines())
        super().error(" ".join(line for line in lines if line), ex)


C = TypeVar("C", bound="ExampleCLI")


class ExampleCLI(LightningCLI):
    """LightningCLI that checks a run's files before the subcommand starts. An example
    overrides the class attributes below and starts with :meth:`launch`."""

    notices: tuple[str, ...] = ()  # patterns of Lightning's hints that do not apply here
    guarded_steps = 50  # training steps under the broadcast guard
    checkpoint_defaults: dict[str, Any] = {
        "monitor": "val_loss",
        "filename": "best-{epoch}-{val_loss:.4f}",
        "save_last": True,
    }

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults({f"checkpoint.{k}": v for k, v in self.checkpoint_defaults.items()})
        parser.link_arguments("trainer.default_root_dir", "checkpoint.dirpath", checkpoint_dir)
        link_logs_to_run_root(parser)

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        """Check a ``--ckpt_path`` file as soon as it is named. LightningCLI reads the
        file's hyperparameters next, into the model's config (so the model is built to fit
        the file), and would fail inside ``torch.load`` or the parser."""
        super().parse_arguments(parser, args)
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        named = ckpt_path not in (None, "last", "best", "hpc", "registry")
        if named and "://" not in str(ckpt_path) and self.model_class is not None:
            check_hyperparameters(read(ckpt_path), self.model_class, ckpt_path)

    def before_instantiate_classes(self) -> None:
        """Refuse an evaluation the model has no step for (Lightning would raise after the
        model and data are built); fill what the W&B and MLflow presets leave unset, where
        the project has them."""
        step = {"validate": "validation_step", "test": "test_step"}.get(str(self.subcommand))
        model = self.model_class
        if step and model is not None and getattr(model, step) is getattr(LightningModule, step):
            raise UserError(
                f"{self.subcommand} needs {model.__name__}.{step}; this example has none"
            )
        trackers = f"{__package__}.trackers"  # the W&B and MLflow presets' glue, where generated
        if importlib.util.find_spec(trackers) is None:
            return
        config = self.config[self.subcommand] if self.subcommand else self.config
        resumed_from = config.get("ckpt_path") if self.subcommand == "fit" else None
        checkpoints = config.get("checkpoint", {}).get("dirpath")
        importlib.import_module(trackers).fill_logger_paths(config, resumed_from, checkpoints)

    def instantiate_classes(self) -> None:
        """Let a :class:`UserError` that a class raises while it is built reach the entry
        point as itself: jsonargparse wraps what the class of an option with several
        accepted types (a callback, a logger) raises in a ValueError of its own."""
        try:
            super().instantiate_classes()
        except Exception as error:
            cause: BaseException | None = error
            seen = set()  # a chain that loops back on itself ends the search
            while cause is not None and not isinstance(cause, UserError) and id(cause) not in seen:
                seen.add(id(cause))
                cause = cause.__cause__ or cause.__context__
            if isinstance(cause, UserError):
                raise cause from None
            raise

    def _check_run_files(self) -> None:
        """Refuse folders that cannot be written, and ``--ckpt_path last`` with no last.ckpt
        (Lightning would start from scratch: a mistyped root would train anew). Outside a fit,
        which writes no checkpoint, hide ModelCheckpoint's notice that the dirpath changed."""
        trainer = self.trainer
        check_writable(trainer.default_root_dir, "--trainer.default_root_dir")
        checkpoint = trainer.checkpoint_callback
        if isinstance(checkpoint, ModelCheckpoint) and checkpoint.dirpath:
            folder = checkpoint.dirpath
            check_writable(folder, "--checkpoint.dirpath")
            last = self.subcommand == "fit" and self.config_init["fit"].get("ckpt_path") == "last"
            if last and "://" not in str(folder) and not list(Path(folder).glob("last*.ckpt")):
                raise UserError(
                    f"--ckpt_path last: no last.ckpt in {folder} to resume from; "
                    "leave --ckpt_path out to start a new run"
                )
        # Every checkpoint goes through CheckpointFiles (atomic writes, checked reads): in
        # place of Lightning's default plugin, not of one the user chose.
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
            trainer.strategy.checkpoint_io = CheckpointFiles(self.model)
        if self.subcommand != "fit":
            warnings.filterwarnings("ignore", "The dirpath has changed from", UserWarning)

    before_fit = before_validate = before_test = before_predict = _check_run_files

    @classmethod
    def launch(
        cls: type[C],
        *,
        model_class: type,
        data_class: type | None = None,
        summary_metrics: Sequence[str] = (),
        callbacks: Sequence[Callback] = (),
        args: list[str] | None = None,
        package: str | None,
        **trainer_defaults: Any,
    ) -> C:
        """Run the subcommand in ``args`` (default: the command line) as ``python -m
        <package>``, with a run summary of ``summary_metrics``, the CPU threads, ``callbacks``
        and the guards, and destroy the process group that a DDP run leaves behind."""
        guards = [BroadcastGuardCallback(cls.guarded_steps), NonFiniteLocator()]
        first = [RunSummary(metrics=summary_metrics), CpuThreads()]
        trainer_defaults["callbacks"] = [*first, *callbacks, *guards]
        with user_errors(), quiet_third_parties(*cls.notices):
            try:
                return cls(
                    model_class,
                    data_class,
                    seed_everything_default=0,
                    trainer_defaults=trainer_defaults,
                    save_config_kwargs={"overwrite": True},
                    parser_class=OneLineErrorParser,
                    # The usage and tip lines name the command as typed, not __main__.py.
                    parser_kwargs={
                        "prog": f"python -m {package}",
                        "predict": {"links_from_data": False},
                    },
                    args=args,
                )
            finally:
                # A process that exits with a DDP run's gloo group still alive can abort in
                # C++ ("terminate called without an active exception") after the run itself
                # succeeded, and exit non-zero.
                if torch.distributed.is_available() and torch.distributed.is_initialized():
                    torch.distributed.destroy_process_group()


class DataExampleCLI(ExampleCLI):
    """An example whose model is built from its data: LightningCLI builds the DataModule
    first and hands the model its ``from_data`` attributes, so the YAML never repeats them.
    ``predict --ckpt_path FILE --data.predict_csv FILE`` builds the model from the checkpoint
    alone: links would override the file's hyperparameters with what the data module holds."""

    from_data: tuple[str, ...] = ()
    predicted = "file"  # what --data.predict_csv names, in the refusal that asks for one

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        if getattr(parser, "links_from_data", True):
            for name in self.from_data:
                parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")
        super().add_arguments_to_parser(parser)

    def before_fit(self) -> None:
        """Refuse a batch size that does not split over the processes before they start."""
        per_process(self.config.fit.data.batch_size, self.trainer.world_size)
        super().before_fit()

    def before_instantiate_classes(self) -> None:
        """Refuse a predict that could not use the checkpoint, or a predict file elsewhere."""
        super().before_instantiate_classes()
        subcommand = str(self.subcommand)
        config = self.config[subcommand]
        ckpt_path, predict_file = config.ckpt_path, config.data.predict_csv
        if subcommand != "predict":
            if predict_file is not None:
                raise UserError(f"--data.predict_csv is read by predict only, not by {subcommand}")
        elif ckpt_path is None or not Path(str(ckpt_path)).is_file():
            raise UserError(
                "predict builds the model from --ckpt_path FILE, the checkpoint of a fit run"
                + (f"; {ckpt_path} is not a file" if ckpt_path else "")
            )
        elif predict_file is None:
            raise UserError(
                f"predict reads --data.predict_csv FILE: name the {self.predicted} to predict"
            )


def check_writable(folder: str | Path, option: str) -> None:
    """Create ``folder`` and write a file there, or raise a :class:`UserError` naming ``option``
    and the cause, so a run finds out before its first epoch. Remote folders are left alone."""
    if "://" in str(folder):
        return
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as error:
        blocker = next((p for p in (path, *path.parents) if p.is_file()), None)
        cause = f"{blocker} is a file" if blocker else error.strerror or str(error)
        raise UserError(f"{option} {path}: cannot write there: {cause}") from error


def checkpoint_dir(default_root_dir: str | Path | None) -> str:
    """Where every run under ``default_root_dir`` keeps its checkpoints: one folder, not
    each run's ``version_N``, so a rerun after a crash finds ``last.ckpt``."""
    return str(Path(default_root_dir or Path.cwd()) / "checkpoints")


_TIP_SOURCES = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


@contextmanager
def quiet_third_parties(*notices: str) -> Iterator[None]:
    """While open, hide the two notices below, ``notices`` (a command's own message patterns)
    and Lightning's cloud tips, and nothing else; on exit every filter is undone."""
    sources = [logging.getLogger(name) for name in _TIP_SOURCES]

    def not_a_tip(record: logging.LogRecord) -> bool:  # Lightning's, at INFO on every fit
        return not str(record.msg).startswith("💡 Tip: For seamless cloud")

    with warnings.catch_warnings():
        # Asks for TensorBoard, for Lightning's default logger: it is a dependency here.
        warnings.filterwarnings("ignore", "Starting from v1.9.0, `tensorboardX`", UserWarning)
        # Raised by Lightning's own use of torch's pytree API, not by the user's code.
        warnings.filterwarnings("ignore", r"`isinstance\(treespec, LeafSpec\)`", FutureWarning)
        for message in notices:
            warnings.filterwarnings("ignore", message=message)
        for source in sources:
            source.addFilter(not_a_tip)
        try:
            yield
        finally:
            for source in sources:
                source.removeFilter(not_a_tip)
