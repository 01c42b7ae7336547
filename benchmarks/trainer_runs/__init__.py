"""The two trainers benchmarks/trainer_throughput.py times, each run in a child process of its own:
what both share (matched_setup: the starting model, scalerl configured to do TRL's work), what is
measured of each (measures: tokens/s and steps/s over the timed steps, peak RSS, a profile's
phases), scalerl's run (scalerl_run) and TRL's GRPOTrainer run (trl_run).
"""
