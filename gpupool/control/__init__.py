"""Scheduling cycle records and the health endpoint."""
