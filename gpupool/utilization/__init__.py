"""GPU use against allocation: utilisation sources (Prometheus over DCGM, simulated), the
activity of each pod and the failing GPUs they reveal (docs/utilization.md)."""
