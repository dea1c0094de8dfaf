"""Flavors, nodes and their GPUs."""
