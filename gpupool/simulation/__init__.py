"""Trace-driven simulation through the decision core, split by what it simulates.

- ``placement``: tasks arrive one at a time and never leave; policies choose nodes (the openb
  trace of the FGD paper, benchmark B2).
- ``queueing``: gang jobs arrive, queue, run and finish in virtual time under ``plan()``
  (the Philly trace, synthetic traces and the what-if, benchmark B3).
"""
