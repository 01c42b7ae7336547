"""Commands that need an optional extra (pyproject.toml): which extra installs a missing module,
and the command groups registered on the app, each replaced by commands of the same names that
say which extra to install when it is missing (the forecaster-only install)."""

from __future__ import annotations

import importlib

import typer

from scalerl.cli.errors import USER_ERROR_EXIT_CODE

# The extra (pyproject.toml) that installs each optional top-level module a command may import.
EXTRA_OF_MODULE = {
    "torch": "train",
    "transformers": "train",
    "safetensors": "train",
    "tokenizers": "train",
    "math_verify": "train",
    "yaml": "train",
    "accelerate": "train",
    "ray": "distributed",
    "wandb": "wandb",
    "tensorboard": "tensorboard",
}


def missing_extra(error: ImportError) -> str | None:
    """The extra that installs the module `error` did not find; None for any other import error."""
    return EXTRA_OF_MODULE.get((getattr(error, "name", None) or "").split(".")[0])


def missing_extra_message(error: ImportError) -> str | None:
    """`this command needs torch, ...: pip install "scalerl[train]"` when `error` is a module of an
    extra that is not installed (a forecaster-only install); None for any other import error."""
    extra = missing_extra(error)
    if extra is None:
        return None
    module = error.name.split(".")[0]
    return f'this command needs {module}, which the forecaster-only install leaves out: pip install "scalerl[{extra}]"'


# Command groups that train register themselves here; each imports torch only inside its command
# bodies, but some import the training package's config (and so its extra) at module level.
COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scalerl.cli.train", ("train", "demo")),
    ("scalerl.cli.ablate", ("ablate",)),  # torch imported only when runs train
    ("scalerl.cli.study", ("study",)),  # an alias of `scalerl ablate`
    ("scalerl.cli.report", ("report",)),
    ("scalerl.cli.export", ("export",)),  # torch imported in the body
    ("scalerl.cli.config", ("config",)),  # `scalerl config keys`
)
ANY_ARGUMENTS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def command_needing_extra(message: str):
    """A command that takes any arguments and fails with `error: <message>` (exit 2): what a
    training command is in an install without its extra."""

    def needs_extra(context: typer.Context) -> None:
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(code=USER_ERROR_EXIT_CODE)

    return needs_extra


def register_command_groups(target: typer.Typer) -> None:
    """Register each command group; one whose extra is not installed becomes commands of the same
    names that say which extra to install (the forecasting commands keep working)."""
    for module_name, commands in COMMAND_GROUPS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            message = missing_extra_message(error)
            if message is None:
                raise
            for name in commands:
                target.command(
                    name,
                    context_settings=ANY_ARGUMENTS,
                    add_help_option=False,
                    help=f"Not installed here: needs the '{missing_extra(error)}' extra.",
                )(command_needing_extra(message))
            continue
        module.register(target)
