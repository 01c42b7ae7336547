"""`scalerl export RUN OUT [--step N] [--accept-old-checkpoints]`: a run's checkpoint as a Hugging Face model folder.

`register(app)` adds the command; torch and transformers are imported inside its body only.
"""

from __future__ import annotations

from pathlib import Path

import typer

from scalerl.cli.errors import exits_on_user_error
from scalerl.errors import InputError


@exits_on_user_error
def export_command(
    run: Path = typer.Argument(..., help="Run directory (holds checkpoints/step_*)."),
    out: Path | None = typer.Argument(None, help="Model folder to write (must not exist or be empty)."),
    out_option: Path | None = typer.Option(None, "-o", "--out", help="Same as OUT."),
    step: int | None = typer.Option(None, "--step", help="Checkpoint step (default: the newest)."),
    dtype: str | None = typer.Option(
        None, "--dtype", help="Cast the exported weights: float32, bfloat16 or float16 (default: as trained)."
    ),
    merge: bool = typer.Option(
        False,
        "--merge",
        help="LoRA run: merge the adapter into the starting weights (a plain model folder) "
        "instead of writing the adapter folder.",
    ),
    accept_old: bool = typer.Option(
        False,
        "--accept-old-checkpoints",
        help="Export a checkpoint without a manifest (written by an older scalerl; its files' checksums "
        "cannot be checked). Without it such a checkpoint is refused as damaged.",
    ),
) -> None:
    """Write a checkpoint as a model folder for from_pretrained / vLLM (no training state)."""
    if out is not None and out_option is not None and out != out_option:
        raise InputError(f"give the output folder once: OUT is {out}, -o is {out_option}")
    target = out if out is not None else out_option
    if target is None:
        raise InputError("missing the output folder: scalerl export RUN OUT (or -o OUT)")
    from rich.console import Console

    from scalerl.train.export import export_model

    written = export_model(
        run,
        target,
        step=step,
        on_note=lambda note: typer.echo(note, err=True),
        dtype=dtype,
        merge=merge,
        accept_old=accept_old,
    )
    loading = (
        f"AutoModelForCausalLM.from_pretrained('{written}')"
        if not (written / "adapter_config.json").exists()
        else f"peft's PeftModel.from_pretrained(starting_model, '{written}') (or export with --merge)"
    )
    Console(soft_wrap=True).print(f"exported to {written}; load it with {loading}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add `export` to the `scalerl` app."""
    app.command("export")(export_command)
