"""Forecasting of RL compute-performance curves (numpy, scipy, pandas; never torch)."""
