"""Shared pytest configuration. Each test folder adds its own fixtures in its conftest.py."""
