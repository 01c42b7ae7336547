"""What refuses or stops a run cleanly: prompts too long for the model's context (context_check),
non-finite numbers in a step (finite_checks) and what the run then does, skip or stop
(divergence_guard), and Ctrl-C or SIGTERM as a request to stop at the next safe point (interrupt).
"""
