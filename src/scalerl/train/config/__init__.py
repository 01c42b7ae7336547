"""A run's configuration: the one validated `TrainConfig` (train_config) and its sections
(sampling_config, optimiser_config, pipeline_config), its keys (key_paths, config_keys), values
(field_values), `--set` overrides (overrides) and files (config_io), the presets, TRL's key names
(trl_config) and the config resolved for the steps (step_recipe). Imports no other room
of scalerl.train but records.
"""
