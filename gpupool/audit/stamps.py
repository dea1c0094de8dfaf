"""When a record was made, on the pool's clock.

The pool's records (workloads, usage, the budget ledger) are stamped by the loop with its
cluster's clock, which a simulated cluster runs ahead of the wall clock (the demo: an hour a
minute); the audit rows of people's actions are too (``record_audit_event``). A record made
beside them stamped with the wall clock would sit hours away from the records it goes with (a
what-if created at 13:43 and started at 20:43). So every ``created_at`` of these apps, and the
audit rows of the system, default to ``pool_time``: on a real cluster it is the wall clock.
"""

from __future__ import annotations

from datetime import datetime


def pool_time() -> datetime:
    """The pool's clock now (``control.clock.pool_now``): the default of ``created_at``
    fields and of the system's audit rows."""
    from gpupool.control.clock import pool_now  # (the control app's models import audit)

    return pool_now()
