"""Multi-tenant queueing in virtual time: the event replay over ``plan()``, the Philly and
synthetic traces, their metrics (B3), and the what-if replay of recorded demand."""
