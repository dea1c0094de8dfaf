"""Local Kubernetes control plane for tests and demos: etcd, kube-apiserver, KWOK fake GPU nodes.

    python -m hack.k8s_plane up [--profile default] [--controllers] [--scheduler]
    python -m hack.k8s_plane down
    python -m hack.k8s_plane status

Everything listens on 127.0.0.1 on ports chosen free at start-up. ``up`` writes the admin
kubeconfig to ``.k8s/kubeconfig`` and the process ids, ports and folders to ``.k8s/state.json``;
``down`` stops exactly those processes (SIGTERM, wait, SIGKILL). The binaries come from
``$KUBEBUILDER_ASSETS`` or the cache that ``hack/k8s-testenv/build.sh`` fills.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parent.parent
TESTENV = ROOT / "hack" / "k8s-testenv"
DEFAULT_HOME = ROOT / ".k8s"
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
PORT_ATTEMPTS = 3
# The controllers started with --controllers: enough for Jobs, PodDisruptionBudget status,
# garbage collection and namespace deletion (no node lifecycle: KWOK nodes have no kubelet).
CONTROLLERS = "job,disruption,garbagecollector,namespace,podgc,replicaset,deployment"


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
    """The folder holding all binaries ($KUBEBUILDER_ASSETS, else the build cache), or raise."""
    given = os.environ.get("KUBEBUILDER_ASSETS")
    folder = Path(given) if given else cache_dir()
    missing = [name for name in BINARIES if not os.access(folder / name, os.X_OK)]
    if missing:
        origin = "KUBEBUILDER_ASSETS" if given else "the build cache"
        raise PlaneError(
            f"{origin} {folder} lacks {', '.join(missing)}: build them with `make k8s-build` "
            "(bash hack/k8s-testenv/build.sh), or point KUBEBUILDER_ASSETS at a folder "
            "that holds them"
        )
    return folder


def stages_yaml(assets: Path) -> str:
    """The KWOK stage documents: <assets>/kwok-stages.yaml, else from the Go module cache."""
    shipped = assets / "kwok-stages.yaml"
    if shipped.is_file():
        return shipped.read_text()
    module_dir = _kwok_module_dir()
    if module_dir is None:
        raise PlaneError(
            f"no {shipped} and the sigs.k8s.io/kwok module is not in the Go module cache: "
            "run `make k8s-build`"
        )
    return concat_stages(module_dir)


def _kwok_module_dir() -> Path | None:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        return None
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=TESTENV / "kwok",
        capture_output=True,
        text=True,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"},
        check=False,
    )
    path = Path(proc.stdout.strip()) if proc.returncode == 0 else None
    return path if path and path.is_dir() else None


def kwok_stage_list() -> list[str]:
    """The stock stage files named in hack/k8s-testenv/kwok-stages.list."""
    lines = (TESTENV / "kwok-stages.list").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def concat_stages(kwok_module_dir: Path) -> str:
    """Concatenate the listed stock stage files from an unpacked kwok module."""
    docs = []
    for rel in kwok_stage_list():
        path = kwok_module_dir / "kustomize" / "stage" / rel
        docs.append(f"# from sigs.k8s.io/kwok kustomize/stage/{rel}\n{path.read_text()}")
    return "---\n".join(docs)


# --- certificates ---------------------------------------------------------------------------


@dataclass
class Pki:
    """Paths of the plane's certificates and keys (PEM files)."""

    dir: Path

    @property
    def ca_crt(self) -> Path:
        """The CA certificate that signs everything and that the apiserver trusts."""
        return self.dir / "ca.crt"

    def path(self, name: str) -> Path:
        """The path of one PEM file in the folder."""
        return self.dir / name


def _pem_key(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.write_bytes(data)
    path.chmod(mode)


def make_pki(folder: Path) -> Pki:
    """Create a CA, a serving certificate for 127.0.0.1, an admin client cert and an SA key."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(hours=1), now + dt.timedelta(days=365)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpupool-local-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: x509.Name, server: bool, out: str) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH]
                    if server
                    else [ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        _write(folder / f"{out}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        _write(folder / f"{out}.key", _pem_key(key))

    _write(folder / "ca.crt", ca.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(folder / "ca.key", _pem_key(ca_key))
    leaf(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]), True, "apiserver")
    admin = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
        ]
    )
    leaf(admin, False, "admin")
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(folder / "sa.key", _pem_key(sa_key))
    _write(
        folder / "sa.pub",
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        0o644,
    )
    return Pki(folder)


def kubeconfig_text(server: str, pki: Pki) -> str:
    """An admin kubeconfig for ``server`` with the certificates embedded."""

    def b64(name: str) -> str:
        return base64.b64encode(pki.path(name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gpupool-local",
                "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64("admin.crt"),
                    "client-key-data": b64("admin.key"),
                },
            }
        ],
        "contexts": [
            {"name": "gpupool-local", "context": {"cluster": "gpupool-local", "user": "admin"}}
        ],
        "current-context": "gpupool-local",
    }
    return yaml.safe_dump(config, sort_keys=False)


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


@dataclass
class Component:
    """One started process of the plane."""

    name: str
    pid: int
    log: str
    binary: str
    started: int | None = None  # start time (clock ticks after boot): tells a reused pid apart


@dataclass
class PlaneState:
    """What ``up`` started: written to state.json so ``down`` can stop it by process id."""

    home: str
    run_dir: str
    kubeconfig: str
    server: str
    ports: dict[str, int] = field(default_factory=dict)
    components: list[Component] = field(default_factory=list)
    assets: str = ""
    profile: str = "default"
    nodes: int = 0
    startup_seconds: float = 0.0

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
        raw["components"] = [Component(**c) for c in raw.get("components", [])]
        return cls(**raw)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGKILL when the parent thread exits."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


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


def stop_component(component: Component, timeout: float = 15.0) -> None:
    """SIGTERM one process, wait for it, then SIGKILL it if it is still there."""
    if not _is_ours(component):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(component.pid, signal.SIGTERM)
    if _wait_gone(component, timeout):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(component.pid, signal.SIGKILL)
    if not _wait_gone(component, 5.0):
        raise PlaneError(f"{component.name} (pid {component.pid}) survived SIGKILL")


class Plane:
    """Starts and stops one control plane whose files live under ``home``."""

    def __init__(
        self,
        home: Path,
        assets: Path | None = None,
        log: Any = None,
        tie_to_parent: bool = False,
    ) -> None:
        self.home = home
        self.assets = assets
        # True for test sessions: the kernel SIGKILLs every component when the process that
        # started it dies, so even a killed pytest leaves nothing behind. (SIGKILL: all would
        # get the signal at once, and kube-apiserver hangs in its graceful shutdown once etcd
        # is gone.)
        self.tie_to_parent = tie_to_parent
        self._log = log or (lambda msg: print(f"[k8s-plane] {msg}", file=sys.stderr))
        self.state: PlaneState | None = None

    # - start -

    def up(
        self,
        profile: str = "default",
        controllers: bool = False,
        scheduler: bool = False,
        timeout: float = 120.0,
    ) -> PlaneState:
        """Start etcd, kube-apiserver, optionally the controllers/scheduler, KWOK and the nodes."""
        existing = PlaneState.load(self.home)
        if existing and any(_is_ours(c) for c in existing.components):
            raise PlaneError(
                f"a plane from {self.home} is already running (server {existing.server}); "
                "stop it with `make k8s-down` first"
            )
        if existing:  # left over from a plane that died: clear its files
            Plane(self.home).down()
        assets = self.assets or find_assets()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._up_once(assets, profile, controllers, scheduler, timeout)
            except PlaneError as exc:
                # Ports are picked free but bound moments later: another process may win one.
                if "address already in use" not in str(exc) or attempt == PORT_ATTEMPTS:
                    raise
                self._log(f"a port was taken meanwhile; starting again ({attempt + 1})")
        raise AssertionError("unreachable")

    def _up_once(
        self, assets: Path, profile: str, controllers: bool, scheduler: bool, timeout: float
    ) -> PlaneState:
        started = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=self.home))
        pki = make_pki(run_dir / "pki")
        ports = free_ports(
            ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok")
        )
        server = f"https://127.0.0.1:{ports['apiserver']}"
        kubeconfig = self.home / "kubeconfig"
        self.state = state = PlaneState(
            home=str(self.home),
            run_dir=str(run_dir),
            kubeconfig=str(kubeconfig),
            server=server,
            ports=ports,
            assets=str(assets),
            profile=profile,
        )
        try:
            self._start_etcd(assets, run_dir, ports, timeout)
            self._start_apiserver(assets, run_dir, pki, ports, timeout)
            # Components read the kubeconfig from inside run_dir (it is removed with it).
            (run_dir / "kubeconfig").write_text(kubeconfig_text(server, pki))
            if controllers:
                self._start_controller_manager(assets, run_dir, ports, timeout)
            if scheduler:
                self._start_scheduler(assets, run_dir, ports, timeout)
            self._start_kwok(assets, run_dir, ports, timeout)
            nodes = node_manifests(load_profile(profile))
            begun = time.monotonic()
            create_nodes(run_dir / "kubeconfig", nodes)
            wait_nodes_ready(
                run_dir / "kubeconfig", {n["metadata"]["name"] for n in nodes}, timeout
            )
            waited = time.monotonic() - begun
            self._log(f"{len(nodes)} nodes created and Ready after {waited:.1f} s")
            state.nodes = len(nodes)
        except BaseException:
            self._log("start-up failed: stopping what was started")
            self.down()
            raise
        tmp = kubeconfig.with_suffix(".tmp")
        tmp.write_text(kubeconfig_text(server, pki))
        tmp.chmod(0o600)
        tmp.replace(kubeconfig)
        state.startup_seconds = round(time.monotonic() - started, 1)
        state.save()
        (self.home / "env").write_text(state.env_text())
        self._log(
            f"up in {state.startup_seconds} s: {server}, {state.nodes} fake GPU nodes "
            f"(profile {profile}); for kubectl: source {self.home / 'env'}"
        )
        return state

    def _spawn(self, name: str, binary: Path, args: list[str], run_dir: Path) -> Component:
        assert self.state is not None
        log_path = run_dir / f"{name}.log"
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                [str(binary), *args],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=run_dir,
                start_new_session=True,  # survives the launcher; Ctrl-C in a shell spares it
                preexec_fn=_die_with_parent if self.tie_to_parent else None,
            )
        component = Component(
            name=name,
            pid=proc.pid,
            log=str(log_path),
            binary=str(binary),
            started=process_start_time(proc.pid),
        )
        self.state.components.append(component)
        self.state.save()
        self._log(f"{name} started (pid {proc.pid}, log {log_path})")
        return component

    def _wait_ready(
        self,
        component: Component,
        url: str,
        timeout: float,
        context: ssl.SSLContext | None = None,
    ) -> None:
        begun = time.monotonic()
        deadline = begun + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not _is_ours(component):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(component.pid, os.WNOHANG)
                raise PlaneError(
                    f"{component.name} exited during start-up; last lines of {component.log}:\n"
                    f"{log_tail(Path(component.log))}"
                )
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as response:  # noqa: S310
                    body = response.read().decode(errors="replace")
                    if response.status == 200:
                        waited = time.monotonic() - begun
                        self._log(f"{component.name} ready after {waited:.1f} s ({url})")
                        return
                    last = f"HTTP {response.status}: {body[:200]}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read().decode(errors='replace')[:400]}"
            except (OSError, ssl.SSLError) as exc:
                last = str(exc)
            time.sleep(0.5)
        raise PlaneError(
            f"{component.name} not ready at {url} after {timeout:.0f} s ({last}); "
            f"last lines of {component.log}:\n{log_tail(Path(component.log))}"
        )

    def _start_etcd(
        self, assets: Path, run_dir: Path, ports: dict[str, int], timeout: float
    ) -> None:
        client = f"http://127.0.0.1:{ports['etcd']}"
        peer = f"http://127.0.0.1:{ports['etcd-peer']}"
        component = self._spawn(
            "etcd",
            assets / "etcd",
            [
                "--name=default",
                f"--data-dir={run_dir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            run_dir,
        )
        self._wait_ready(component, f"{client}/health", timeout)

    def _start_apiserver(
        self, assets: Path, run_dir: Path, pki: Pki, ports: dict[str, int], timeout: float
    ) -> None:
        port = ports["apiserver"]
        component = self._spawn(
            "kube-apiserver",
            assets / "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={pki.dir}",
                f"--tls-cert-file={pki.path('apiserver.crt')}",
                f"--tls-private-key-file={pki.path('apiserver.key')}",
                f"--client-ca-file={pki.ca_crt}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer=https://127.0.0.1:{port}",
                f"--service-account-key-file={pki.path('sa.pub')}",
                f"--service-account-signing-key-file={pki.path('sa.key')}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
            ],
            run_dir,
        )
        context = ssl.create_default_context(cafile=str(pki.ca_crt))
        context.load_cert_chain(str(pki.path("admin.crt")), str(pki.path("admin.key")))
        self._wait_ready(component, f"https://127.0.0.1:{port}/readyz", timeout, context)

    def _insecure(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # self-signed serving certificate of a local process
        return context

    def _start_controller_manager(
        self, assets: Path, run_dir: Path, ports: dict[str, int], timeout: float
    ) -> None:
        kubeconfig = str(run_dir / "kubeconfig")
        component = self._spawn(
            "kube-controller-manager",
            assets / "kube-controller-manager",
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['controller-manager']}",
                f"--cert-dir={run_dir / 'controller-manager'}",
                f"--controllers={CONTROLLERS}",
            ],
            run_dir,
        )
        self._wait_ready(
            component,
            f"https://127.0.0.1:{ports['controller-manager']}/healthz",
            timeout,
            self._insecure(),
        )

    def _start_scheduler(
        self, assets: Path, run_dir: Path, ports: dict[str, int], timeout: float
    ) -> None:
        kubeconfig = str(run_dir / "kubeconfig")
        component = self._spawn(
            "kube-scheduler",
            assets / "kube-scheduler",
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['scheduler']}",
                f"--cert-dir={run_dir / 'scheduler'}",
            ],
            run_dir,
        )
        self._wait_ready(
            component, f"https://127.0.0.1:{ports['scheduler']}/healthz", timeout, self._insecure()
        )

    def _start_kwok(
        self, assets: Path, run_dir: Path, ports: dict[str, int], timeout: float
    ) -> None:
        stages = run_dir / "kwok-stages.yaml"
        stages.write_text(stages_yaml(assets))
        component = self._spawn(
            "kwok",
            assets / "kwok",
            [
                f"--kubeconfig={run_dir / 'kubeconfig'}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{ports['kwok']}",
            ],
            run_dir,
        )
        self._wait_ready(component, f"http://127.0.0.1:{ports['kwok']}/healthz", timeout)

    # - stop -

    def down(self, keep_files: bool = False) -> list[str]:
        """Stop every recorded process in reverse start order; remove the run folder."""
        state = self.state or PlaneState.load(self.home)
        if state is None:
            return []
        stopped = []
        for component in reversed(state.components):
            if _is_ours(component):
                stop_component(component)
                stopped.append(f"{component.name} (pid {component.pid})")
        if not keep_files:
            shutil.rmtree(state.run_dir, ignore_errors=True)
            for name in ("state.json", "kubeconfig", "env"):
                (Path(state.home) / name).unlink(missing_ok=True)
        self.state = None
        return stopped

    def status(self) -> dict[str, Any]:
        """The recorded state with each process's liveness."""
        state = PlaneState.load(self.home)
        if state is None:
            return {"running": False, "home": str(self.home)}
        alive = {c.name: _is_ours(c) for c in state.components}
        return {"running": all(alive.values()) and bool(alive), "alive": alive, **asdict(state)}


# --- fake GPU nodes -------------------------------------------------------------------------


def load_profile(name_or_path: str) -> dict[str, Any]:
    """A node profile by name (hack/k8s-testenv/profiles/<name>.yaml) or path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = TESTENV / "profiles" / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (TESTENV / "profiles").glob("*.yaml"))
        raise PlaneError(f"unknown node profile {name_or_path!r}; known: {', '.join(known)}")
    profile = yaml.safe_load(path.read_text())
    if not isinstance(profile, dict) or not isinstance(profile.get("nodeGroups"), list):
        raise PlaneError(f"{path}: a profile needs a `nodeGroups` list")
    return profile


def node_manifests(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Expand a profile into Node objects (labels, capacity and allocatable)."""
    nodes: list[dict[str, Any]] = []
    for group in profile["nodeGroups"]:
        kind = group.get("kind", "hgx")
        prefix = group["prefix"]
        if kind == "rack":
            for rack in range(int(group["racks"])):
                # GPU feature discovery writes <NVLink cluster UUID>.<clique id>.
                cluster_uuid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{prefix}-rack{rack}.gpupool.local")
                clique = f"{cluster_uuid}.1"
                for slot in range(int(group["nodesPerRack"])):
                    nodes.append(
                        gpu_node_manifest(f"{prefix}-r{rack}-n{slot:02d}", group, clique=clique)
                    )
        elif kind in ("hgx", "shared"):
            for index in range(int(group["count"])):
                nodes.append(gpu_node_manifest(f"{prefix}-{index}", group))
        else:
            raise PlaneError(f"node group {prefix!r}: unknown kind {kind!r} (hgx, rack, shared)")
    names = [n["metadata"]["name"] for n in nodes]
    if len(set(names)) != len(names):
        raise PlaneError("the profile yields duplicate node names")
    return nodes


def gpu_node_manifest(
    name: str, group: dict[str, Any], clique: str | None = None
) -> dict[str, Any]:
    """One fake GPU Node for KWOK from a profile's node group (see profiles/default.yaml)."""
    gpus = int(group["gpus"])
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": group.get("arch", "amd64"),
        "type": "kwok",
        "topology.kubernetes.io/zone": group.get("zone", "zone-a"),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": group["product"],
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(group.get("gpuMemoryMiB", 81559)),
    }
    if "family" in group:
        labels["nvidia.com/gpu.family"] = group["family"]
    if clique is not None:
        labels["nvidia.com/gpu.clique"] = clique
    allocatable_gpus = gpus
    if group.get("kind") == "shared":
        # Time-slicing as the NVIDIA device plugin advertises it: each physical GPU is offered
        # `replicas` times, and the product label gets a -SHARED suffix.
        replicas = int(group.get("replicas", 4))
        allocatable_gpus = gpus * replicas
        labels["nvidia.com/gpu.product"] = f"{group['product']}-SHARED"
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    labels.update({str(k): str(v) for k, v in (group.get("labels") or {}).items()})
    resources = {
        "cpu": str(group.get("cpu", "128")),
        "memory": str(group.get("memory", "1Ti")),
        "pods": str(group.get("pods", 110)),
        "nvidia.com/gpu": str(allocatable_gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def _api(kubeconfig: Path) -> Any:
    from kubernetes import client, config

    loader: Any = config  # the kubernetes package is untyped
    return client.CoreV1Api(loader.new_client_from_config(config_file=str(kubeconfig)))


def create_nodes(kubeconfig: Path, nodes: list[dict[str, Any]]) -> None:
    """Create the Node objects (their status is kept on create)."""
    core = _api(kubeconfig)
    for node in nodes:
        core.create_node(node)


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
        "--controllers",
        action="store_true",
        help=f"also run kube-controller-manager ({CONTROLLERS})",
    )
    up.add_argument("--scheduler", action="store_true", help="also run kube-scheduler")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each step")
    down = sub.add_parser("down", help="stop what `up` started, by process id")
    down.add_argument("--keep-files", action="store_true", help="keep logs and etcd data")
    sub.add_parser("status", help="show the recorded plane and whether its processes run")
    args = parser.parse_args(argv)

    plane = Plane(args.home.resolve())
    try:
        if args.command == "up":
            state = plane.up(args.profile, args.controllers, args.scheduler, args.timeout)
            print(state.env_text(), end="")
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
