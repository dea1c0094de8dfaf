"""Workloads, their pod sets, placements and state transitions."""
