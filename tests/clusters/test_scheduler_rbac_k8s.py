"""The scheduler's identity on the plane: deploy/kubernetes/rbac.yaml, authorized by RBAC.

Every Kubernetes backend test and the control loop's plane tests run the backend with this
identity (``k8s_scheduler_config``), so what they exercise is allowed by the role an operator
installs. These tests make sure that holds for the right reason: the plane really refuses
what the role does not grant (an API server that allowed everything would pass them all).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from hack import k8s_plane

pytestmark = pytest.mark.k8s


def test_the_plane_refuses_the_scheduler_what_its_role_does_not_grant(
    k8s_scheduler_config: Any,
) -> None:
    api = client.ApiClient(k8s_scheduler_config)
    try:
        core = client.CoreV1Api(api)
        assert core.list_node(limit=1).items  # granted: nodes are listed
        with pytest.raises(ApiException) as secrets:
            core.list_secret_for_all_namespaces(limit=1)
        assert secrets.value.status == 403
        with pytest.raises(ApiException) as namespace:
            core.create_namespace({"metadata": {"name": "the-scheduler-may-not"}})
        assert namespace.value.status == 403
    finally:
        api.close()


def test_the_scheduler_acts_as_the_manifests_service_account(k8s_scheduler_config: Any) -> None:
    documents = yaml.safe_load_all(k8s_plane.RBAC_MANIFEST.read_text())
    account = next(d for d in documents if d["kind"] == "ServiceAccount")
    expected = (
        f"system:serviceaccount:{account['metadata']['namespace']}:{account['metadata']['name']}"
    )
    api = client.ApiClient(k8s_scheduler_config)
    try:
        review = client.AuthenticationV1Api(api).create_self_subject_review({})
    finally:
        api.close()
    assert review.status.user_info.username == expected
