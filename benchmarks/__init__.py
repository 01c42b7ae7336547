"""The benchmarks: scripts that measure and write benchmarks/results/*.json, run from the
repository root as `python -m benchmarks.<name>` (list and costs in benchmarks/README.md)."""
