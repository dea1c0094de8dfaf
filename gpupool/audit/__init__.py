"""The audit log of policy changes."""
