"""The agent loop: a run, its steps, argument offload, prompts."""
