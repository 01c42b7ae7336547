"""`scalerl config keys`: every key `--set` and `--config` accept, with its type, default and meaning.

`register(app)` adds the `config` group; torch-free (the config module imports no torch).
"""

from __future__ import annotations

import json

import typer

from scalerl.cli.errors import exits_on_user_error

config_app = typer.Typer(
    help="Run configuration: list the keys --set and --config accept.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@config_app.command("keys")
@exits_on_user_error
def keys_command(
    json_output: bool = typer.Option(False, "--json", help="Print one JSON list of {key, type, default, meaning}."),
) -> None:
    """List every config key with its type, default and meaning (the help on its config field)."""
    from scalerl.train.config.config_keys import describe_keys, keys_table

    keys = describe_keys()
    if json_output:
        typer.echo(
            json.dumps(
                [{"key": k.path, "type": k.type_name, "default": k.default, "meaning": k.meaning} for k in keys],
                indent=1,
            )
        )
        return
    typer.echo(keys_table(keys))


def register(app: typer.Typer) -> None:
    """Add the `config` group to the `scalerl` app."""
    app.add_typer(config_app, name="config")
