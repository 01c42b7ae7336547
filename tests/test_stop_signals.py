"""SIGTERM is handled as Ctrl-C is: the run stops after the step it is in with a checkpoint, and
the command exits with 128 + the signal (143; 130 after Ctrl-C); the pipeline's driver turns an
actor's death or failure into one error saying the run can be resumed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalerl.errors import ScaleRLError
from scalerl.train.guards.interrupt import interrupts_deferred, stop_on_interrupt, terminate_as_interrupt
from scalerl.train.records.metrics_log import read_rows


def test_sigterm_sets_the_stop_request_with_exit_code_143():
    with stop_on_interrupt() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    assert stop.requested and stop.exit_code == 143
    with stop_on_interrupt() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert stop.requested and stop.exit_code == 130
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the previous handler is back


def test_the_drivers_sigterm_raises_keyboard_interrupt_and_remembers_the_signal():
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert stop.exit_code == 143


def test_a_stop_inside_deferred_bookkeeping_is_raised_when_the_bookkeeping_ends():
    """The async driver books a step it took off the trainer's queue before it stops: a SIGTERM
    within interrupts_deferred() lets the block finish, then raises."""
    finished = []
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt() as stop:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler has run by now; nothing was raised inside the block
            finished.append("booked")
        finished.append("after the block")  # never reached: the stop is raised as the block ends
    assert finished == ["booked"] and stop.exit_code == 143
    with terminate_as_interrupt():  # a later stop request starts clean
        with interrupts_deferred():
            pass


def test_a_dead_actor_or_a_failure_inside_one_is_one_error_saying_how_to_resume(tmp_path):
    ray = pytest.importorskip("ray")
    from scalerl.distributed.pipeline import actor_failures_as_errors
    from scalerl.train.guards.divergence_guard import DivergenceError

    with pytest.raises(ScaleRLError, match=r"an actor of the run died .*scalerl train --out .* --resume"):
        with actor_failures_as_errors(tmp_path):
            raise ray.exceptions.ActorDiedError()
    inside = ray.exceptions.RayTaskError("train", "traceback text", DivergenceError("step 3: the loss is nan"))
    with pytest.raises(DivergenceError, match="step 3: the loss is nan"):
        with actor_failures_as_errors(tmp_path):
            raise inside


@pytest.mark.slow  # a real process: starts torch, trains until SIGTERM, resumes (~20-60 s on 2 shared cores)
def test_sigterm_to_a_real_training_process_exits_143_with_a_checkpoint_and_resume_completes(
    tiny_set_options, tmp_path
):
    out = tmp_path / "run"
    sets = tiny_set_options("eval_every=2", "checkpoint_every=2")
    command = [sys.executable, "-c", "from scalerl.cli.app import main; main()", "train", "--out", str(out)]
    process = subprocess.Popen(
        [*command, "--max-steps", "500", "--no-progress", *sets],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None and not (out / "checkpoints").is_dir():
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr
    assert "interrupted at step" in stdout and "Traceback" not in stderr
    steps = [row["step"] for row in read_rows(out / "metrics.jsonl")]
    assert steps == list(range(len(steps))) and (out / "checkpoints" / f"step_{steps[-1]:08d}").is_dir()
    resumed = subprocess.run(
        [*command, "--resume", "--max-steps", str(steps[-1] + 1), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert [row["step"] for row in read_rows(out / "metrics.jsonl")] == list(range(steps[-1] + 2))


def _our_ray_processes(session_marker: str) -> list[str]:
    """Command lines of live processes that name `session_marker` (the run's Ray temp folder)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    line = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if session_marker in line:
                found.append(line)
    return found


@pytest.fixture
def short_tmp():
    """A folder with a short path (Ray's socket paths must stay under 107 bytes), removed afterwards."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="srl", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # a real async pipeline on a local Ray instance until SIGTERM, then a resume (~1-3 min)
def test_sigterm_to_the_async_driver_exits_143_resumable_and_leaves_no_processes(tiny_set_options, tmp_path, short_tmp):
    out, ray_tmp = tmp_path / "run", short_tmp
    sets = tiny_set_options("eval_every=2", "checkpoint_every=2", "pipeline.mode=async", "pipeline.max_lag=1")
    command = [sys.executable, "-c", "from scalerl.cli.app import main; main()", "train", "--out", str(out)]
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp)}
    process = subprocess.Popen(
        [*command, "--max-steps", "500", "--no-progress", *sets],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None and not (out / "checkpoints").is_dir():
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr[-2000:]
    assert "Traceback" not in stderr
    steps = [row["step"] for row in read_rows(out / "metrics.jsonl")]
    assert steps == list(range(len(steps))) and len(steps) >= 2
    deadline = time.monotonic() + 30  # Ray's own processes exit shortly after the driver
    while time.monotonic() < deadline and _our_ray_processes(str(ray_tmp)):
        time.sleep(0.5)
    assert _our_ray_processes(str(ray_tmp)) == []
    resumed = subprocess.run(
        [*command, "--resume", "--max-steps", str(steps[-1] + 1), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [row["step"] for row in read_rows(out / "metrics.jsonl")][-1] == steps[-1] + 1


def test_the_reaper_kills_what_it_recorded_even_past_sigterm_and_never_a_reused_pid():
    import psutil

    from scalerl.distributed.ray_reaper import is_ray_process, reap

    assert is_ray_process("ray::DashboardAgent", ["ray::DashboardAgent"])
    assert is_ray_process("raylet", ["/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet", "--x"])
    assert not is_ray_process("python3", ["python3", "-m", "scalerl.distributed.ray_reaper", "12"])
    ignore_sigterm = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    )
    stubborn = subprocess.Popen([sys.executable, "-c", ignore_sigterm], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert stubborn.stdout.readline().strip() == "ready"  # SIGTERM is ignored from here on
        created = psutil.Process(stubborn.pid).create_time()
        not_the_recorded_one = psutil.Process(other.pid).create_time() + 1000  # as after an id was reused
        assert reap({stubborn.pid: created, other.pid: not_the_recorded_one}, grace_seconds=0.5) == 1
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for process in (stubborn, other):
            process.kill()
            process.wait()


@pytest.mark.slow  # a real async pipeline on a local Ray instance, its driver killed (~1-2 min)
def test_a_driver_killed_outright_takes_its_ray_processes_with_it(tiny_set_options, tmp_path, short_tmp):
    import psutil

    out = tmp_path / "run"
    sets = tiny_set_options("pipeline.mode=async", "pipeline.max_lag=1")
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from scalerl.cli.app import main; main()",
            "train",
            "--out",
            str(out),
            "--max-steps",
            "500",
            "--no-progress",
            *sets,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RAY_TMPDIR": str(short_tmp)},
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and driver.poll() is None and len(read_rows(out / "metrics.jsonl")) < 3:
            time.sleep(0.2)
        descendants = psutil.Process(driver.pid).children(recursive=True)
        names = [process.name() for process in descendants]
        assert any(name.startswith("ray::") for name in names) and "raylet" in names, names
    finally:
        driver.kill()
        driver.wait()
    _, alive = psutil.wait_procs(descendants, timeout=60)
    assert [process.pid for process in alive] == []
