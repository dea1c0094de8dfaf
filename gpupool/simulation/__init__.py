"""Trace-driven simulation: replay public GPU-cluster traces through placement policies."""
