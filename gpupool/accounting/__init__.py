"""Usage intervals and preemption events."""
