"""Local Kubernetes control plane for tests and demos, run by kwokctl; fake GPU nodes from KWOK.

    python -m hack.k8s_plane up [--profile default] [--no-controllers] [--no-scheduler]
    python -m hack.k8s_plane scale NODE_SET --replicas N
    python -m hack.k8s_plane restart-apiserver [--down-for SECONDS]
    python -m hack.k8s_plane compact-etcd
    python -m hack.k8s_plane down
    python -m hack.k8s_plane status

``kwokctl`` (the KWOK project's cluster tool, built with it) does the plane's work: its binary
runtime starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the KWOK
controller from the binaries that ``hack/k8s-testenv/build.sh`` built, makes the PKI and the
kubeconfig, stops and deletes the cluster, and ``kwokctl scale`` creates the fake nodes. This
module adds what kwokctl does not do: gpupool's GPU node profiles (labels, allocatable, NVLink
cliques, time-slicing, MIG) as kwokctl resources; ports picked at random and a retry when one
is taken meanwhile (kwokctl counts down from 32767, so two planes starting at once collide);
start-up that fails fast, naming the component that died and quoting its log (kwokctl waits
two minutes and only warns); a guard process that kills the components when the test process
dies (kwokctl detaches them); and, for tests, an API server restart and an etcd compaction.

Everything listens on 127.0.0.1. ``up`` writes an admin kubeconfig with its certificates
embedded to ``.k8s/kubeconfig`` and its record to ``.k8s/state.json``; kwokctl's own files
(PKI, etcd data, logs, pid files) live under ``.k8s/kwok/``. kwokctl runs with ``HOME`` and
``KWOK_WORKDIR`` inside that folder and with every binary given as a local path, so it reads
no user configuration, touches no ``~/.kube/config`` and downloads nothing.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpupool.clusters import node_profiles
from gpupool.clusters.inventory import UNHEALTHY_GPUS_LABEL, unhealthy_gpus_label

ROOT = Path(__file__).resolve().parent.parent
RBAC_MANIFEST = ROOT / "deploy" / "kubernetes" / "rbac.yaml"  # the scheduler's identity
TESTENV = ROOT / "hack" / "k8s-testenv"
DEFAULT_HOME = ROOT / ".k8s"
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kwokctl",
)
CLUSTER = "gpupool"  # kwokctl's cluster name; every plane has a work folder of its own
STAGES = "kwok-stages.yaml"
KWOK_NODE_ANNOTATION = node_profiles.KWOK_NODE_ANNOTATION
KWOKCTL_API = "config.kwok.x-k8s.io/v1alpha1"
PORT_ATTEMPTS = 3
# kube-controller-manager runs only these (kwokctl would run all): enough for Jobs,
# PodDisruptionBudget status, garbage collection and namespace deletion. No node lifecycle
# controller: it would taint and evict on a late KWOK heartbeat, which a busy machine produces.
CONTROLLERS = "job,disruption,garbagecollector,namespace,podgc,replicaset,deployment"
# Pods and nodes are served straight from etcd, not from the API server's watch cache, so a
# compaction reaches watchers as 410 Gone, as it does on a real cluster once a resourceVersion
# has fallen out of the cache's window (the cache would otherwise hide it for minutes).
WATCH_CACHE_SIZES = "pods#0,nodes#0"


class PlaneError(RuntimeError):
    """A control plane component could not be built, found, started or stopped."""


# --- binaries -------------------------------------------------------------------------------


def read_versions() -> dict[str, str]:
    """The pinned versions from hack/k8s-testenv/versions.env."""
    versions: dict[str, str] = {}
    for line in (TESTENV / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key] = value
    return versions


def cache_base() -> Path:
    """Where slow builds are kept outside checkouts: $GPUPOOL_CACHE, or ~/.cache/gpupool."""
    base = os.environ.get("GPUPOOL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpupool"
    )
    return Path(base)


def cache_dir() -> Path:
    """The folder build.sh fills: $GPUPOOL_CACHE (or ~/.cache/gpupool)/k8s-<version>."""
    return cache_base() / f"k8s-{read_versions()['K8S_VERSION']}"


def find_assets() -> Path:
    """The folder holding all binaries ($KUBEBUILDER_ASSETS, else the build cache), or raise.

    build.sh also writes STAGES there: the stock KWOK stages that kwok-stages.list names.
    """
    given = os.environ.get("KUBEBUILDER_ASSETS")
    folder = Path(given) if given else cache_dir()
    missing = [name for name in BINARIES if not os.access(folder / name, os.X_OK)]
    missing += [] if (folder / STAGES).is_file() else [STAGES]
    if missing:
        origin = "KUBEBUILDER_ASSETS" if given else "the build cache"
        raise PlaneError(
            f"{origin} {folder} lacks {', '.join(missing)}: build them with `make k8s-build` "
            "(bash hack/k8s-testenv/build.sh), or point KUBEBUILDER_ASSETS at a folder "
            "that holds them"
        )
    return folder


# --- kwokctl's configuration -----------------------------------------------------------------

# kwokctl's component names, in start order, with the endpoint that says each one is up.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
KWOKCTL_NAMES = {"kwok": "kwok-controller"}  # where kwokctl's name differs from ours
PORT_NAMES = (
    "etcd",
    "etcd-peer",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)


def kwokctl_configuration(
    assets: Path, ports: dict[str, int], controllers: bool = True, scheduler: bool = True
) -> dict[str, Any]:
    """The KwokctlConfiguration of one plane: our binaries and ports, and the flags we add.

    Every binary is a local path: kwokctl downloads a binary only when it is given a URL,
    which is its default for each of them.
    """
    components = ["etcd", "kube-apiserver"]
    components += ["kube-controller-manager"] if controllers else []
    components += ["kube-scheduler"] if scheduler else []
    components += ["kwok-controller"]

    def args(component: str, *pairs: tuple[str, str], override: bool = False) -> dict[str, Any]:
        extra = [{"key": k, "value": v, "override": override} for k, v in pairs]
        return {"name": component, "extraArgs": extra}

    patches = [
        args("etcd", ("unsafe-no-fsync", "true")),  # a throw-away store: no fsync on 2 cores
        args(
            "kube-apiserver",
            # No ServiceAccount admission: a pod in a namespace just made would otherwise be
            # refused until a controller creates its default account. No taint on new nodes
            # until a node controller clears it (none runs, see CONTROLLERS).
            ("disable-admission-plugins", "ServiceAccount,TaintNodesByCondition"),
            ("watch-cache-sizes", WATCH_CACHE_SIZES),
        ),
        # Without leader election an API server restart cannot make them exit.
        args("kube-controller-manager", ("controllers", CONTROLLERS), ("leader-elect", "false")),
        args("kube-scheduler", ("leader-elect", "false")),
        # KWOK takes only nodes annotated `fake`, so a test can take one away from it; a pod
        # CIDR big enough for B4's 3,600 pods (KWOK's default has 254 addresses).
        args(
            "kwok-controller",
            ("manage-all-nodes", "false"),
            ("node-ip", "127.0.0.1"),
            override=True,
        ),
        args(
            "kwok-controller",
            ("manage-nodes-with-annotation-selector", f"{KWOK_NODE_ANNOTATION}=fake"),
            ("cidr", "10.244.0.0/16"),
        ),
    ]
    return {
        "apiVersion": KWOKCTL_API,
        "kind": "KwokctlConfiguration",
        "options": {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            # RBAC, as a real cluster: the tests run gpupool's backend with the identity that
            # deploy/kubernetes/rbac.yaml grants, so a call it does not allow fails them. The
            # admin kubeconfig's certificate is in system:masters and may do anything.
            "kubeAuthorization": True,
            "components": components,
            "etcdBinary": str(assets / "etcd"),
            "kubeApiserverBinary": str(assets / "kube-apiserver"),
            "kubeControllerManagerBinary": str(assets / "kube-controller-manager"),
            "kubeSchedulerBinary": str(assets / "kube-scheduler"),
            "kwokControllerBinary": str(assets / "kwok"),
            "kubectlBinary": str(assets / "kubectl"),
            "etcdPort": ports["etcd"],
            "etcdPeerPort": ports["etcd-peer"],
            "kubeApiserverPort": ports["kube-apiserver"],
            "kubeControllerManagerPort": ports["kube-controller-manager"],
            "kubeSchedulerPort": ports["kube-scheduler"],
            "kwokControllerPort": ports["kwok"],
        },
        "componentsPatches": patches,
    }


# --- processes ------------------------------------------------------------------------------


def free_ports(names: tuple[str, ...]) -> dict[str, int]:
    """Distinct TCP ports on 127.0.0.1 that are free right now, one per name."""
    with contextlib.ExitStack() as stack:
        ports = {}
        for name in names:  # keep every socket open until all are picked: no duplicates
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports[name] = int(sock.getsockname()[1])
        return ports


def log_tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, or a note that it is empty."""
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(text[-lines:]) or f"({path} is empty)"


def process_start_time(pid: int) -> int | None:
    """The start time of a live process in clock ticks since boot, None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the fields after "pid (comm)"
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22 of proc(5): starttime


@dataclass
class Component:
    """One process of ours, known by pid and start time (a reused pid is another process)."""

    name: str
    pid: int
    log: str
    binary: str
    started: int | None = None  # start time (clock ticks after boot)


def _is_ours(component: Component) -> bool:
    """Whether the recorded process still runs (a pid reused by another process is not ours)."""
    if component.started is None:  # it had exited before its start time could be read
        return False
    return process_start_time(component.pid) == component.started


def _wait_gone(component: Component, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(component.pid, os.WNOHANG)  # reap it if it is our child
        if not _is_ours(component):
            return True
        time.sleep(0.1)
    return not _is_ours(component)


def stop_component(
    component: Component, timeout: float = 15.0, sig: signal.Signals = signal.SIGTERM
) -> None:
    """Signal one process (SIGTERM by default), wait for it, then SIGKILL it if still there."""
    if not _is_ours(component):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(component.pid, sig)
    if _wait_gone(component, timeout):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(component.pid, signal.SIGKILL)
    if not _wait_gone(component, 5.0):
        raise PlaneError(f"{component.name} (pid {component.pid}) survived SIGKILL")


def cluster_dir(home: Path) -> Path:
    """kwokctl's folder for the plane under ``home``: config, PKI, etcd data, logs, pids."""
    return home / "kwok" / "clusters" / CLUSTER


def component_log(workdir: Path, name: str) -> Path:
    """Where kwokctl sends a component's output."""
    return workdir / "logs" / f"{KWOKCTL_NAMES.get(name, name)}.log"


def recorded_pids(workdir: Path) -> dict[str, int]:
    """The pids kwokctl wrote to ``pids/<name>.pid``, by component name, in start order."""
    pids = {}
    for name in COMPONENTS:
        with contextlib.suppress(FileNotFoundError, ValueError):
            text = (workdir / "pids" / f"{KWOKCTL_NAMES.get(name, name)}.pid").read_text()
            pids[name] = int(text.strip())
    return pids


def processes_under(folder: Path) -> list[int]:
    """The live processes running a binary from under ``folder`` (as argv[0], or argv[1] when
    an interpreter runs a script): a plane's components, recorded or not."""
    prefix = f"{folder}{os.sep}"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:2]
        except OSError:
            continue
        ours = any(arg.decode(errors="replace").startswith(prefix) for arg in argv)
        if ours and process_start_time(int(entry.name)) is not None:
            found.append(int(entry.name))
    return found


def running_components(workdir: Path, pids: Mapping[str, int] | None = None) -> list[Component]:
    """The live processes kwokctl started from ``workdir``, in start order.

    kwokctl runs each binary as ``<workdir>/bin/<name>`` (argv[1] when an interpreter runs a
    script); a recorded pid whose process runs anything else (a pid reused after a crash) is
    not ours. ``pids``: the pid files as already read (``recorded_pids``), else read here.
    """
    found = []
    for name, pid in (recorded_pids(workdir) if pids is None else pids).items():
        binary = str(workdir / "bin" / KWOKCTL_NAMES.get(name, name))
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
        except (FileNotFoundError, ProcessLookupError):
            continue
        started = process_start_time(pid)
        if started is not None and binary in (arg.decode(errors="replace") for arg in argv):
            found.append(Component(name, pid, str(component_log(workdir, name)), binary, started))
    return found


def _wait_reaped(pid: int, timeout: float) -> None:
    """Wait until a killed process has left the process table (init reaps it, not us)."""
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGKILL when the parent thread exits."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def guard(workdir: Path, parent: int, poll: float = 0.2) -> int:
    """Wait for ``parent`` to exit, then SIGKILL every component kwokctl started in ``workdir``.

    kwokctl detaches the components from whoever ran it, so a test session that dies without
    stopping its plane would leave it running; this process, started beside the plane and tied
    to nothing, ends it. All at once and with SIGKILL: kube-apiserver hangs in its graceful
    shutdown once etcd is gone.
    """
    while os.getppid() == parent:
        time.sleep(poll)
    for _ in range(20):  # kwokctl may still be starting some: look again until none is left
        components = running_components(workdir)
        if not components:
            return 0
        for component in components:
            with contextlib.suppress(ProcessLookupError):
                os.kill(component.pid, signal.SIGKILL)
        time.sleep(0.5)
    return 1


# --- the plane ------------------------------------------------------------------------------


@dataclass
class PlaneState:
    """What ``up`` started: written to state.json so later commands find it."""

    home: str
    workdir: str
    kubeconfig: str
    server: str
    ports: dict[str, int] = field(default_factory=dict)
    assets: str = ""
    profile: str = "default"
    nodes: int = 0
    startup_seconds: float = 0.0
    guard: Component | None = None

    def env_text(self) -> str:
        """Shell lines that point kubectl (from the binaries folder) at this plane."""
        return f"export KUBECONFIG={self.kubeconfig}\nexport PATH={self.assets}:$PATH\n"

    def save(self) -> None:
        """Write the state file atomically."""
        path = Path(self.home) / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, home: Path) -> PlaneState | None:
        """Read a state file, or None if there is none."""
        path = home / "state.json"
        if not path.is_file():
            return None
        raw = json.loads(path.read_text())
        raw["guard"] = Component(**raw["guard"]) if raw.get("guard") else None
        return cls(**raw)


def health_url(name: str, ports: dict[str, int]) -> str:
    """The URL that answers 200 once a component is up."""
    if name == "etcd":
        return f"http://127.0.0.1:{ports['etcd']}/health"
    if name == "kube-apiserver":
        return f"https://127.0.0.1:{ports['kube-apiserver']}/readyz"
    scheme = "http" if name == "kwok" else "https"
    return f"{scheme}://127.0.0.1:{ports[name]}/healthz"


def embedded_kubeconfig(kwok_kubeconfig: Path) -> str:
    """kwokctl's kubeconfig with its certificate files embedded, as context gpupool-local."""
    source = yaml.safe_load(kwok_kubeconfig.read_text())
    cluster = source["clusters"][0]["cluster"]
    user = source["users"][0]["user"]

    def data(path: str) -> str:
        return base64.b64encode(Path(path).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gpupool-local",
                "cluster": {
                    "server": cluster["server"],
                    "certificate-authority-data": data(cluster["certificate-authority"]),
                },
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": data(user["client-certificate"]),
                    "client-key-data": data(user["client-key"]),
                },
            }
        ],
        "contexts": [
            {"name": "gpupool-local", "context": {"cluster": "gpupool-local", "user": "admin"}}
        ],
        "current-context": "gpupool-local",
    }
    return yaml.safe_dump(config, sort_keys=False)


class Plane:
    """Starts, changes and stops one kwokctl cluster whose files live under ``home``."""

    def __init__(
        self,
        home: Path,
        assets: Path | None = None,
        log: Any = None,
        tie_to_parent: bool = False,
    ) -> None:
        self.home = home
        self.assets = assets
        # True for test sessions: the plane is killed when this process dies, even by SIGKILL.
        self.tie_to_parent = tie_to_parent
        self._log = log or (lambda msg: print(f"[k8s-plane] {msg}", file=sys.stderr))
        self.state: PlaneState | None = None

    @classmethod
    def serving(cls, kubeconfig: Path) -> Plane | None:
        """The plane whose ``up`` wrote ``kubeconfig`` (it lies in the plane's home), if any."""
        home = kubeconfig.resolve().parent
        state = PlaneState.load(home)
        if state is None or Path(state.kubeconfig).resolve() != kubeconfig.resolve():
            return None
        plane = cls(home, Path(state.assets))
        plane.state = state
        return plane

    # - kwokctl -

    def _kwokctl(
        self, assets: Path, *args: str, wait: bool = True, timeout: float = 120.0
    ) -> subprocess.Popen[bytes]:
        """Run kwokctl on this plane's cluster; its output goes to <home>/kwokctl.log."""
        kwok_home = self.home / "kwok"
        env = {
            key: value
            for key, value in os.environ.items()
            if key != "KUBECONFIG" and not key.startswith("KWOK_")
        }
        env.update(HOME=str(kwok_home), KWOK_WORKDIR=str(kwok_home))
        env["PATH"] = f"{assets}{os.pathsep}{env.get('PATH', '')}"  # kwokctl runs our kubectl
        configs = [f"--config={path}" for path in self._config_files(assets)]
        command = [str(assets / "kwokctl"), f"--name={CLUSTER}", *configs, *args]
        with (self.home / "kwokctl.log").open("ab") as log_file:
            log_file.write(f"$ {' '.join(command)}\n".encode())
            log_file.flush()
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.home,
                preexec_fn=_die_with_parent if self.tie_to_parent else None,
            )
        if wait:
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = None
            if code != 0:
                raise PlaneError(
                    f"`kwokctl {' '.join(args)}` "
                    + ("timed out" if code is None else f"failed ({code})")
                    + f"; last lines of {self.home / 'kwokctl.log'}:\n"
                    + log_tail(self.home / "kwokctl.log")
                )
        return proc

    def _config_files(self, assets: Path) -> list[Path]:
        ours = [self.home / name for name in ("kwokctl.yaml", "nodes.yaml")]
        stages = sorted((Path(__file__).parent / "k8s-testenv" / "stages").glob("*.yaml"))
        return [assets / STAGES, *stages, *(path for path in ours if path.is_file())]

    # - start -

    def up(
        self,
        profile: str = "default",
        controllers: bool = True,
        scheduler: bool = True,
        timeout: float = 120.0,
    ) -> PlaneState:
        """Start the plane with kwokctl and create the profile's fake GPU nodes."""
        existing = PlaneState.load(self.home)
        if existing and running_components(Path(existing.workdir)):
            raise PlaneError(
                f"a plane from {self.home} is already running (server {existing.server}); "
                "stop it with `make k8s-down` first"
            )
        if existing:  # left over from a plane that died: clear its files
            Plane(self.home, self.assets, log=self._log).down()
        assets = self.assets or find_assets()
        sets = node_sets(load_profile(profile))  # a bad profile fails before anything runs
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._up_once(assets, profile, sets, controllers, scheduler, timeout)
            except PlaneError as exc:
                # Ports are picked free but bound moments later: another process may win one.
                if "address already in use" not in str(exc) or attempt == PORT_ATTEMPTS:
                    raise
                self._log(f"a port was taken meanwhile; starting again ({attempt + 1})")
        raise AssertionError("unreachable")

    def _up_once(
        self,
        assets: Path,
        profile: str,
        sets: list[NodeSet],
        controllers: bool,
        scheduler: bool,
        timeout: float,
    ) -> PlaneState:
        started = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        ports = free_ports(PORT_NAMES)
        workdir = cluster_dir(self.home)
        kubeconfig = self.home / "kubeconfig"
        self.state = state = PlaneState(
            home=str(self.home),
            workdir=str(workdir),
            kubeconfig=str(kubeconfig),
            server=f"https://127.0.0.1:{ports['kube-apiserver']}",
            ports=ports,
            assets=str(assets),
            profile=profile,
        )
        configuration = kwokctl_configuration(assets, ports, controllers, scheduler)
        (self.home / "kwokctl.yaml").write_text(yaml.safe_dump(configuration, sort_keys=False))
        (self.home / "nodes.yaml").write_text(kwokctl_resources_yaml(sets))
        state.save()
        (self.home / "kwokctl.log").unlink(missing_ok=True)  # one log per plane
        try:
            if self.tie_to_parent:
                self._start_guard(workdir)
            deadline = time.monotonic() + timeout
            creating = self._kwokctl(assets, "create", "cluster", "--kubeconfig=", wait=False)
            self._watch_create(creating, workdir, ports, deadline, timeout)
            names = [n for n in COMPONENTS if n in self._expected(controllers, scheduler)]
            for name in names:
                self._wait_ready(name, workdir, ports, deadline, timeout)
            tmp = kubeconfig.with_suffix(".tmp")
            tmp.write_text(embedded_kubeconfig(workdir / "kubeconfig.yaml"))
            tmp.chmod(0o600)
            tmp.replace(kubeconfig)
            begun = time.monotonic()
            for node_set in sets:
                self._scale(assets, node_set, node_set.replicas, timeout)
            expected = {n["metadata"]["name"] for s in sets for n in s.manifests()}
            wait_nodes_ready(kubeconfig, expected, max(deadline - time.monotonic(), 1.0))
            self._log(
                f"{len(expected)} nodes created and Ready after {time.monotonic() - begun:.1f} s"
            )
            state.nodes = len(expected)
        except BaseException:
            self._log("start-up failed: stopping what was started")
            self.down()
            raise
        state.startup_seconds = round(time.monotonic() - started, 1)
        state.save()
        (self.home / "env").write_text(state.env_text())
        self._log(
            f"up in {state.startup_seconds} s: {state.server}, {state.nodes} fake GPU nodes "
            f"(profile {profile}); for kubectl: source {self.home / 'env'}"
        )
        return state

    @staticmethod
    def _expected(controllers: bool, scheduler: bool) -> set[str]:
        names = {"etcd", "kube-apiserver", "kwok"}
        names |= {"kube-controller-manager"} if controllers else set()
        return names | ({"kube-scheduler"} if scheduler else set())

    def _start_guard(self, workdir: Path) -> None:
        assert self.state is not None
        guard_log = self.home / "guard.log"
        with guard_log.open("ab") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hack.k8s_plane", "guard", str(workdir), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=True,  # a Ctrl-C meant for pytest must not stop the guard
            )
        started = process_start_time(proc.pid)
        self.state.guard = Component("guard", proc.pid, str(guard_log), sys.executable, started)
        self.state.save()

    def _watch_create(
        self,
        creating: subprocess.Popen[bytes],
        workdir: Path,
        ports: dict[str, int],
        deadline: float,
        timeout: float,
    ) -> None:
        """Wait for `kwokctl create cluster`, failing as soon as a component it started dies."""
        while creating.poll() is None:
            try:
                self._fail_if_one_died(workdir)
                if time.monotonic() > deadline:
                    for name in recorded_pids(workdir):  # names the first that is not up
                        self._wait_ready(name, workdir, ports, deadline, timeout)
                    raise PlaneError(f"`kwokctl create cluster` did not finish in {timeout:.0f} s")
            except PlaneError:
                creating.kill()
                creating.wait()
                raise
            time.sleep(0.2)
        if creating.returncode != 0:
            raise PlaneError(
                f"`kwokctl create cluster` failed ({creating.returncode}); last lines of "
                f"{self.home / 'kwokctl.log'}:\n{log_tail(self.home / 'kwokctl.log')}"
            )

    @staticmethod
    def _fail_if_one_died(workdir: Path) -> None:
        # One reading of the pid files for both questions: kwokctl writes them while we
        # look, and a pid file that appeared between two readings made a component just
        # started look exited (CI failed so, twice, on components whose logs were empty).
        pids = recorded_pids(workdir)
        alive = {c.name for c in running_components(workdir, pids)}
        for name in pids:
            if name not in alive:
                log = component_log(workdir, name)
                raise PlaneError(
                    f"{name} exited during start-up; last lines of {log}:\n{log_tail(log)}"
                )

    def _probe(self, name: str, workdir: Path, ports: dict[str, int]) -> str | None:
        """None when the component answers 200 on its health URL, else what it answered."""
        url = health_url(name, ports)
        context = None
        if name == "kube-apiserver":
            context = ssl.create_default_context(cafile=str(workdir / "pki" / "ca.crt"))
            context.load_cert_chain(
                str(workdir / "pki" / "admin.crt"), str(workdir / "pki" / "admin.key")
            )
        elif url.startswith("https"):  # controller-manager and scheduler sign their own
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(url, timeout=5, context=context) as response:  # noqa: S310
                body = response.read().decode(errors="replace")
                return None if response.status == 200 else f"HTTP {response.status}: {body[:200]}"
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}: {exc.read().decode(errors='replace')[:400]}"
        except (OSError, ssl.SSLError) as exc:
            return str(exc) or type(exc).__name__

    def _wait_ready(
        self, name: str, workdir: Path, ports: dict[str, int], deadline: float, timeout: float
    ) -> None:
        """Poll one component's health URL until 200; fail if it exits or the time runs out."""
        begun = time.monotonic()
        log = component_log(workdir, name)
        while True:
            if name not in {c.name for c in running_components(workdir)}:
                raise PlaneError(
                    f"{name} exited during start-up; last lines of {log}:\n{log_tail(log)}"
                )
            answer = self._probe(name, workdir, ports)
            if answer is None:
                waited = time.monotonic() - begun
                self._log(f"{name} ready after {waited:.1f} s ({health_url(name, ports)})")
                return
            if time.monotonic() > deadline:
                raise PlaneError(
                    f"{name} not ready at {health_url(name, ports)} after {timeout:.0f} s "
                    f"({answer}); last lines of {log}:\n{log_tail(log)}"
                )
            time.sleep(0.3)

    # - change -

    def _state(self) -> PlaneState:
        state = self.state or PlaneState.load(self.home)
        if state is None:
            raise PlaneError(f"no plane is recorded in {self.home}: start one with `make k8s-up`")
        self.state = state
        return state

    def _scale(self, assets: Path, node_set: NodeSet, replicas: int, timeout: float) -> None:
        serial = max(node_set.serial_length, len(str(max(replicas - 1, 0))))
        self._kwokctl(
            assets,
            "scale",
            node_set.resource,
            node_set.name,
            f"--replicas={replicas}",
            f"--serial-length={serial}",
            timeout=timeout,
        )

    def scale(self, set_name: str, replicas: int, timeout: float = 300.0) -> float:
        """Resize one node set of the running profile with `kwokctl scale`; seconds to Ready.

        The count is checked afterwards and kwokctl asked again if it is off: once, shrinking
        500 nodes to 4, `kwokctl scale` left 3.
        """
        state = self._state()
        sets = {s.name: s for s in node_sets(load_profile(state.profile))}
        if set_name not in sets:
            raise PlaneError(f"no node set {set_name!r} in profile {state.profile}: {sorted(sets)}")
        begun = time.monotonic()
        core = _api(Path(state.kubeconfig))
        selector = f"kwok.x-k8s.io/kwokctl-scale={set_name}"
        for _ in range(3):
            self._scale(Path(state.assets), sets[set_name], replicas, timeout)
            names = {n.metadata.name for n in core.list_node(label_selector=selector).items}
            if len(names) == replicas:
                break
        else:
            raise PlaneError(f"kwokctl scale left {len(names)} nodes in {set_name}, not {replicas}")
        wait_nodes_ready(Path(state.kubeconfig), names, timeout)
        state.nodes = len(core.list_node(label_selector="type=kwok").items)
        state.save()
        return time.monotonic() - begun

    def restart_apiserver(self, down_for: float = 0.0, timeout: float = 60.0) -> None:
        """Kill kube-apiserver, keep it down ``down_for`` seconds, let kwokctl start it again.

        SIGKILL, as a crash (a SIGTERM'd API server drains its watches for about a minute),
        then its pid file is removed as `kwokctl stop` does, and `kwokctl start cluster` starts
        whichever components are not running.
        """
        state = self._state()
        workdir = Path(state.workdir)
        apiserver = [c for c in running_components(workdir) if c.name == "kube-apiserver"]
        if not apiserver:
            raise PlaneError(f"kube-apiserver of {self.home} is not running")
        stop_component(apiserver[0], timeout=10.0, sig=signal.SIGKILL)
        (workdir / "pids" / "kube-apiserver.pid").unlink(missing_ok=True)
        time.sleep(down_for)
        deadline = time.monotonic() + timeout
        self._kwokctl(Path(state.assets), "start", "cluster", timeout=timeout)
        self._wait_ready("kube-apiserver", workdir, state.ports, deadline, timeout)

    def compact_etcd(self) -> int:
        """Compact etcd past every revision issued so far (physically); return that revision.

        Later watches of pods or nodes from an older resourceVersion answer 410 Gone (see
        WATCH_CACHE_SIZES). A watch from resourceVersion X starts at X + 1, and if that were
        the compacted revision itself etcd would still send its event without the previous
        value, which the API server answers with a 500; so two writes to a key outside the API
        server's prefix first move the revision two past anything a client has seen.
        Through etcd's HTTP gateway: `kwokctl etcdctl` would download etcdctl.
        """
        state = self._state()
        base = f"http://127.0.0.1:{state.ports['etcd']}/v3"
        key = base64.b64encode(b"/gpupool-plane/compaction").decode()
        put: dict[str, Any] = {}
        for value in (b"before", b"at"):
            put = _post_json(
                f"{base}/kv/put", {"key": key, "value": base64.b64encode(value).decode()}
            )
        revision = int(put["header"]["revision"])
        _post_json(f"{base}/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # - stop -

    def down(self, keep_files: bool = False) -> list[str]:
        """Stop the guard and the plane (`kwokctl delete cluster`); remove the plane's files."""
        state = self.state or PlaneState.load(self.home)
        if state is None:
            return []
        if state.guard is not None:
            stop_component(state.guard, timeout=5.0)
        workdir = Path(state.workdir)
        running = running_components(workdir)
        stopped = [f"{c.name} (pid {c.pid})" for c in running]
        assets = Path(state.assets)
        if running or workdir.is_dir():
            with contextlib.suppress(PlaneError):
                # kwokctl kills the components and removes its folder; the kubeconfig named here
                # is one in the plane's folder, so the user's is never edited.
                kubeconfig = f"--kubeconfig={self.home / 'kwok' / 'kube-contexts'}"
                if keep_files:
                    self._kwokctl(assets, "stop", "cluster", timeout=60.0)
                else:
                    self._kwokctl(assets, "delete", "cluster", kubeconfig, timeout=60.0)
        for component in running_components(workdir):  # if kwokctl could not
            stop_component(component, sig=signal.SIGKILL)
        for component in running:  # so that `ps` right after shows none of them
            _wait_reaped(component.pid, 10.0)
        # A component kwokctl started but had not recorded yet when it was killed (a failed
        # start-up kills `kwokctl create cluster` at once) has no pid file: found by its binary.
        for pid in processes_under(workdir / "bin"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait_reaped(pid, 10.0)
        if not keep_files:
            shutil.rmtree(self.home / "kwok", ignore_errors=True)
            for name in ("state.json", "kubeconfig", "env", "kwokctl.yaml", "nodes.yaml"):
                (self.home / name).unlink(missing_ok=True)
        self.state = None
        return stopped

    def status(self) -> dict[str, Any]:
        """The recorded state with each component's liveness."""
        state = PlaneState.load(self.home)
        if state is None:
            return {"running": False, "home": str(self.home)}
        live = {c.name: c.pid for c in running_components(Path(state.workdir))}
        return {"running": bool(live), "pids": live, **asdict(state)}


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - a fixed local URL
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            result: dict[str, Any] = json.loads(response.read())
            return result
    except (OSError, ValueError) as exc:
        raise PlaneError(f"etcd at {url} did not answer: {exc}") from exc


# --- fake GPU nodes -------------------------------------------------------------------------


PROFILE_FOLDERS = (TESTENV / "profiles", node_profiles.PACKAGED)


def load_profile(name_or_path: str) -> dict[str, Any]:
    """A node profile by path, or by name: hack/k8s-testenv/profiles/<name>.yaml (the tests'
    and B4's), else one gpupool ships (gpupool/clusters/profiles/<name>.yaml: ``demo``)."""
    path = Path(name_or_path)
    if not path.is_file():
        path = next(
            (p for p in (f / f"{name_or_path}.yaml" for f in PROFILE_FOLDERS) if p.is_file()),
            path,
        )
    if not path.is_file():
        known = sorted({p.stem for folder in PROFILE_FOLDERS for p in folder.glob("*.yaml")})
        raise PlaneError(f"unknown node profile {name_or_path!r}; known: {', '.join(known)}")
    try:
        return node_profiles.load_profile(path)
    except node_profiles.ProfileError as exc:
        raise PlaneError(str(exc)) from exc


NAME_PLACEHOLDER = "{{ Name }}"  # what kwokctl's template engine replaces with each node's name


@dataclass(frozen=True)
class NodeSet:
    """Nodes that `kwokctl scale` makes from one template: a profile's group, or one rack."""

    name: str  # nodes are named <name>-<serial number>, as kwokctl numbers them
    replicas: int
    serial_length: int
    template: dict[str, Any]  # a Node whose name is NAME_PLACEHOLDER

    @property
    def resource(self) -> str:
        """The name of this set's KwokctlResource."""
        return f"gpupool-{self.name}"

    def node_name(self, index: int) -> str:
        """The name kwokctl gives the node ``index`` (``%s-%0*d``)."""
        return f"{self.name}-{index:0{self.serial_length}d}"

    def manifests(self) -> list[dict[str, Any]]:
        """The Node objects kwokctl creates for this set."""
        text = json.dumps(self.template)
        return [
            json.loads(text.replace(NAME_PLACEHOLDER, self.node_name(i)))
            for i in range(self.replicas)
        ]


def node_sets(profile: dict[str, Any]) -> list[NodeSet]:
    """The node sets of a profile: one per group, one per rack for rack-scale groups.

    The expansion (names, labels, capacity) is gpupool's own (``gpupool.clusters.
    node_profiles``), which the simulated cluster uses too: both carry the same nodes.
    """
    try:
        runs = node_profiles.node_runs(profile)
    except node_profiles.ProfileError as exc:
        raise PlaneError(str(exc)) from exc
    return [
        NodeSet(run.name, run.replicas, run.serial_length, run.manifest(NAME_PLACEHOLDER))
        for run in runs
    ]


def node_manifests(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Node object of a profile, as kwokctl creates them."""
    return [node for node_set in node_sets(profile) for node in node_set.manifests()]


def kwokctl_resources_yaml(sets: list[NodeSet]) -> str:
    """One KwokctlResource per node set, for `kwokctl scale <resource> <name>`."""
    docs = [
        {
            "apiVersion": KWOKCTL_API,
            "kind": "KwokctlResource",
            "metadata": {"name": node_set.resource},
            "parameters": {},
            # JSON is YAML; json.dumps escapes nothing in "{{ Name }}", which kwokctl renders.
            "template": json.dumps(node_set.template, indent=1),
        }
        for node_set in sets
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def gpu_node_manifest(
    name: str, group: dict[str, Any], clique: str | None = None
) -> dict[str, Any]:
    """One fake GPU Node for KWOK from a profile's node group (``node_profiles``' expansion)."""
    try:
        return node_profiles.gpu_node_manifest(name, group, clique=clique)
    except node_profiles.ProfileError as exc:
        raise PlaneError(str(exc)) from exc


def _api(kubeconfig: Path) -> Any:
    from kubernetes import client, config

    loader: Any = config  # the kubernetes package is untyped
    return client.CoreV1Api(loader.new_client_from_config(config_file=str(kubeconfig)))


def mark_unhealthy_gpus(core: Any, broken: Mapping[str, Iterable[int]]) -> list[str]:
    """Break GPUs of the plane's nodes as a GPU node shows a broken GPU: its ``nvidia.com/gpu``
    allocatable is the capacity less the broken ones (NVIDIA's device plugin leaves out a GPU
    it finds unhealthy; written through the status subresource, which KWOK keeps), and the
    label ``gpupool.io/unhealthy-gpus`` names them (``3``, ``2_5``: a node health checker's
    word, docs/clusters.md), so that the control loop's sync marks those GPUs, not the
    highest ones. ``core`` is a ``CoreV1Api``; ``broken`` maps node names to GPU indices. A
    node that is not there is skipped. Returns the names of the nodes changed."""
    from kubernetes.client.exceptions import ApiException

    changed = []
    for name, indices in broken.items():
        gpus = sorted(set(indices))
        try:
            capacity = int(core.read_node(name).status.capacity["nvidia.com/gpu"])
        except ApiException as error:
            if error.status != 404:
                raise
            continue
        core.patch_node(
            name, {"metadata": {"labels": {UNHEALTHY_GPUS_LABEL: unhealthy_gpus_label(gpus)}}}
        )
        healthy = {"nvidia.com/gpu": str(capacity - len(gpus))}
        core.patch_node_status(name, {"status": {"allocatable": healthy}})
        changed.append(name)
    return changed


def scheduler_kubeconfig(admin: Path, out: Path, hours: int = 24) -> Path:
    """Write to ``out`` a kubeconfig with the identity deploy/kubernetes/rbac.yaml gives
    gpupool's scheduler on the cluster that the ``admin`` kubeconfig reaches.

    The manifest's ServiceAccount, ClusterRole and ClusterRoleBinding are applied as they are
    (its namespace made if missing; objects already there replaced), and a token of the
    account valid ``hours`` is asked from the API server (TokenRequest). The plane authorizes
    by RBAC, so a backend with this kubeconfig can do exactly what an installed gpupool can
    (the tests' ``k8s_scheduler_kubeconfig``, and ``make demo-k8s``'s loop).
    """
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    loader: Any = config  # the kubernetes package is untyped
    api = loader.new_client_from_config(config_file=str(admin))
    try:
        # Any: raw JSON bodies, where the generated methods are typed for model objects.
        core: Any = client.CoreV1Api(api)
        rbac: Any = client.RbacAuthorizationV1Api(api)
        documents = [d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text()) if d]
        account = next(d for d in documents if d["kind"] == "ServiceAccount")
        name, namespace = account["metadata"]["name"], account["metadata"]["namespace"]
        try:
            core.create_namespace({"metadata": {"name": namespace}})
        except ApiException as exc:
            if exc.status != 409:  # there already
                raise
        kinds: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "ServiceAccount": (
                lambda body: core.create_namespaced_service_account(namespace, body),
                lambda body: core.replace_namespaced_service_account(
                    body["metadata"]["name"], namespace, body
                ),
            ),
            "ClusterRole": (
                rbac.create_cluster_role,
                lambda body: rbac.replace_cluster_role(body["metadata"]["name"], body),
            ),
            "ClusterRoleBinding": (
                rbac.create_cluster_role_binding,
                lambda body: rbac.replace_cluster_role_binding(body["metadata"]["name"], body),
            ),
        }
        for document in documents:
            if document["kind"] not in kinds:
                raise PlaneError(f"{RBAC_MANIFEST}: cannot apply a {document['kind']}")
            create, replace = kinds[document["kind"]]
            try:
                create(document)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                replace(document)
        request = {"spec": {"audiences": [], "expirationSeconds": hours * 3600}}
        answer = core.create_namespaced_service_account_token(name, namespace, request)
    finally:
        api.close()
    given = yaml.safe_load(admin.read_text())
    context = next(c for c in given["contexts"] if c["name"] == given["current-context"])
    cluster = next(c for c in given["clusters"] if c["name"] == context["context"]["cluster"])
    scheduler = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": answer.status.token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
        "current-context": name,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(scheduler))
    tmp.chmod(0o600)  # a credential
    tmp.replace(out)
    return out


def wait_nodes_ready(kubeconfig: Path, names: set[str], timeout: float) -> None:
    """Wait until KWOK has marked every named node Ready."""
    core = _api(kubeconfig)
    deadline = time.monotonic() + timeout
    pending = set(names)
    while time.monotonic() < deadline:
        for node in core.list_node(label_selector="type=kwok").items:
            conditions = node.status.conditions or []
            if any(c.type == "Ready" and c.status == "True" for c in conditions):
                pending.discard(node.metadata.name)
        if not pending:
            return
        time.sleep(0.5)
    raise PlaneError(
        f"{len(pending)} of {len(names)} fake nodes not Ready after {timeout:.0f} s "
        f"(e.g. {sorted(pending)[:3]}): is KWOK running with the node stages?"
    )


# --- command line ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hack.k8s_plane``."""
    parser = argparse.ArgumentParser(
        prog="python -m hack.k8s_plane", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("GPUPOOL_K8S_HOME", DEFAULT_HOME))
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the plane and create the fake GPU nodes")
    up.add_argument("--profile", default=os.environ.get("GPUPOOL_K8S_PROFILE", "default"))
    up.add_argument(
        "--no-controllers",
        dest="controllers",
        action="store_false",
        help=f"without kube-controller-manager ({CONTROLLERS})",
    )
    up.add_argument(
        "--no-scheduler", dest="scheduler", action="store_false", help="without kube-scheduler"
    )
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each step")
    scale = sub.add_parser("scale", help="resize a node set with `kwokctl scale`")
    scale.add_argument("node_set", help="a group's prefix (e.g. h100), or <prefix>-r<rack>")
    scale.add_argument("--replicas", type=int, required=True)
    restart = sub.add_parser("restart-apiserver", help="kill kube-apiserver and start it again")
    restart.add_argument("--down-for", type=float, default=0.0, help="seconds to stay down")
    sub.add_parser("compact-etcd", help="compact etcd at its current revision")
    down = sub.add_parser("down", help="stop what `up` started")
    down.add_argument("--keep-files", action="store_true", help="keep logs and etcd data")
    sub.add_parser("status", help="show the recorded plane and which components run")
    identity = sub.add_parser(
        "scheduler-kubeconfig",
        help="apply deploy/kubernetes/rbac.yaml and write a kubeconfig with its account's token",
    )
    identity.add_argument("--admin", type=Path, help="the admin kubeconfig (default: the plane's)")
    identity.add_argument("--out", type=Path, help="default: scheduler-kubeconfig in --home")
    identity.add_argument("--hours", type=int, default=24, help="how long the token is valid")
    watchdog = sub.add_parser("guard", help=argparse.SUPPRESS)
    watchdog.add_argument("workdir", type=Path)
    watchdog.add_argument("parent", type=int)
    args = parser.parse_args(argv)

    if args.command == "guard":
        return guard(args.workdir, args.parent)
    plane = Plane(args.home.resolve())
    try:
        if args.command == "up":
            state = plane.up(args.profile, args.controllers, args.scheduler, args.timeout)
            print(state.env_text(), end="")
        elif args.command == "scale":
            seconds = plane.scale(args.node_set, args.replicas)
            print(f"{args.node_set}: {args.replicas} nodes Ready after {seconds:.1f} s")
        elif args.command == "restart-apiserver":
            plane.restart_apiserver(args.down_for)
            print("kube-apiserver restarted")
        elif args.command == "compact-etcd":
            print(f"etcd compacted at revision {plane.compact_etcd()}")
        elif args.command == "scheduler-kubeconfig":
            admin = args.admin or args.home.resolve() / "kubeconfig"
            out = args.out or args.home.resolve() / "scheduler-kubeconfig"
            print(scheduler_kubeconfig(admin, out, args.hours))
        elif args.command == "down":
            stopped = plane.down(keep_files=args.keep_files)
            print("stopped " + ", ".join(stopped) if stopped else "nothing was running")
        else:
            print(json.dumps(plane.status(), indent=2))
    except PlaneError as exc:
        print(f"k8s-plane: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
