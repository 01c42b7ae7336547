"""A run's progress on stderr, the same for the synchronous trainer and the async pipeline: step,
last train reward, last validation pass rate and the latest live forecast of the ceiling A with
its interval and the verdict's kind, e.g. `A 0.412 [0.380, 0.455] still_rising`.

On a terminal this is one live rich bar. Without one (a pipe, a log file, a scheduler) it is a
plain line every `plain_every` steps and at the last step, never a bar or a control character.
Notes (warnings, why a run stopped) are printed above the bar, or as plain lines, even when the
bar is turned off.
"""

from __future__ import annotations

from rich.console import Console

from scalerl.forecast.live import LiveForecast

PLAIN_LINES_PER_RUN = 20  # without a terminal: about this many progress lines for a whole run


def plain_interval(total_steps: int) -> int:
    """Steps between two plain progress lines: about PLAIN_LINES_PER_RUN lines per run."""
    return max(1, total_steps // PLAIN_LINES_PER_RUN)


def status_text(train_reward: float | None, val_pass_rate: float | None, forecast_text: str = "") -> str:
    """`reward +0.125  val pass rate 0.300  forecast A 0.412 [0.380, 0.455]` (the parts known)."""
    parts = []
    if train_reward is not None:
        parts.append(f"reward {train_reward:+.3f}")
    if val_pass_rate is not None:
        parts.append(f"val pass rate {val_pass_rate:.3f}")
    if forecast_text:
        parts.append(f"forecast {forecast_text}")
    return "  ".join(parts)


class RunProgress:
    """Progress of one run: a rich bar on a terminal, plain lines without one, nothing when disabled."""

    def __init__(self, total_steps: int, *, enabled: bool = True, start_step: int = 0, console: Console | None = None):
        self._enabled = enabled
        self._total = total_steps
        self._start = start_step
        self._console = console or Console(stderr=True)
        self._plain = not self._console.is_terminal
        self._plain_every = plain_interval(total_steps)
        self._last_plain_step = start_step
        self._progress = None
        self._task_id = None
        self.forecast_text = ""

    def __enter__(self) -> RunProgress:
        if self._enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            # without a terminal the bar is kept (its fields) but never drawn: plain lines instead
            self._progress = Progress(
                TextColumn("step"),
                MofNCompleteColumn(),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[rewards]}"),
                console=self._console,
                disable=self._plain,
            )
            self._progress.start()
            self._task_id = self._progress.add_task("train", total=self._total, completed=self._start, rewards="")
        return self

    def show_forecast(self, text: str) -> None:
        """Text shown after the rewards from the next update on (empty: none)."""
        self.forecast_text = text

    def update(self, step: int, train_reward: float | None, val_pass_rate: float | None) -> None:
        if self._progress is None:
            return
        status = status_text(train_reward, val_pass_rate, self.forecast_text)
        self._progress.update(self._task_id, completed=step, rewards=status)
        if self._plain and (step - self._last_plain_step >= self._plain_every or step >= self._total):
            self._last_plain_step = step
            self._print(f"step {step}/{self._total}  {status}".rstrip())

    def show_row(self, row: dict, last_val_pass_rate: float | None, forecast: LiveForecast | None) -> None:
        """The progress after `row` was logged, with its live forecast when it has one (the
        synchronous trainer and the pipeline's driver both report each row through this)."""
        if forecast is not None:
            self.show_forecast(forecast.short_text())
        self.update(int(row["step"]), row.get("train_reward"), last_val_pass_rate)

    def note(self, message: str) -> None:
        """One line above the bar, or a plain line (also when the bar is turned off)."""
        if self._progress is not None and not self._plain:
            self._progress.console.print(message, markup=False, highlight=False)
        else:
            self._print(message)

    def _print(self, line: str) -> None:
        self._console.print(line, markup=False, highlight=False, soft_wrap=True)

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._progress.stop()
