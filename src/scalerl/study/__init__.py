"""Ablation and leave-one-out studies: knobs, plans, runs and their analysis.

Importing this package is cheap and torch-free; the run engine imports the trainer when it runs.
"""
