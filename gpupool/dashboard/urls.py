"""The dashboard's routes, mounted at ``/`` (namespace ``dashboard``)."""

from django.contrib.auth.views import LogoutView
from django.urls import path

from gpupool.dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.DashboardLoginView.as_view(), name="login"),
    # GET asks (a "Log out" button, or a link to log in once logged out); POST logs out.
    path(
        "logout/",
        LogoutView.as_view(
            http_method_names=["get", "post", "options"], template_name="dashboard/logout.html"
        ),
        name="logout",
    ),
    path("overview/", views.overview, name="overview"),
    path("workloads/", views.workloads, name="workloads"),
    path("workloads/dry-run/", views.workload_dry_run, name="workload-dry-run"),
    path("workloads/submit/", views.workload_submit, name="workload-submit"),
    path("workloads/<str:namespace>/<str:name>/", views.workload_detail, name="workload"),
    path(
        "workloads/<str:namespace>/<str:name>/cancel/",
        views.workload_cancel,
        name="workload-cancel",
    ),
    path("queues/", views.queues, name="queues"),
    path("cost/", views.cost, name="cost"),
    path("utilization/", views.utilization, name="utilization"),
    path("preemptions/", views.preemptions, name="preemptions"),
    path("fragmentation/", views.fragmentation, name="fragmentation"),
    path("cluster/", views.cluster, name="cluster"),
    path("cluster/nodes/<str:name>/cordon/", views.cluster_cordon, name="cluster-cordon"),
    path("cluster/nodes/<str:name>/drain/", views.cluster_drain, name="cluster-drain"),
    path(
        "cluster/nodes/<str:name>/gpu-health/",
        views.cluster_gpu_health,
        name="cluster-gpu-health",
    ),
    path("requests/", views.requests_page, name="requests"),
    path("requests/<int:pk>/", views.request_detail, name="request"),
    path("requests/<int:pk>/edit/", views.request_edit, name="request-edit"),
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/<int:pk>/", views.approval_detail, name="approval"),
    path("approvals/<int:pk>/what-if/", views.approval_what_if, name="approval-what-if"),
    path("audit/", views.audit, name="audit"),
]
