"""The REST API (``/api/v1/``): shared pieces; each domain app declares its viewsets in api.py."""
