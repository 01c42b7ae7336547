"""The names trackers (TensorBoard, W&B) show for the columns of metrics.jsonl: grouped as TRL
groups its panels, train/..., eval/..., forecast/..."""

from __future__ import annotations

# Column prefix -> tracker group: validation columns under eval/, live forecast under forecast/.
METRIC_GROUPS = (("val_", "eval/"), ("forecast_", "forecast/"))
TRAIN_GROUP = "train/"


def grouped_metric_name(column: str) -> str:
    """The name a tracker shows for a metrics.jsonl column: 'val_pass_rate' -> 'eval/pass_rate',
    'forecast_A' -> 'forecast/A', any other 'loss' -> 'train/loss' (TRL's train/ and eval/ panels)."""
    for prefix, group in METRIC_GROUPS:
        if column.startswith(prefix) and len(column) > len(prefix):
            return group + column[len(prefix) :]
    return TRAIN_GROUP + column
