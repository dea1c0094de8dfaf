"""Tenants, their members and site-wide roles."""
