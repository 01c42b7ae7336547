"""Tasks: prompts with verifiable answers (the built-in arithmetic task, JSONL tasks), verifiers, rollouts."""
