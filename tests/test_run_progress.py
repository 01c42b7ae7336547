"""Progress of a run as a person reads it: the same line per logged row from the synchronous
trainer and the asynchronous driver, plain lines without a terminal."""

import subprocess
import sys

import pytest


def _plain_console():
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), force_terminal=False, width=40)


def test_without_a_terminal_progress_is_a_plain_line_every_few_steps():
    from scalerl.train.records.progress import RunProgress

    console = _plain_console()
    with RunProgress(40, console=console) as progress:
        progress.show_forecast("A 0.412 [0.380, 0.455]")
        for step in range(1, 41):
            progress.update(step, 0.25, 0.5)
        progress.note("a note")
    lines = console.file.getvalue().splitlines()
    assert [line.split()[1] for line in lines[:-1]] == [f"{step}/40" for step in range(2, 41, 2)]
    assert lines[-2] == "step 40/40  reward +0.250  val pass rate 0.500  forecast A 0.412 [0.380, 0.455]"
    assert lines[-1] == "a note"  # notes too, and nothing is wrapped at the console's 40 columns
    assert "\x1b" not in console.file.getvalue() and "\r" not in console.file.getvalue()


def test_the_async_driver_reports_each_logged_row_as_the_synchronous_trainer_does(tiny_config, tmp_path):
    """PipelineSession.flush (the async driver) shows each row it appends through the same
    RunProgress.show_row as the synchronous trainer."""
    import collections

    from scalerl.distributed.session import PipelineSession
    from scalerl.train.records.progress import RunProgress
    from scalerl.train.run_state import RunState

    session = object.__new__(PipelineSession)  # the driver's bookkeeping only: no Ray actors
    session.run_state = RunState.open(
        tiny_config("eval_every=2", "max_steps=4"), tmp_path / "run", resume=False, num_train_prompts=50
    )
    session.pending = collections.deque(
        [[{"step": step, "flops": float(step), "train_reward": 0.5}, None, None] for step in (1, 2)]
    )
    console = _plain_console()
    with RunProgress(4, console=console) as session.progress:
        assert [row["step"] for row in session.flush()] == [1, 2]
    session.run_state.close()
    assert console.file.getvalue().splitlines() == ["step 1/4  reward +0.500", "step 2/4  reward +0.500"]


@pytest.mark.slow  # starts a local Ray instance and two actors: 30-100 s on 2 shared cores
def test_an_async_run_shows_progress_and_logs_no_error_line(tiny_set_options, tmp_path):
    pytest.importorskip("ray")
    sets = tiny_set_options("eval_every=2", "pipeline.num_cpus=2")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from scalerl.cli.app import main; main()",
            "train",
            "--out",
            str(tmp_path / "run"),
            "--pipeline",
            "async",
            "--max-lag",
            "1",
            "--max-steps",
            "2",
            *sets,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "step 1/2  reward" in result.stderr and "step 2/2  reward" in result.stderr
    assert not [line for line in result.stderr.splitlines() if " E " in line or "ERROR" in line], result.stderr
