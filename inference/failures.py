"""The failure classes a sample row can carry that are errors of the run, not of the model's
answers: they count against max_error_rate (inference/finish.py), whichever solver wrote them."""

TOO_LONG = "too_long"
"""The prompt leaves no room for the answer (single call), or grew past the context (an agent)."""
ENGINE_ERROR = "engine_error"
"""The engine or its grammar failed on the sample."""
EMPTY_OUTPUT = "empty_output"
ERROR_CLASSES = (TOO_LONG, ENGINE_ERROR, EMPTY_OUTPUT)
