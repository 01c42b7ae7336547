"""The training progress bar with the live forecast: RunProgress (step, rewards) plus the latest
forecast ceiling A and its interval, e.g. `A 0.412 [0.380, 0.455]` (`A?` while the ceiling is not
identified yet)."""

from __future__ import annotations

from scalerl.train.metrics_log import RunProgress


class ForecastProgress(RunProgress):
    """RunProgress whose text ends with the latest live forecast (set by `show_forecast`)."""

    def __init__(self, total_steps: int, *, enabled: bool = True, start_step: int = 0):
        super().__init__(total_steps, enabled=enabled, start_step=start_step)
        self.forecast_text = ""

    def show_forecast(self, text: str) -> None:
        """Text shown after the rewards from the next update on (empty: none)."""
        self.forecast_text = text

    def update(self, step: int, train_reward: float | None, val_pass_rate: float | None) -> None:
        super().update(step, train_reward, val_pass_rate)
        if self._progress is None or not self.forecast_text:
            return
        task = next(task for task in self._progress.tasks if task.id == self._task_id)
        rewards = task.fields.get("rewards", "")
        self._progress.update(self._task_id, rewards=f"{rewards}  forecast {self.forecast_text}".strip())
