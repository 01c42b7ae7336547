"""What refuses or stops a run cleanly: prompts too long for the model's context (context_check),
a step's non-finite numbers or out-of-bounds update and what the run then does, skip or stop
(divergence_guard), and Ctrl-C or SIGTERM as a request to stop at the next safe point (interrupt).
"""
