"""Models, tasks, generation and the synchronous trainer (needs the `train` extra: torch, transformers).

Importing this package is cheap: nothing heavy is imported here. Import the submodules you need:
`scalerl.tasks.rollout` (data types, no torch), `scalerl.models.policy`, `scalerl.models.forward`,
`scalerl.tasks.types`, `scalerl.train.generation`, `scalerl.train.warmstart`, ...
"""
