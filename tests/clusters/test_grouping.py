"""Pods become workload requests by the gpupool.io/* contract; malformed values are named."""

from __future__ import annotations

import pytest
from cluster_builders import NOW, pod, toleration

from gpupool.clusters.base import PodFacts, PodKey
from gpupool.clusters.grouping import (
    AnnotationError,
    InvalidWorkload,
    WorkloadKey,
    WorkloadRequest,
    group_pods,
    group_workload,
    parse_duration,
    reference_errors,
    workload_key,
)


def one(pods: list[PodFacts], now: float = NOW) -> WorkloadRequest | InvalidWorkload:
    """The single workload the pods form."""
    keys = {workload_key(p) for p in pods}
    assert len(keys) == 1
    return group_workload(keys.pop(), pods, now)


def valid(pods: list[PodFacts]) -> WorkloadRequest:
    result = one(pods)
    assert isinstance(result, WorkloadRequest), result
    return result


def errors_of(pods: list[PodFacts]) -> tuple[str, ...]:
    result = one(pods)
    assert isinstance(result, InvalidWorkload), result
    return result.errors


def test_pods_sharing_a_workload_label_form_one_gang() -> None:
    pods = [pod(f"job-{i}", workload="job", gpus=8, annotations={"gpupool.io/min-member": "4"})
            for i in range(4)]  # fmt: skip
    request = valid(pods)
    assert request.key == WorkloadKey("team-a", "job")
    assert request.queue == "train"
    assert request.min_member == 4
    assert [s.count for s in request.pod_sets] == [4]
    assert request.pod_sets[0].gpus == 8
    assert request.missing_pods == 0


def test_a_pod_without_a_workload_label_is_a_workload_of_its_own() -> None:
    grouping = group_pods([pod("lonely-a", gpus=1), pod("lonely-b", gpus=1)], NOW)
    assert [w.key.name for w in grouping.workloads] == ["lonely-a", "lonely-b"]


def test_workloads_of_the_same_name_in_two_namespaces_are_two_workloads() -> None:
    grouping = group_pods(
        [pod("a", workload="w", namespace="nlp"), pod("b", workload="w", namespace="cv")], NOW
    )
    assert [str(w.key) for w in grouping.workloads] == ["cv/w", "nlp/w"]


def test_pods_with_different_requests_or_constraints_form_separate_pod_sets() -> None:
    pods = [
        pod("w-launcher", workload="w", gpus=0, cpu="2"),
        pod("w-worker-0", workload="w", gpus=8),
        pod("w-worker-1", workload="w", gpus=8),
        pod("w-worker-2", workload="w", gpus=8, tolerations=[toleration("x", "Exists")]),
    ]
    request = valid(pods)
    shapes = [(s.count, s.gpus, s.cpu_milli) for s in request.pod_sets]
    assert shapes == [(1, 0, 2000), (2, 8, 1000), (1, 8, 1000)]


def test_only_live_pods_ask_for_capacity_and_ended_ones_are_listed_apart() -> None:
    pods = [
        pod("w-0", workload="w", gpus=1, phase="Succeeded"),
        pod("w-1", workload="w", gpus=1, phase="Failed"),
        pod("w-2", workload="w", gpus=1, deleting=True, phase="Running", node="n1"),
        pod("w-3", workload="w", gpus=1),
    ]
    request = valid(pods)
    assert request.live_pods == 1
    assert request.succeeded == (PodKey("team-a", "w-0"),)
    assert request.failed == (PodKey("team-a", "w-1"),)
    assert request.terminating == (PodKey("team-a", "w-2"),)


def test_a_minimum_above_the_pods_waits_for_the_missing_pods() -> None:
    request = valid([pod("w-0", workload="w", annotations={"gpupool.io/min-member": "3"})])
    assert request.missing_pods == 2


def test_all_annotations_are_read() -> None:
    annotations = {
        "gpupool.io/priority-class": "urgent",
        "gpupool.io/protected-runtime": "1h30m",
        "gpupool.io/expected-runtime": "7200",
        "gpupool.io/topology": "domain",
    }
    request = valid([pod("w-0", workload="w", annotations=annotations)])
    assert request.priority_class == "urgent"
    assert request.protected_runtime_s == 5400.0
    assert request.expected_runtime_s == 7200.0
    assert request.topology == "domain"


def test_the_latest_checkpoint_over_the_pods_counts() -> None:
    stamps = ["2026-11-29T09:10:00Z", "2026-11-29T11:30:00+02:00"]
    pods = [
        pod(f"w-{i}", workload="w", annotations={"gpupool.io/last-checkpoint": stamp})
        for i, stamp in enumerate(stamps)
    ]
    pods.append(pod("w-2", workload="w"))
    assert valid(pods).last_checkpoint_at == NOW - 30 * 60


def test_a_shared_gpu_pod_names_its_fraction() -> None:
    request = valid([pod("nb", gpus=1, annotations={"gpupool.io/gpu-milli": "470"})])
    assert request.pod_sets[0].gpu_milli == 470


def test_a_mig_pod_asks_for_its_profile() -> None:
    request = valid([pod("mig", mig={"3g.40gb": 2})])
    assert (request.pod_sets[0].mig_profile, request.pod_sets[0].gpus) == ("3g.40gb", 2)


@pytest.mark.parametrize(
    ("origin_options", "origin"),
    [
        ({"owner": ("Job", "train")}, "controller"),
        ({"labels": {"app.kubernetes.io/managed-by": "gpupool"}}, "gpupool"),
        ({}, "bare"),
    ],
    ids=["a job's pod comes from a controller", "a pod gpupool made is gpupool's", "a bare pod"],
)
def test_the_origin_says_who_recreates_an_evicted_pod(
    origin_options: dict[str, object], origin: str
) -> None:
    assert valid([pod("p", **origin_options)]).origin == origin


# (case, annotations, error fragment naming the annotation and value)
MALFORMED = [
    ("a minimum that is not a number", {"gpupool.io/min-member": "four"},
     'gpupool.io/min-member: "four" is not a whole number'),
    ("a minimum below one", {"gpupool.io/min-member": "0"},
     'gpupool.io/min-member: "0" is outside 1..10000'),
    ("an absurd minimum", {"gpupool.io/min-member": "99999999999999999999"},
     "gpupool.io/min-member: \"99999999999999999999\" is outside"),
    ("a negative minimum", {"gpupool.io/min-member": "-2"},
     'gpupool.io/min-member: "-2" is not a whole number'),
    ("an unknown topology word", {"gpupool.io/topology": "rack"},
     'gpupool.io/topology: "rack" is not one of domain, preferred'),
    ("a protected runtime in days", {"gpupool.io/protected-runtime": "2d"},
     'gpupool.io/protected-runtime: "2d" is not a duration'),
    ("a negative protected runtime", {"gpupool.io/protected-runtime": "-1h"},
     'gpupool.io/protected-runtime: "-1h" is not a duration'),
    ("an absurd protected runtime", {"gpupool.io/protected-runtime": "100000h"},
     'gpupool.io/protected-runtime: "100000h" is longer than 366 days'),
    ("an expected runtime of zero", {"gpupool.io/expected-runtime": "0s"},
     'gpupool.io/expected-runtime: "0s" is zero'),
    ("a priority class that is no name", {"gpupool.io/priority-class": "Very Urgent!"},
     'gpupool.io/priority-class: "Very Urgent!" is not a valid name'),
    ("a checkpoint that is no time", {"gpupool.io/last-checkpoint": "yesterday"},
     'gpupool.io/last-checkpoint: "yesterday" is not an RFC 3339 time'),
    ("a checkpoint without an offset", {"gpupool.io/last-checkpoint": "2026-11-29T09:00:00"},
     'gpupool.io/last-checkpoint: "2026-11-29T09:00:00" is not an RFC 3339 time'),
    ("a checkpoint in month 13", {"gpupool.io/last-checkpoint": "2026-13-01T09:00:00Z"},
     'gpupool.io/last-checkpoint: "2026-13-01T09:00:00Z" is not a valid time'),
    ("a checkpoint in the future", {"gpupool.io/last-checkpoint": "2026-11-30T10:00:00Z"},
     'gpupool.io/last-checkpoint: "2026-11-30T10:00:00Z" is in the future'),
    ("a milli-GPU above one GPU", {"gpupool.io/gpu-milli": "1500"},
     'gpupool.io/gpu-milli: "1500" is outside 1..1000'),
    ("a milli-GPU that is no number", {"gpupool.io/gpu-milli": "half"},
     'gpupool.io/gpu-milli: "half" is not a whole number'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_a_malformed_annotation_makes_the_workload_invalid_and_names_it(
    annotations: dict[str, str], fragment: str
) -> None:
    errors = errors_of([pod("w-0", workload="w", gpus=1, annotations=annotations)])
    assert any(fragment in error for error in errors), errors


def test_a_missing_queue_label_is_named() -> None:
    assert errors_of([pod("p", queue=None)]) == ("label gpupool.io/queue is missing",)


def test_pods_that_disagree_on_an_annotation_are_invalid() -> None:
    pods = [
        pod("w-0", workload="w", annotations={"gpupool.io/topology": "domain"}),
        pod("w-1", workload="w", annotations={"gpupool.io/topology": "preferred"}),
    ]
    (error,) = errors_of(pods)
    assert error == 'the pods disagree on gpupool.io/topology: "domain" on w-0, "preferred" on w-1'


def test_a_milli_gpu_needs_exactly_one_gpu() -> None:
    (error,) = errors_of([pod("p", gpus=2, annotations={"gpupool.io/gpu-milli": "500"})])
    assert error == (
        'pod p: gpupool.io/gpu-milli: "500" needs nvidia.com/gpu: 1 (the pod asks for 2)'
    )


def test_a_pod_asking_two_gpu_resources_is_invalid() -> None:
    (error,) = errors_of([pod("p", gpus=1, mig={"1g.10gb": 1})])
    assert "asks for nvidia.com/gpu and nvidia.com/mig-1g.10gb" in error


def test_an_absurd_gpu_count_is_invalid() -> None:
    (error,) = errors_of([pod("p", gpus=100_000)])
    assert error == "pod p asks for 100000 GPUs, more than 1024"


def test_one_malformed_workload_never_stops_the_others() -> None:
    pods = [
        pod("bad", annotations={"gpupool.io/min-member": "many"}),
        pod("good", gpus=1),
        pod("worse", annotations={"gpupool.io/topology": "\x00" * 10_000}),
    ]
    grouping = group_pods(pods, NOW)
    assert [w.key.name for w in grouping.workloads] == ["good"]
    assert [w.key.name for w in grouping.invalid] == ["bad", "worse"]
    assert "longer than 256 characters" in grouping.invalid[1].errors[0]


def test_pods_of_other_schedulers_are_no_workloads() -> None:
    assert group_pods([pod("web", scheduler="default-scheduler")], NOW).workloads == ()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3600", 3600.0), ("1.5", 1.5), ("2h", 7200.0), ("1h30m", 5400.0), ("90s", 90.0),
     ("500ms", 0.5), ("1.5h", 5400.0), ("0", 0.0), ("0s", 0.0)],
    ids=lambda value: str(value),
)  # fmt: skip
def test_durations_are_seconds_or_go_durations(text: str, seconds: float) -> None:
    assert parse_duration("k", text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "h", "1x", "1h 30m", "1e3", "nan", "inf", "1.h.2"])
def test_other_duration_forms_are_refused(text: str) -> None:
    with pytest.raises(AnnotationError):
        parse_duration("k", text)


def test_reference_errors_check_queue_tenant_and_class_against_the_database() -> None:
    request = valid([pod("p", namespace="nlp", queue="vision-train",
                         annotations={"gpupool.io/priority-class": "vip"})])  # fmt: skip
    errors = reference_errors(
        request,
        leaf_queue_tenants={"vision-train": "vision", "nlp-train": "nlp"},
        namespace_tenants={"nlp": "nlp"},
        priority_classes={"normal", "urgent"},
    )
    assert errors == (
        'gpupool.io/queue: "vision-train" belongs to tenant vision, not to nlp, '
        "which owns namespace nlp",
        'gpupool.io/priority-class: "vip" is not a priority class',
    )


def test_reference_errors_name_an_unknown_queue_and_an_unowned_namespace() -> None:
    unknown = valid([pod("p", namespace="nlp", queue="nope")])
    unowned = valid([pod("q", namespace="scratch", queue="nlp-train")])
    tables = {
        "leaf_queue_tenants": {"nlp-train": "nlp"},
        "namespace_tenants": {"nlp": "nlp"},
        "priority_classes": {"normal"},
    }
    assert reference_errors(unknown, **tables) == ('gpupool.io/queue: "nope" is not a leaf queue',)
    assert reference_errors(unowned, **tables) == (
        "namespace scratch belongs to no tenant, so it may use no queue",
    )
    assert reference_errors(valid([pod("r", namespace="nlp", queue="nlp-train")]), **tables) == ()
