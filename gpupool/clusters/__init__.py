"""The cluster side of gpupool: backends that talk to a cluster and turn it into plain facts.

``base`` holds the facts and the ``ClusterBackend`` protocol; ``kubernetes`` implements it with
the official client; ``matching``, ``grouping`` and ``inventory`` are pure helpers the control
loop uses to turn the facts into a snapshot. Nothing here imports Django.
"""
