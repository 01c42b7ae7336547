"""Bridges from other training libraries to scalerl's forecaster.

`scalerl.integrations.trl_callback.ScaleRLForecastCallback`: a transformers `TrainerCallback`
that forecasts the ceiling of a TRL (or any transformers Trainer) run live. Importing this package
imports nothing heavy; the callback module needs `transformers`.
"""
