"""Trace-driven simulation through the decision core, split by what it simulates.

- ``placement``: tasks arrive one at a time and never leave; policies choose nodes (the openb
  trace of the FGD paper, benchmark B2).
- ``queueing``: gang jobs arrive, queue, run and finish in virtual time under ``plan()``
  (the Philly trace, synthetic traces and the what-if, benchmark B3).

Beside them: ``datasets`` (where the public traces are found), ``report`` (the tables and
HTML reports of both; figures from ``gpupool.dashboard.charts``) and ``scale_pool`` (the
seeded pool of benchmark B1, the core's input at scale).
"""
