"""The Kubernetes backend: informers for nodes, pods and Jobs, gang binding, eviction, Events.

Talks to the API server with the official ``kubernetes`` client, reading and writing raw JSON
(``_preload_content=False``): the generated model classes are slow to build for thousands of
pods and cannot read some answers back (a Binding's is a Status).

Four informers (``informer.Informer``) keep the cache: nodes; pods with
``spec.schedulerName: gpupool`` (ours, in full); the other schedulers' pods that hold
capacity (bound, not ended: field selector
``spec.schedulerName!=gpupool,spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed``),
of which only the node and the requests are kept and summed per node; and the batch/v1 Jobs
whose pod template asks for gpupool (the API has no field selector for that: every Job is
watched, the others are dropped as they arrive), as ``JobFacts`` -- so the loop knows whether
a Job retries a failed pod or has given up.

Errors, as the API documents them (``api-concepts``, ``api-eviction``): 5xx, connection
errors and the API server's own 429 (priority and fairness, an unready watch cache) are
retried a bounded number of times, after the ``Retry-After`` the server asks for or an
exponential back-off; a 429 from a PodDisruptionBudget is not retried but reported
(``refused``); a 409 is resolved per operation: a re-bind to the node the pod is already on is
success, an Event or pod that already exists is reused.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, NamedTuple, TypeVar

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from gpupool.clusters import api_objects
from gpupool.clusters.base import (
    CORDONED_BY_GPUPOOL,
    SCHEDULER_NAME,
    Allowance,
    Arrivals,
    BindOutcome,
    ClusterDelta,
    ClusterUnavailable,
    ClusterView,
    EventOutcome,
    EventRequest,
    EventType,
    EvictOutcome,
    JobFacts,
    JobKey,
    JobSuspendResult,
    NewPod,
    NodeCordonResult,
    NodeFacts,
    PodBinding,
    PodFacts,
    PodKey,
    PodRef,
    PodResult,
    PodsOutcome,
    ResourceAmounts,
    apply_usage_changes,
)
from gpupool.clusters.informer import (
    Expired,
    Informer,
    JsonObject,
    WatchFailed,
    WatchStream,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
RETRIABLE_STATUSES = frozenset({500, 502, 503, 504})
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
CORDON_ATTEMPTS = 4  # a node's cordon read and written again after a conflict, at most
WATCH_READ_MARGIN_S = 60  # a watch silent this long past its server timeout is dead


# --- client-side rate limit ----------------------------------------------------------------


class RateLimiter:
    """A token bucket over every request a client starts, as client-go's client-side limit:
    ``qps`` requests a second on average, ``burst`` at once (``--kube-api-qps`` and
    ``--kube-api-burst`` of Kubernetes' own components). A caller beyond the bucket waits for
    its turn; turns are handed out in the order they are asked for."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a rate limit needs qps > 0 and burst >= 1, not {qps}, {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._updated = clock()

    def wait_time(self) -> float:
        """Take a token (possibly one not refilled yet) and say how long to wait for it."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
            self._updated = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def full_at(self) -> float:
        """When (on its clock) the bucket will be full if no request starts before: now or
        earlier when it is full already. Requests not started by then are turns lost."""
        with self._lock:
            now = self._clock()
            tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
            return now + (self.burst - tokens) / self.qps

    def acquire(self) -> None:
        """Wait until this request may start."""
        delay = self.wait_time()
        if delay > 0:
            self._sleep(delay)

    def wrap(self, request: Callable[..., T]) -> Callable[..., T]:
        """``request`` that first waits for a token."""

        def limited(*args: Any, **kwargs: Any) -> T:
            self.acquire()
            return request(*args, **kwargs)

        return limited


# --- retries --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries of one API call (attempts in all, delays between them)."""

    attempts: int = 4
    initial_delay_s: float = 0.1
    max_delay_s: float = 2.0
    max_retry_after_s: float = 5.0
    request_timeout_s: tuple[float, float] = (5.0, 30.0)  # connect, read


def status_body(exc: ApiException) -> dict[str, Any]:
    """The ``Status`` object an API error carries, or {}."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def status_message(exc: ApiException) -> str:
    """The API's message for an error (with the causes a disruption budget gives)."""
    body = status_body(exc)
    message = str(body.get("message") or exc.reason or f"HTTP {exc.status}")
    causes = [
        str(c.get("message"))
        for c in (body.get("details") or {}).get("causes") or ()
        if isinstance(c, dict) and c.get("message")
    ]
    return "; ".join([message, *causes]) if causes else message


def is_budget_refusal(exc: ApiException) -> bool:
    """Whether a 429 comes from a PodDisruptionBudget (not from the API server's load)."""
    if exc.status != 429:
        return False
    causes = (status_body(exc).get("details") or {}).get("causes") or ()
    # A StatusCause's Type is spelled "reason" in JSON.
    return any(isinstance(c, dict) and c.get("reason") == DISRUPTION_BUDGET_CAUSE for c in causes)


def retry_after_s(exc: ApiException) -> float | None:
    """The server's ``Retry-After`` in seconds, if it sent one."""
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def is_retriable(exc: BaseException) -> bool:
    """Whether a failed call is worth repeating: 5xx, the server's own 429, no connection."""
    if isinstance(exc, ApiException):
        if exc.status == 429:
            return not is_budget_refusal(exc)
        if exc.status in RETRIABLE_STATUSES:
            # A pod under several budgets is answered 500 every time.
            return "more than one PodDisruptionBudget" not in (exc.body or "")
        return bool(exc.status == 0)  # the client could not reach the server
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError)


def call_with_retries(
    call: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> T:
    """``call()``, repeated on retriable failures up to ``policy.attempts`` times in all."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return call()
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            if attempt == policy.attempts or not is_retriable(exc):
                raise
            delay = min(policy.max_delay_s, policy.initial_delay_s * 2 ** (attempt - 1))
            if isinstance(exc, ApiException):
                asked = retry_after_s(exc)
                if asked is not None:
                    delay = min(max(asked, delay), policy.max_retry_after_s)
            logger.info("kubernetes: retrying in %.2f s after %s", delay, _describe(exc))
            sleep(delay)
    raise AssertionError("unreachable")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {status_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


def _consume(response: Any) -> None:
    """Read an answer we do not need to the end, so that its connection goes back to the pool
    (``_preload_content=False`` leaves it checked out: the next request would open a new TLS
    connection)."""
    response.read()
    response.release_conn()


def _json(response: Any) -> JsonObject:
    data = json.loads(response.data or b"{}")
    if not isinstance(data, dict):
        raise ValueError("the API answered something other than an object")
    return data


# --- list and watch -------------------------------------------------------------------------


class _RawWatch:
    """One watch connection read line by line (each line one JSON event)."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def __enter__(self) -> _RawWatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._response.release_conn()

    def events(self) -> Iterator[JsonObject]:
        """Decoded events as they arrive; connection errors become ``WatchFailed``."""
        pending = b""
        try:
            for chunk in self._response.stream(None, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = json.loads(line)
                        if isinstance(event, dict):
                            yield event
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise WatchFailed(f"watch connection lost: {exc}") from exc

    def abort(self) -> None:
        """Shut the socket down so that a blocked read returns."""
        try:
            self._response.shutdown()
        except (AttributeError, OSError):
            self._response.close()


class _ApiSource:
    """List and watch one resource through a generated ``list_*`` method of the client."""

    def __init__(
        self, list_call: Callable[..., Any], field_selector: str, policy: RetryPolicy
    ) -> None:
        self._list = list_call
        self._field_selector = field_selector
        self._policy = policy

    def _request(self, call: Callable[[], Any]) -> Any:
        try:
            return call_with_retries(call, self._policy)
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(status_message(exc)) from exc
            raise WatchFailed(_describe(exc), retry_after_s(exc)) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise WatchFailed(_describe(exc)) from exc

    def list_page(self, limit: int, continue_token: str | None) -> JsonObject:
        """One page of a consistent list."""
        kwargs: dict[str, Any] = {"limit": limit, "_preload_content": False}
        if self._field_selector:
            kwargs["field_selector"] = self._field_selector
        if continue_token:
            kwargs["_continue"] = continue_token
        kwargs["_request_timeout"] = (self._policy.request_timeout_s[0], 120.0)
        return _json(self._request(lambda: self._list(**kwargs)))

    def watch(self, resource_version: str, timeout_s: int) -> WatchStream:
        """A watch from ``resource_version`` with bookmarks; the server ends it in timeout_s."""
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout_s,
            "_preload_content": False,
            "_request_timeout": (
                self._policy.request_timeout_s[0],
                float(timeout_s + WATCH_READ_MARGIN_S),
            ),
        }
        if self._field_selector:
            kwargs["field_selector"] = self._field_selector
        response = self._request(lambda: self._list(**kwargs))
        return _RawWatch(response)


def _decode_node(obj: JsonObject) -> tuple[str, NodeFacts | None]:
    facts = api_objects.node_facts(obj)
    return facts.name, facts


def _decode_pod(obj: JsonObject) -> tuple[PodKey, PodFacts | None]:
    facts = api_objects.pod_facts(obj)
    return facts.key, facts


def _job_decoder(scheduler: str) -> Callable[[JsonObject], tuple[JobKey, JobFacts | None]]:
    def decode(obj: JsonObject) -> tuple[JobKey, JobFacts | None]:
        return api_objects.job_key_of(obj), api_objects.job_facts(obj, scheduler)

    return decode


def _decode_foreign(obj: JsonObject) -> tuple[PodKey, tuple[str, ResourceAmounts] | None]:
    return PodKey(*api_objects.pod_key_of(obj)), api_objects.foreign_pod_usage(obj)


# --- events ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Recorded:
    name: str
    count: int
    sent_at: float


class _EventRecorder:
    """core/v1 Events on pods, one per (pod, reason, type, message), counted when repeated.

    The Event's name is derived from what it says, so that after a restart the same
    explanation finds its Event again (409 AlreadyExists, then its count goes up) instead of
    adding a second one. A repeat within ``refresh_s`` costs no API call at all.
    """

    def __init__(
        self,
        core: Any,
        policy: RetryPolicy,
        clock: Callable[[], float],
        instance: str,
        refresh_s: float,
        component: str = SCHEDULER_NAME,
    ) -> None:
        self._core = core
        self._policy = policy
        self._clock = clock
        self._instance = instance[:128]
        self._refresh_s = refresh_s
        self._component = component
        self._recorded: dict[PodKey, dict[str, _Recorded]] = {}

    def forget(self, pods: Sequence[PodKey]) -> None:
        """Drop what is remembered of pods that are gone."""
        for key in pods:
            self._recorded.pop(key, None)

    def record(self, pod: PodRef, reason: str, message: str, event_type: str) -> EventOutcome:
        """Create the Event, or count one more of it; nothing when just sent."""
        message = message[: api_objects.EVENT_MESSAGE_LIMIT]
        name = api_objects.event_name(pod, reason, event_type, message)
        now = self._clock()
        known = self._recorded.get(pod.key, {}).get(name)
        if known is not None and now - known.sent_at < self._refresh_s:
            return "unchanged"
        try:
            if known is None:
                outcome, count = self._create(pod, name, reason, message, event_type, now)
            else:
                outcome, count = self._bump(pod, name, known.count, now)
                if outcome == "failed":  # expired by the server's event TTL: make it anew
                    outcome, count = self._create(pod, name, reason, message, event_type, now)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            logger.warning("kubernetes: event on %s not recorded: %s", pod, _describe(exc))
            return "failed"
        if outcome != "failed":
            self._recorded.setdefault(pod.key, {})[name] = _Recorded(name, count, now)
        return outcome

    def _create(
        self, pod: PodRef, name: str, reason: str, message: str, event_type: str, now: float
    ) -> tuple[EventOutcome, int]:
        stamp = api_objects.format_time(now)
        involved: dict[str, str] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "namespace": pod.namespace,
        }
        if pod.uid:
            involved["uid"] = pod.uid
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            _consume(
                call_with_retries(
                    lambda: self._core.create_namespaced_event(
                        pod.namespace,
                        body,
                        _preload_content=False,
                        _request_timeout=self._policy.request_timeout_s,
                    ),
                    self._policy,
                )
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            existing = _json(
                call_with_retries(
                    lambda: self._core.read_namespaced_event(
                        name, pod.namespace, _preload_content=False
                    ),
                    self._policy,
                )
            )
            return self._bump(pod, name, int(existing.get("count") or 1), now)
        return "created", 1

    def _bump(self, pod: PodRef, name: str, count: int, now: float) -> tuple[EventOutcome, int]:
        patch = {"count": count + 1, "lastTimestamp": api_objects.format_time(now)}
        try:
            _consume(
                call_with_retries(
                    lambda: self._core.patch_namespaced_event(
                        name,
                        pod.namespace,
                        patch,
                        _preload_content=False,
                        _request_timeout=self._policy.request_timeout_s,
                    ),
                    self._policy,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return "failed", 0
            raise
        return "updated", count + 1


# --- binding ------------------------------------------------------------------------------


class _MemberBind(NamedTuple):
    """One gang member's binding, handed to the bind workers."""

    binding: PodBinding
    future: Future[str | None]


def _gather_binds(
    members: Sequence[_MemberBind],
) -> tuple[list[PodBinding], list[tuple[PodBinding, str]]]:
    """Wait for a gang's bindings: the members bound, and the ones that failed with why.

    After the first failure seen, the members not yet started are cancelled (not tried).
    """
    bound: list[PodBinding] = []
    failed: list[tuple[PodBinding, str]] = []
    for member in members:
        if member.future.cancelled():
            continue
        try:
            error = member.future.result()
        except CancelledError:
            continue
        except Exception as exc:  # whatever it was, the gang must be rolled back
            logger.exception("kubernetes: binding %s failed unexpectedly", member.binding.pod)
            error = f"binding failed: {exc!r}"
        if error is None:
            bound.append(member.binding)
        else:
            failed.append((member.binding, error))
            for later in members:
                later.future.cancel()
    return bound, failed


# --- the backend ----------------------------------------------------------------------------


class KubernetesBackend:
    """``ClusterBackend`` on a real cluster (see the module docstring).

    Built from a client ``Configuration`` (``connect()`` loads one from a kubeconfig or the
    in-cluster service account). The informers start at the first ``sync()``, in the process
    that calls it; a process forked afterwards (a Celery prefork worker) starts its own, with
    its own connections, at its first ``sync()``. ``qps`` and ``burst`` limit the requests it
    starts, as client-go's client-side limit does for Kubernetes' own components (none by
    default). Its acting methods may run in a thread of their own beside ``sync``
    (``concurrent_apply``): the cache is read by key only, and the workers' pool is made
    under a lock.
    """

    concurrent_apply = True

    def __init__(
        self,
        configuration: Any,
        *,
        scheduler_name: str = SCHEDULER_NAME,
        retry: RetryPolicy = RetryPolicy(),
        first_sync_timeout_s: float = 60.0,
        page_size: int = 500,
        event_refresh_s: float = 600.0,
        bind_workers: int = 64,
        clock: Callable[[], float] = time.time,
        reporting_instance: str | None = None,
        qps: float | None = None,
        burst: int | None = None,
    ) -> None:
        self._configuration = copy.deepcopy(configuration)
        # None: no client-side limit (the API server's priority and fairness still apply).
        self._limiter = RateLimiter(qps, burst or max(int(qps), 1)) if qps else None
        # The watches hold four connections; the bind workers need theirs too.
        pool = getattr(self._configuration, "connection_pool_maxsize", 0) or 0
        self._configuration.connection_pool_maxsize = max(pool, bind_workers + 8)
        self._scheduler_name = scheduler_name
        self._retry = retry
        self._first_sync_timeout_s = first_sync_timeout_s
        self._page_size = page_size
        self._event_refresh_s = event_refresh_s
        self._bind_workers = bind_workers
        self._clock = clock
        self._instance = reporting_instance or socket.gethostname()
        self._pid = -1
        self._closed = False
        self._reset()

    @classmethod
    def connect(
        cls, kubeconfig: str | None = None, context: str | None = None, **options: Any
    ) -> KubernetesBackend:
        """A backend from a kubeconfig (default: $KUBECONFIG or ~/.kube/config) or in-cluster."""
        configuration = k8s_client.Configuration()
        loader: Any = k8s_config  # its loaders carry no annotations
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            loader.load_incluster_config(client_configuration=configuration)
        else:
            loader.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        return cls(configuration, **options)

    def _reset(self) -> None:
        """Fresh connections, informers and cache (first use, or first use after a fork)."""
        self._api: Any = k8s_client.ApiClient(self._configuration)
        if self._limiter is not None:  # every call, watches and lists included, starts here
            rest: Any = self._api.rest_client
            rest.request = self._limiter.wrap(rest.request)
        # Any: the generated methods are typed for model objects; gpupool sends raw JSON.
        self._core: Any = k8s_client.CoreV1Api(self._api)
        self._batch: Any = k8s_client.BatchV1Api(self._api)
        ours = f"spec.schedulerName={self._scheduler_name}"
        others = (
            f"spec.schedulerName!={self._scheduler_name},spec.nodeName!=,"
            "status.phase!=Succeeded,status.phase!=Failed"
        )
        pages = self._page_size
        self._nodes: Informer[str, NodeFacts] = Informer(
            "nodes",
            _ApiSource(self._core.list_node, "", self._retry),
            _decode_node,
            page_size=pages,
        )
        # Set by the pods informer when gpupool's pods change (not by node heartbeats): what
        # ``wait_for_change`` waits for.
        self._changed = threading.Event()
        # Our pods waiting for a node that appeared since the last sync (``arrivals``: the
        # loop's batching window ends when they pause); replaced whole, never changed.
        self._arrivals = Arrivals()
        # The last state of our pods deleted since the last sync, as their DELETED events
        # gave it (``_pod_event``): whether a pod was evicted (``DisruptionTarget``) or
        # merely deleted shows only there. Replaced whole at each sync.
        self._last_states: dict[PodKey, PodFacts] = {}
        self._pods: Informer[PodKey, PodFacts] = Informer(
            "pods",
            _ApiSource(self._core.list_pod_for_all_namespaces, ours, self._retry),
            _decode_pod,
            page_size=pages,
            changed=self._changed,
            on_event=self._pod_event,
        )
        self._foreign: Informer[PodKey, tuple[str, ResourceAmounts]] = Informer(
            "foreign-pods",
            _ApiSource(self._core.list_pod_for_all_namespaces, others, self._retry),
            _decode_foreign,
            page_size=pages,
        )
        # Jobs wake ``wait_for_change`` too: a Job that gives up may change no pod of ours.
        self._jobs: Informer[JobKey, JobFacts] = Informer(
            "jobs",
            _ApiSource(self._batch.list_job_for_all_namespaces, "", self._retry),
            _job_decoder(self._scheduler_name),
            page_size=pages,
            changed=self._changed,
            drop_rejected=True,
        )
        self._usage: dict[str, ResourceAmounts] = {}
        self._revision = 0
        self._synced_once = False
        self._warming: Future[int] | None = None  # ``_warm_connections``, from the first sync
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._events = _EventRecorder(
            self._core, self._retry, self._clock, self._instance, self._event_refresh_s
        )

    @property
    def informers(self) -> Mapping[str, Informer[Any, Any]]:
        """The four informers by name (nodes, pods, foreign-pods, jobs), for diagnostics."""
        return MappingProxyType(
            {
                "nodes": self._nodes,
                "pods": self._pods,
                "foreign-pods": self._foreign,
                "jobs": self._jobs,
            }
        )

    def _ensure_started(self) -> None:
        if self._closed:
            raise ClusterUnavailable("the backend is closed")
        pid = os.getpid()
        if self._pid != pid:
            if self._pid != -1:  # forked: the parent's threads and sockets are not ours
                self._reset()
            self._pid = pid
        for informer in self.informers.values():
            informer.start()

    # - sync -

    def sync(self) -> ClusterView:
        """Apply what the watches saw since the last call; the first call waits for the lists."""
        self._ensure_started()
        if not self._synced_once:
            deadline = time.monotonic() + self._first_sync_timeout_s
            for informer in self.informers.values():
                if not informer.wait_listed(max(deadline - time.monotonic(), 0.0)):
                    raise ClusterUnavailable(
                        f"no complete list of {informer.name} after "
                        f"{self._first_sync_timeout_s:.0f} s ({informer.failures} failures)"
                    )
            self._warming = self._workers().submit(self._warm_connections)
        self._changed.clear()  # what comes after this drain is for the next sync
        self._arrivals = Arrivals(since=time.monotonic())
        last_states, self._last_states = self._last_states, {}
        nodes = self._nodes.drain()
        pods = self._pods.drain()
        foreign = self._foreign.drain()
        jobs = self._jobs.drain()
        self._synced_once = True
        usage_changed = apply_usage_changes(self._usage, foreign.changes)
        delta = ClusterDelta(
            nodes=nodes.changes,
            pods=api_objects.with_last_states(pods.changes, last_states),
            foreign_usage=usage_changed,
            relisted=nodes.relisted or pods.relisted or foreign.relisted or jobs.relisted,
            jobs=jobs.changes,
        )
        if not delta.empty:
            self._revision += 1
        gone = [key for key, change in pods.changes.items() if change.after is None]
        self._events.forget(gone)
        return ClusterView(
            revision=self._revision,
            nodes=self._nodes.items,
            pods=self._pods.items,
            foreign_usage=MappingProxyType(self._usage),
            delta=delta,
            stale=not all(i.connected for i in self.informers.values()),
            synced_at=self._clock(),
            jobs=self._jobs.items,
        )

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a change of gpupool's pods since the last ``sync()``
        (created, bound, started, ended, deleted) or of a Job of theirs; True as soon as
        there is one."""
        self._ensure_started()
        return self._changed.wait(max(timeout_s, 0.0))

    def arrivals(self) -> Arrivals:
        """gpupool's pods waiting for a node made since the last ``sync()``, as the pods
        informer saw them come."""
        return self._arrivals

    def allowance(self) -> Allowance | None:
        """The client limit (``GPUPOOL_KUBE_API_QPS``/``BURST``) and when its bucket will be
        full (``RateLimiter.full_at``); None without a limit."""
        limiter = self._limiter
        if limiter is None:
            return None
        return Allowance(limiter.qps, limiter.burst, limiter.full_at())

    def _pod_event(self, kind: str, key: PodKey, pod: PodFacts | None) -> None:
        """The pods informer's events as they come (its thread): a new pod with no node is
        an arrival; a deleted pod's last state is kept for the next sync's delta (the
        ``before`` of its removal, ``api_objects.with_last_states``)."""
        if kind == "ADDED" and pod is not None and pod.node_name is None:
            self._arrivals = self._arrivals.then(time.monotonic())
        elif kind == "DELETED" and pod is not None:
            self._last_states[key] = pod  # its last state: evicted or merely deleted

    # - bind -

    def bind(self, gang: Sequence[PodBinding]) -> BindOutcome:
        """Bind every member through ``pods/binding``, or remove the ones bound (see base and
        ``bind_many``)."""
        return self.bind_many({"": gang})[""]

    def bind_many(self, gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
        """Bind several gangs at once, each whole or not at all; an outcome per key.

        The cache of the last ``sync()`` is checked first (each pod there, same uid, not
        ending, not bound elsewhere; the node there), so most failures bind nothing at all.
        Members the cache shows on their target already are done. The others, of every gang,
        go to the bind workers together (``bind_workers`` requests in flight at most, and
        every one waits for the client limit's token): a cycle's hundreds of one-pod gangs
        take about the time of their requests at the limit, not one round trip after
        another. When a member fails, the members of its gang not yet started are not tried,
        and the ones bound are removed again; the other gangs go on.
        """
        if not gangs:
            return {}
        self._ensure_started()
        pods, nodes = self._pods.items, self._nodes.items
        outcomes: dict[str, BindOutcome] = {}
        started: dict[str, tuple[list[PodBinding], list[_MemberBind]]] = {}
        for key, gang in gangs.items():
            if not gang:
                outcomes[key] = BindOutcome()
                continue
            already = [b for b in gang if (f := pods.get(b.pod.key)) and f.node_name == b.node]
            problem = next(
                ((b, why) for b in gang if (why := self._unbindable(b, pods, nodes)) is not None),
                None,
            )
            if problem is not None:
                outcomes[key] = self._roll_back(gang, already, problem[0].pod, problem[1])
                continue
            todo = [b for b in gang if b not in already]
            started[key] = (already, [self._submit_bind(b) for b in todo])
        for key, (already, members) in started.items():
            gang = gangs[key]
            bound, failed = _gather_binds(members)
            if not failed:
                outcomes[key] = BindOutcome(bound=tuple(b.pod for b in gang))
                continue
            first, error = failed[0]
            outcomes[key] = self._roll_back(gang, already + bound, first.pod, error)
        return {key: outcomes[key] for key in gangs}

    def _warm_connections(self) -> int:
        """Open the bind workers' connections before the first bindings need them (after the
        first sync, on a worker): ``bind_workers`` requests for the server's version, each
        answer left unread until all are made, so each takes a connection of its own, then
        all handed back to the pool. Without it the first burst's bindings each paid a TLS
        handshake, all at once: 8 at a time took 0.10 s against 0.005 s on open connections,
        and B4's first binding came 0.3-0.45 s after the first pod, kube-scheduler's (whose
        one HTTP/2 connection its watches keep open) 0.08-0.5 s. Each request waits for the
        client limit's token as any does, so under a limit at most half its burst are
        opened (the bindings find the rest of the bucket). Returns the connections held at
        once; a failure only ends the warming early (the bindings open their own, as
        before)."""
        version: Any = k8s_client.VersionApi(self._api)
        count = self._bind_workers
        if self._limiter is not None:
            count = min(count, self._limiter.burst // 2)
        held: list[Any] = []
        try:
            for _ in range(count):
                if self._closed:
                    break
                held.append(
                    version.get_code(
                        _preload_content=False, _request_timeout=self._retry.request_timeout_s
                    )
                )
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            logger.info("warming the bind connections stopped early: %s", _describe(exc))
        finally:
            for answer in held:
                try:
                    answer.read()
                    answer.release_conn()
                except (urllib3.exceptions.HTTPError, OSError):
                    answer.close()
        return len(held)

    def connections_warm(self, timeout_s: float) -> int:
        """Wait for the warming of the bind connections (started by the first sync); how
        many it held at once (0: not started)."""
        warming = self._warming
        return 0 if warming is None else warming.result(timeout=timeout_s)

    def _workers(self) -> ThreadPoolExecutor:
        """The pool that sends bindings and Events at once (``bind_workers`` threads)."""
        with self._executor_lock:  # apply may run beside the loop's own Events
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._bind_workers, thread_name_prefix="gpupool-bind"
                )
            return self._executor

    def _submit_bind(self, binding: PodBinding) -> _MemberBind:
        return _MemberBind(binding, self._workers().submit(self._bind_one, binding))

    def _unbindable(
        self,
        binding: PodBinding,
        pods: Mapping[PodKey, PodFacts],
        nodes: Mapping[str, NodeFacts],
    ) -> str | None:
        """Why the cache already says this member cannot be bound there, or None."""
        facts = pods.get(binding.pod.key)
        if facts is None:
            return "the pod no longer exists"
        if binding.pod.uid and facts.uid != binding.pod.uid:
            return "the pod was replaced by a newer one of the same name"
        if facts.deleting or facts.finished:
            return f"the pod is {'being deleted' if facts.deleting else facts.phase}"
        if facts.node_name and facts.node_name != binding.node:
            return f"the pod is already bound to node {facts.node_name}"
        node = nodes.get(binding.node)
        if node is None or node.deleting:
            return f"node {binding.node} does not exist"
        return None

    def _bind_one(self, binding: PodBinding) -> str | None:
        pod = binding.pod
        metadata: dict[str, str] = {"name": pod.name, "namespace": pod.namespace}
        if pod.uid:
            metadata["uid"] = pod.uid  # refuse a newer pod of the same name
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node},
        }
        try:
            _consume(
                call_with_retries(
                    lambda: self._core.create_namespaced_pod_binding(
                        pod.name,
                        pod.namespace,
                        body,
                        _preload_content=False,
                        _request_timeout=self._retry.request_timeout_s,
                    ),
                    self._retry,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return "the pod no longer exists"
            if exc.status == 409:
                return self._bound_already(binding, status_message(exc))
            return f"binding refused: {_describe(exc)}"
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return f"the API server is unreachable: {_describe(exc)}"
        return None

    def _bound_already(self, binding: PodBinding, conflict: str) -> str | None:
        """After a 409: None if the pod is on the target node already (done), else why not."""
        try:
            current = _json(
                call_with_retries(
                    lambda: self._core.read_namespaced_pod(
                        binding.pod.name, binding.pod.namespace, _preload_content=False
                    ),
                    self._retry,
                )
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            return f"binding conflict ({conflict}) and the pod cannot be read: {_describe(exc)}"
        metadata = current.get("metadata") or {}
        if binding.pod.uid and metadata.get("uid") != binding.pod.uid:
            return "the pod was replaced by a newer one of the same name"
        node = (current.get("spec") or {}).get("nodeName")
        if node == binding.node:
            return None
        return f"binding conflict: {conflict}"

    def _roll_back(
        self, gang: Sequence[PodBinding], bound: Sequence[PodBinding], failed: PodRef, error: str
    ) -> BindOutcome:
        """Remove the members that are bound: evicted, or deleted if a budget refuses."""
        rolled_back: list[PodRef] = []
        left: list[PodResult] = []
        reason = f"gang bind of {len(gang)} pods failed at {failed}: {error}"
        for binding in bound:
            result = self._evict_one(binding.pod, dry_run=False)
            if result.status == "refused":
                result = self._delete_one(binding.pod)
            if result.status in ("evicted", "deleted", "gone"):
                rolled_back.append(binding.pod)
                self.record_event(binding.pod, "GangBindFailed", reason, "Warning")
            else:
                left.append(result)
        return BindOutcome(
            failed=failed, error=error, rolled_back=tuple(rolled_back), left_bound=tuple(left)
        )

    # - evict -

    def evict(self, pods: Sequence[PodRef], reason: str) -> EvictOutcome:
        """Dry-run every eviction first; evict the set only if none is refused or fails.

        A victim set is evicted whole or not at all as far as the API lets us know in advance:
        a budget that changes between the dry run and the eviction can still refuse one pod
        after others were evicted (then ``complete`` is False and the caller aborts the set).
        """
        if not pods:
            return EvictOutcome()
        self._ensure_started()
        trial = [self._evict_one(pod, dry_run=True) for pod in pods]
        blocking = [r for r in trial if r.status not in ("evicted", "gone")]
        if blocking:
            first = blocking[0]
            return EvictOutcome(
                tuple(
                    r
                    if r.status != "evicted"
                    else PodResult(r.pod, "skipped", f"not evicted: {first.pod} {first.status}")
                    for r in trial
                )
            )
        results = []
        for pod, tried in zip(pods, trial, strict=True):
            result = tried if tried.status == "gone" else self._evict_one(pod, dry_run=False)
            if result.status == "evicted":
                self.record_event(pod, "Preempted", f"evicted by gpupool: {reason}", "Normal")
            results.append(result)
        return EvictOutcome(tuple(results))

    def _evict_one(self, pod: PodRef, *, dry_run: bool) -> PodResult:
        delete_options: dict[str, Any] = {}
        if pod.uid:
            delete_options["preconditions"] = {"uid": pod.uid}
        if dry_run:
            delete_options["dryRun"] = ["All"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": delete_options,
        }
        try:
            _consume(
                call_with_retries(
                    lambda: self._core.create_namespaced_pod_eviction(
                        pod.name,
                        pod.namespace,
                        body,
                        _preload_content=False,
                        _request_timeout=self._retry.request_timeout_s,
                    ),
                    self._retry,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return PodResult(pod, "gone", "the pod no longer exists")
            if exc.status == 409 and "UID" in (exc.body or ""):
                return PodResult(pod, "gone", "the pod was replaced by a newer one")
            if is_budget_refusal(exc):
                return PodResult(pod, "refused", status_message(exc))
            return PodResult(pod, "failed", _describe(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return PodResult(pod, "failed", _describe(exc))
        return PodResult(pod, "evicted")

    # - create and delete -

    def create_pods(self, pods: Sequence[NewPod]) -> PodsOutcome:
        """Create pods for gpupool's scheduler, labelled managed-by gpupool."""
        return PodsOutcome(tuple(self._create_one(pod) for pod in pods))

    def _create_one(self, pod: NewPod) -> PodResult:
        ref = PodRef(pod.namespace, pod.name)
        manifest = api_objects.pod_manifest(pod)
        try:
            response = call_with_retries(
                lambda: self._core.create_namespaced_pod(
                    pod.namespace,
                    manifest,
                    _preload_content=False,
                    _request_timeout=self._retry.request_timeout_s,
                ),
                self._retry,
            )
        except ApiException as exc:
            if exc.status == 409:
                return PodResult(ref, "exists", status_message(exc))
            return PodResult(ref, "failed", _describe(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return PodResult(ref, "failed", _describe(exc))
        uid = str((_json(response).get("metadata") or {}).get("uid", ""))
        return PodResult(PodRef(pod.namespace, pod.name, uid), "created")

    def delete_pods(self, pods: Sequence[PodRef], reason: str) -> PodsOutcome:
        """Delete pods (with their uid as precondition); say why in an Event first."""
        results = []
        for pod in pods:
            self.record_event(pod, "Deleted", f"deleted by gpupool: {reason}", "Normal")
            results.append(self._delete_one(pod))
        return PodsOutcome(tuple(results))

    def _delete_one(self, pod: PodRef) -> PodResult:
        body: dict[str, Any] = {}
        if pod.uid:
            body["preconditions"] = {"uid": pod.uid}
        try:
            _consume(
                call_with_retries(
                    lambda: self._core.delete_namespaced_pod(
                        pod.name,
                        pod.namespace,
                        body=body,
                        _preload_content=False,
                        _request_timeout=self._retry.request_timeout_s,
                    ),
                    self._retry,
                )
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # 409: the uid precondition names an older pod
                return PodResult(pod, "gone", status_message(exc))
            return PodResult(pod, "failed", _describe(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return PodResult(pod, "failed", _describe(exc))
        return PodResult(pod, "deleted")

    # - a cancelled workload's Job -

    def suspend_job(self, job: JobKey) -> JobSuspendResult:
        """Set the Job's ``spec.suspend`` (a merge patch through batch/v1, idempotent): its
        controller deletes the Job's active pods and makes no more, where deleting the pods
        had it make them again and count each as a failed try."""
        write = functools.partial(
            self._batch.patch_namespaced_job,
            job.name,
            job.namespace,
            {"spec": {"suspend": True}},
            _content_type="application/merge-patch+json",
            _preload_content=False,
            _request_timeout=self._retry.request_timeout_s,
        )
        try:
            _consume(call_with_retries(write, self._retry))
        except ApiException as exc:
            if exc.status == 404:
                return JobSuspendResult(job, "gone", status_message(exc))
            return JobSuspendResult(job, "failed", _describe(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return JobSuspendResult(job, "failed", _describe(exc))
        return JobSuspendResult(job, "suspended")

    # - node cordons -

    def set_node_unschedulable(self, node: str, unschedulable: bool) -> NodeCordonResult:
        """Cordon the node (``spec.unschedulable: true``, marked ``CORDONED_BY_GPUPOOL``) or
        lift gpupool's own cordon. Read first, then patched with the resourceVersion read: a
        write that conflicts (409, the node changed meanwhile: a kubelet's status, someone's
        cordon) is read and decided again, a few times. A node already cordoned by someone
        else is left as it is, unmarked: gpupool neither takes over nor lifts that cordon."""
        self._ensure_started()
        for _ in range(CORDON_ATTEMPTS):
            try:
                body = _json(
                    call_with_retries(
                        lambda: self._core.read_node(
                            node,
                            _preload_content=False,
                            _request_timeout=self._retry.request_timeout_s,
                        ),
                        self._retry,
                    )
                )
                metadata = body.get("metadata") or {}
                ours = CORDONED_BY_GPUPOOL in (metadata.get("annotations") or {})
                cordoned = bool((body.get("spec") or {}).get("unschedulable"))
                if unschedulable and cordoned:
                    return NodeCordonResult(node, "unchanged")
                if not unschedulable and not ours:
                    if cordoned:
                        return NodeCordonResult(
                            node, "kept", "cordoned by someone else: left cordoned"
                        )
                    return NodeCordonResult(node, "unchanged")
                patch = {
                    "metadata": {
                        "resourceVersion": metadata.get("resourceVersion"),
                        "annotations": {CORDONED_BY_GPUPOOL: "true" if unschedulable else None},
                    },
                    "spec": {"unschedulable": True if unschedulable else None},
                }
                write = functools.partial(
                    self._core.patch_node,
                    node,
                    patch,
                    _content_type="application/strategic-merge-patch+json",
                    _preload_content=False,
                    _request_timeout=self._retry.request_timeout_s,
                )
                _consume(call_with_retries(write, self._retry))
            except ApiException as exc:
                if exc.status == 404:
                    return NodeCordonResult(node, "gone", "the node no longer exists")
                if exc.status == 409:
                    continue  # changed since it was read: read it again
                return NodeCordonResult(node, "failed", _describe(exc))
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                return NodeCordonResult(node, "failed", _describe(exc))
            return NodeCordonResult(node, "cordoned" if unschedulable else "uncordoned")
        return NodeCordonResult(
            node, "failed", f"the node kept changing: {CORDON_ATTEMPTS} conflicting writes"
        )

    # - events, clock, lifecycle -

    def record_event(
        self, pod: PodRef, reason: str, message: str, event_type: EventType = "Normal"
    ) -> EventOutcome:
        """A core/v1 Event on the pod from ``gpupool``; the same again is counted, not added."""
        self._ensure_started()
        return self._events.record(pod, reason, message, event_type)

    def record_events(self, events: Sequence[EventRequest]) -> list[EventOutcome]:
        """Events at once: the bind workers send them (``bind_workers`` in flight at most,
        each waiting for the client limit's token); an outcome per event, in order. The same
        Event twice in one batch is sent once (the second is ``unchanged``)."""
        self._ensure_started()
        if len(events) <= 1:
            return [self._events.record(e.pod, e.reason, e.message, e.event_type) for e in events]
        pool = self._workers()
        seen: set[tuple[PodKey, str, str, str]] = set()
        sent: list[Future[EventOutcome] | None] = []
        for event in events:
            key = (event.pod.key, event.reason, event.event_type, event.message)
            if key in seen:
                sent.append(None)
                continue
            seen.add(key)
            sent.append(
                pool.submit(
                    self._events.record, event.pod, event.reason, event.message, event.event_type
                )
            )
        return [("unchanged" if future is None else future.result()) for future in sent]

    def now(self) -> float:
        """The wall clock (POSIX seconds)."""
        return self._clock()

    def close(self) -> None:
        """Stop the informers and the bind workers and close the connections."""
        if self._closed:
            return
        self._closed = True
        if self._pid == os.getpid():
            for informer in self.informers.values():
                informer.stop()
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
        self._api.close()

    def __enter__(self) -> KubernetesBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
