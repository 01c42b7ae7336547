"""The renderers: every measured table and figure of the docs is a function of a results JSON here.

`pages.py` writes docs/results.md and fills the marked blocks of README.md and docs/*.md
(`python -m benchmarks.render [--check]`); `tables.py`, `forecast.py`, `forecast_checks.py`, `study_checks.py`,
`pipeline_scale.py` and `throughput.py` hold one small renderer per area; `provenance.py` marks
the figures of results not tied to a clean commit. Nothing here measures.
"""
