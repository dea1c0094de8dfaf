"""Bulk loading: many rows at once, through COPY on PostgreSQL and batched inserts elsewhere.

``actions.py`` holds every bulk write (the roll-up's inserts and the B5 generator's loader),
so that domain writes stay in actions; ``year.py`` generates the seeded year of B5 as plain
rows, without touching the database.
"""
