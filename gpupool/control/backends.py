"""Which cluster backend the loop runs on: a table of factories, chosen by a setting.

``GPUPOOL_CLUSTER`` names the backend (``simulated``, the embedded default, or
``kubernetes``); ``GPUPOOL_CLUSTER_BACKENDS`` maps each name to the dotted path of a function
that takes no argument and returns a ``ClusterBackend``. The loop only ever sees the protocol:
adding a backend is a line in the table, never a branch in the loop (STYLE 11).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from gpupool.clusters.base import ClusterBackend


def kubernetes_backend() -> ClusterBackend:
    """The Kubernetes backend on ``GPUPOOL_KUBECONFIG`` (else $KUBECONFIG or in-cluster),
    within the client limit ``GPUPOOL_KUBE_API_QPS`` / ``GPUPOOL_KUBE_API_BURST``, with
    ``GPUPOOL_KUBE_BIND_WORKERS`` bindings in flight at most."""
    from gpupool.clusters.kubernetes import KubernetesBackend

    qps = settings.GPUPOOL_KUBE_API_QPS
    return KubernetesBackend.connect(
        settings.GPUPOOL_KUBECONFIG or None,
        qps=qps or None,
        burst=settings.GPUPOOL_KUBE_API_BURST if qps else None,
        bind_workers=settings.GPUPOOL_KUBE_BIND_WORKERS,
    )


def backend_from_settings() -> ClusterBackend:
    """The backend ``GPUPOOL_CLUSTER`` names, built by its factory."""
    name = settings.GPUPOOL_CLUSTER
    factories: dict[str, str] = settings.GPUPOOL_CLUSTER_BACKENDS
    path = factories.get(name)
    if path is None:
        raise ImproperlyConfigured(
            f"GPUPOOL_CLUSTER={name!r} has no factory in GPUPOOL_CLUSTER_BACKENDS "
            f"(known: {', '.join(sorted(factories))})"
        )
    try:
        factory = import_string(path)
    except ImportError as error:
        raise ImproperlyConfigured(
            f"the {name} cluster backend's factory {path} cannot be imported: {error}"
        ) from error
    backend: ClusterBackend = factory()
    return backend
