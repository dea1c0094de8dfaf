"""Subcommands of ``manage.py gpupool``: one module each, discovered by name.

A module here defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(options, stdout, stderr) -> int`` (the exit status). Its command name is the module
name with ``_`` turned into ``-`` (``seed_demo`` -> ``seed-demo``).
"""
