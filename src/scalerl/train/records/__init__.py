"""What a run writes as it goes: the metrics log (metrics_log, metric_groups), its Weights & Biases
mirror (wandb_log), the console progress line (progress) and the crash-safe write every file of a
run goes through (safe_writes). Imports no other room of scalerl.train.
"""
