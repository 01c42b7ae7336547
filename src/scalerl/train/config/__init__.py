"""A run's configuration: the one validated `TrainConfig` (train_config), its files and `--set` keys
(config_io, config_keys), the presets, TRL's key names (trl_config) and the generator settings
read from it (generation_settings). Imports no other room of scalerl.train but records.
"""
