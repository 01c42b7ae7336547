"""Rendering of forecasts and studies: console tables, figures and the HTML report (torch-free)."""
