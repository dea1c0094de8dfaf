"""``gpupool``, the command-line client for the people who run jobs: it talks to the REST API
with a token and imports nothing from Django (the server's code is not needed to use it)."""
