"""Unit tests of hack/k8s_plane.py that need no Kubernetes binaries."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hack import k8s_plane


def test_default_profile_expands_to_hgx_racks_and_shared_nodes() -> None:
    """h100 nodes are their own domain; each GB200 rack is one 18 x 4 GPU clique."""
    nodes = k8s_plane.node_manifests(k8s_plane.load_profile("default"))
    by_product = Counter(n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in nodes)
    assert by_product == {
        "NVIDIA-H100-80GB-HBM3": 4,
        "NVIDIA-GB200": 36,
        "NVIDIA-L40S-SHARED": 2,
    }
    cliques = Counter(
        n["metadata"]["labels"]["nvidia.com/gpu.clique"]
        for n in nodes
        if "nvidia.com/gpu.clique" in n["metadata"]["labels"]
    )
    assert sorted(cliques.values()) == [18, 18]
    for node in nodes:
        labels = node["metadata"]["labels"]
        gpus = node["status"]["allocatable"]["nvidia.com/gpu"]
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert node["status"]["capacity"] == node["status"]["allocatable"]
        if labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3":
            assert gpus == "8" and "nvidia.com/gpu.clique" not in labels
        elif labels["nvidia.com/gpu.product"] == "NVIDIA-GB200":
            assert gpus == "4" and labels["kubernetes.io/arch"] == "arm64"
        else:  # time-sliced: 4 physical GPUs offered 4 times each
            assert gpus == "16"
            assert labels["nvidia.com/gpu.replicas"] == "4"
            assert labels["nvidia.com/gpu.count"] == "4"


def test_every_shipped_profile_is_valid() -> None:
    """Each profile in hack/k8s-testenv/profiles expands without duplicate names."""
    profiles = sorted((k8s_plane.TESTENV / "profiles").glob("*.yaml"))
    assert profiles
    for path in profiles:
        assert k8s_plane.node_manifests(k8s_plane.load_profile(str(path)))


def test_profile_errors_are_clear(tmp_path: Path) -> None:
    """Unknown profiles and unknown node kinds are refused with their names."""
    with pytest.raises(k8s_plane.PlaneError, match="unknown node profile 'nope'; known: "):
        k8s_plane.load_profile("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"nodeGroups": [{"kind": "dgx", "prefix": "x"}]}))
    with pytest.raises(k8s_plane.PlaneError, match="unknown kind 'dgx'"):
        k8s_plane.node_manifests(k8s_plane.load_profile(str(bad)))
    bad.write_text("nodes: []\n")
    with pytest.raises(k8s_plane.PlaneError, match="needs a `nodeGroups` list"):
        k8s_plane.load_profile(str(bad))


def test_pki_signs_a_local_serving_cert_and_a_system_masters_client(tmp_path: Path) -> None:
    """The serving cert covers 127.0.0.1 and localhost; the admin is in system:masters."""
    pki = k8s_plane.make_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.path("apiserver.crt").read_bytes())
    admin = x509.load_pem_x509_certificate(pki.path("admin.crt").read_bytes())
    ca_key = ca.public_key()
    assert isinstance(ca_key, ec.EllipticCurvePublicKey)
    for cert in (serving, admin):
        cert.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    orgs = admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [o.value for o in orgs] == ["system:masters"]
    assert oct(pki.path("admin.key").stat().st_mode & 0o777) == "0o600"

    config = yaml.safe_load(k8s_plane.kubeconfig_text("https://127.0.0.1:6443", pki))
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert config["current-context"] == "gpupool-local"


def test_missing_binaries_name_the_folder_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without binaries the error says where it looked and how to build them."""
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    with pytest.raises(k8s_plane.PlaneError) as exc_info:
        k8s_plane.find_assets()
    message = str(exc_info.value)
    assert str(tmp_path) in message and "kube-apiserver" in message
    assert "make k8s-build" in message


def test_cache_folder_is_keyed_by_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The cache folder name carries the Kubernetes version from versions.env."""
    monkeypatch.setenv("GPUPOOL_CACHE", str(tmp_path))
    version = k8s_plane.read_versions()["K8S_VERSION"]
    assert version.startswith("v1.36.")
    assert k8s_plane.cache_dir() == tmp_path / f"k8s-{version}"


def test_stop_component_terminates_only_the_recorded_process(tmp_path: Path) -> None:
    """SIGTERM stops the process; a record whose start time differs (reused pid) is left alone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = k8s_plane.process_start_time(proc.pid)
        assert started is not None
        log = str(tmp_path / "x.log")
        stranger = k8s_plane.Component("other", proc.pid, log, sys.executable, started - 1)
        k8s_plane.stop_component(stranger)
        assert proc.poll() is None  # another process under a recycled pid: untouched
        ours = k8s_plane.Component("sleeper", proc.pid, log, sys.executable, started)
        k8s_plane.stop_component(ours, timeout=10)
        assert k8s_plane.process_start_time(proc.pid) is None  # gone (and reaped by stop)
        proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_down_without_a_plane_does_nothing(tmp_path: Path) -> None:
    """`down` on a folder with no state file stops nothing and does not fail."""
    assert k8s_plane.Plane(tmp_path).down() == []
    assert k8s_plane.Plane(tmp_path).status() == {"running": False, "home": str(tmp_path)}


def test_log_tail_returns_the_last_lines(tmp_path: Path) -> None:
    """Start-up failures quote the end of the component's log."""
    log = tmp_path / "etcd.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert k8s_plane.log_tail(log, 3) == "line 97\nline 98\nline 99"
    assert "no log" in k8s_plane.log_tail(tmp_path / "missing.log")


def _fake_assets(folder: Path, etcd_script: str) -> Path:
    """An assets folder whose binaries are shell scripts (only etcd is ever run)."""
    folder.mkdir()
    for name in k8s_plane.BINARIES:
        path = folder / name
        path.write_text("#!/bin/sh\n" + (etcd_script if name == "etcd" else "exit 1\n"))
        path.chmod(0o755)
    return folder


def test_a_component_that_exits_stops_start_up_with_its_log(tmp_path: Path) -> None:
    """The error names the component and quotes its log; nothing is left running."""
    assets = _fake_assets(tmp_path / "bin", 'echo "etcd: unknown flag --bogus" >&2\nexit 2\n')
    plane = k8s_plane.Plane(tmp_path / "home", assets, log=lambda _msg: None)
    with pytest.raises(k8s_plane.PlaneError) as exc_info:
        plane.up(timeout=20)
    message = str(exc_info.value)
    assert "etcd exited during start-up" in message
    assert "unknown flag --bogus" in message
    assert not (tmp_path / "home" / "state.json").exists()


def test_a_component_that_never_gets_ready_times_out_and_is_stopped(tmp_path: Path) -> None:
    """A hung component is reported with the URL it was polled on, then stopped by pid."""
    assets = _fake_assets(tmp_path / "bin", 'echo "etcd: waiting forever"\nexec sleep 300\n')
    # (exec: the recorded pid is the sleep itself, so stopping it leaves no orphan)
    plane = k8s_plane.Plane(tmp_path / "home", assets, log=lambda _msg: None)
    with pytest.raises(k8s_plane.PlaneError) as exc_info:
        plane.up(timeout=2)
    message = str(exc_info.value)
    assert "etcd not ready at http://127.0.0.1:" in message and "/health after 2 s" in message
    assert "waiting forever" in message
    assert not (tmp_path / "home" / "state.json").exists()


def test_free_ports_are_distinct_and_bindable() -> None:
    """Each component gets its own port on 127.0.0.1."""
    ports = k8s_plane.free_ports(("a", "b", "c", "d", "e", "f"))
    assert len(set(ports.values())) == 6
    for port in ports.values():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_taken_port_is_retried_with_fresh_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'address already in use' in a component's log makes up() try again, then give up."""
    assets = _fake_assets(tmp_path / "bin", 'echo "listen tcp: address already in use"\nexit 1\n')
    plane = k8s_plane.Plane(tmp_path / "home", assets, log=lambda _msg: None)
    calls = []
    real = k8s_plane.free_ports
    monkeypatch.setattr(k8s_plane, "free_ports", lambda names: calls.append(1) or real(names))
    with pytest.raises(k8s_plane.PlaneError, match="address already in use"):
        plane.up(timeout=10)
    assert len(calls) == k8s_plane.PORT_ATTEMPTS
