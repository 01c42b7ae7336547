"""The project's exception types: the CLI turns any ScaleRLError into one `error: ...` line."""


class ScaleRLError(Exception):
    """Base class of every error scalerl raises on purpose."""


class InputError(ScaleRLError):
    """Bad input data: missing file or column, NaN, non-monotone compute, corrupt log."""


class FitError(ScaleRLError):
    """The data cannot support a fit (too few points, flat run, optimiser failure)."""


class ConfigError(ScaleRLError):
    """A bad configuration value; the message names the field."""


class OutputError(ScaleRLError):
    """A file could not be written (disk full, no permission); the message names the path."""


class NoForecastError(FitError):
    """A run with nothing to forecast (flat, decreasing, collapsed before it rose, too few points):
    `verdict` is forecast.verdict's Verdict on it, and the message is its text."""

    def __init__(self, verdict) -> None:
        super().__init__(verdict.text)
        self.verdict = verdict
