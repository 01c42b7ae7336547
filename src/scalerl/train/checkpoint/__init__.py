"""Checkpoints: saving, loading and pruning them (save_load), their folder layout (layout), the
manifest of checksums (manifest), verification before anything is loaded (verify), resuming a run
from one (resume) and the one-writer lock on a run folder (run_lock).
"""
