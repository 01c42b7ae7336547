"""scalerl: predictable RL post-training of LLMs.

`scalerl.forecast` fits and extrapolates compute-performance curves (numpy/scipy only).
`scalerl.rl` and `scalerl.train` hold the ScaleRL recipe and trainer (torch, optional extra `train`).
`scalerl.distributed` wires the trainer onto Ray (optional extra `distributed`).
"""

__version__ = "0.1.0"
