"""Tests of hack/k8s_plane.py: profiles, kwokctl's configuration, start-up failures, the guard.

Most need no Kubernetes binaries. Those marked ``k8s`` run the real kwokctl, over fake
component binaries or a one-node plane, and fail (never skip) when it is not built.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from hack import k8s_plane


def test_default_profile_expands_to_hgx_racks_shared_and_mig_nodes() -> None:
    """h100 nodes are their own domain; each GB200 rack is one 18 x 4 GPU clique."""
    nodes = k8s_plane.node_manifests(k8s_plane.load_profile("default"))
    by_product = Counter(n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in nodes)
    assert by_product == {
        "NVIDIA-H100-80GB-HBM3": 4,
        "NVIDIA-GB200": 36,
        "NVIDIA-L40S-SHARED": 2,
        "NVIDIA-A100-SXM4-80GB": 2,
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
        elif labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB":  # MIG, mixed
            assert gpus == "0" and labels["nvidia.com/mig.config"] == "all-balanced"
        else:  # time-sliced: 4 physical GPUs offered 4 times each
            assert gpus == "16"
            assert labels["nvidia.com/gpu.replicas"] == "4"
            assert labels["nvidia.com/gpu.count"] == "4"


def test_nodes_are_named_as_kwokctl_numbers_them() -> None:
    """<set>-<serial>, the serial as wide as the set's largest index; a rack is a set."""
    names = [
        n["metadata"]["name"] for n in k8s_plane.node_manifests(k8s_plane.load_profile("default"))
    ]
    assert names[:4] == ["h100-0", "h100-1", "h100-2", "h100-3"]
    assert "gb200-r0-00" in names and "gb200-r1-17" in names
    assert {"l40s-shared-0", "l40s-shared-1", "a100-mig-0", "a100-mig-1"} <= set(names)
    b4 = k8s_plane.node_sets(k8s_plane.load_profile("b4"))
    assert [(s.name, s.replicas, s.node_name(499)) for s in b4] == [("h100", 500, "h100-499")]


def test_a_mig_node_offers_each_profile_of_its_layout() -> None:
    """allocatable nvidia.com/mig-<profile> = instances per GPU x GPUs; no whole GPU."""
    group = {
        "kind": "mig",
        "prefix": "a100-mig",
        "gpus": 8,
        "product": "NVIDIA-A100-SXM4-80GB",
        "migModel": "A100-80GB",
        "migConfig": "all-3g.40gb",
        "migLayout": {"3g.40gb": 2},
    }
    node = k8s_plane.gpu_node_manifest("m", group)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "16"
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == "all-3g.40gb"
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-3g.40gb.count"] == "16"
    assert labels["nvidia.com/mig-3g.40gb.slices.gi"] == "3"


def test_a_mig_layout_gpupool_would_refuse_is_refused_here_too() -> None:
    """The plane checks layouts with gpupool/scheduler/mig.py: 3 x 3g.40gb exceed the card."""
    group = {"kind": "mig", "prefix": "bad", "gpus": 8, "product": "NVIDIA-A100-SXM4-80GB"}
    group |= {"migModel": "A100-80GB", "migConfig": "custom", "migLayout": {"3g.40gb": 3}}
    with pytest.raises(k8s_plane.PlaneError, match=r"'bad': MIG layout: 3 x 3g\.40gb exceeds"):
        k8s_plane.gpu_node_manifest("m", group)


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
    with pytest.raises(
        k8s_plane.PlaneError, match="unknown kind 'dgx' \\(hgx, rack, shared, mig\\)"
    ):
        k8s_plane.node_manifests(k8s_plane.load_profile(str(bad)))
    bad.write_text("nodes: []\n")
    with pytest.raises(k8s_plane.PlaneError, match="needs a `nodeGroups` list"):
        k8s_plane.load_profile(str(bad))


def test_kwokctl_gets_only_local_binaries_and_the_chosen_ports(tmp_path: Path) -> None:
    """Every *Binary option is a file in the assets folder: kwokctl has nothing to download."""
    ports = dict(zip(k8s_plane.PORT_NAMES, range(40001, 40007), strict=True))
    config = k8s_plane.kwokctl_configuration(tmp_path, ports)
    options = config["options"]
    binaries = {k: v for k, v in options.items() if k.endswith("Binary")}
    assert binaries and all(Path(v).parent == tmp_path for v in binaries.values())
    assert {Path(v).name for v in binaries.values()} <= set(k8s_plane.BINARIES)
    assert options["runtime"] == "binary" and options["bindAddress"] == "127.0.0.1"
    assert options["kubeApiserverPort"] == ports["kube-apiserver"]
    assert options["etcdPeerPort"] == ports["etcd-peer"]
    assert options["components"] == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok-controller",
    ]
    args = {
        (patch["name"], a["key"]): a["value"]
        for patch in config["componentsPatches"]
        for a in patch["extraArgs"]
    }
    assert args[("kube-controller-manager", "controllers")] == k8s_plane.CONTROLLERS
    assert args[("kube-apiserver", "watch-cache-sizes")] == "pods#0,nodes#0"
    assert args[("kwok-controller", "manage-nodes-with-annotation-selector")] == (
        "kwok.x-k8s.io/node=fake"
    )
    bare = k8s_plane.kwokctl_configuration(tmp_path, ports, controllers=False, scheduler=False)
    assert bare["options"]["components"] == ["etcd", "kube-apiserver", "kwok-controller"]


def test_the_kubeconfig_embeds_kwokctls_certificate_files(tmp_path: Path) -> None:
    """.k8s/kubeconfig stands alone: it can be copied to another machine or container."""
    for name in ("ca.crt", "admin.crt", "admin.key"):
        (tmp_path / name).write_text(f"PEM of {name}")
    source = {
        "clusters": [
            {
                "name": "kwok-gpupool",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority": str(tmp_path / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": "kwok-gpupool",
                "user": {
                    "client-certificate": str(tmp_path / "admin.crt"),
                    "client-key": str(tmp_path / "admin.key"),
                },
            }
        ],
    }
    (tmp_path / "kubeconfig.yaml").write_text(yaml.safe_dump(source))
    config = yaml.safe_load(k8s_plane.embedded_kubeconfig(tmp_path / "kubeconfig.yaml"))
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"PEM of ca.crt"
    user = config["users"][0]["user"]
    assert base64.b64decode(user["client-key-data"]) == b"PEM of admin.key"
    assert config["current-context"] == "gpupool-local"


def test_node_sets_become_kwokctl_resources_with_the_name_left_to_kwokctl() -> None:
    """One KwokctlResource per set; its template is the node with kwokctl's {{ Name }}."""
    sets = k8s_plane.node_sets(k8s_plane.load_profile("small"))
    docs = list(yaml.safe_load_all(k8s_plane.kwokctl_resources_yaml(sets)))
    assert [d["metadata"]["name"] for d in docs] == [s.resource for s in sets]
    assert all(d["kind"] == "KwokctlResource" for d in docs)
    template = yaml.safe_load(docs[0]["template"])
    assert template["metadata"]["name"] == "{{ Name }}"
    assert template["metadata"]["labels"]["kubernetes.io/hostname"] == "{{ Name }}"


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


def test_down_stops_a_component_started_but_never_recorded(tmp_path: Path) -> None:
    """A failed start-up kills `kwokctl create cluster` at once; a component it had started
    but not yet written a pid file for is found by its binary and stopped with the rest."""
    home = tmp_path / "home"
    workdir = k8s_plane.cluster_dir(home)
    (workdir / "bin").mkdir(parents=True)
    (workdir / "pids").mkdir()
    binary = workdir / "bin" / "kube-scheduler"
    binary.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    binary.chmod(0o755)
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "kwokctl").write_text("#!/bin/sh\nexit 0\n")  # deletes nothing, as if killed
    (assets / "kwokctl").chmod(0o755)
    home.mkdir(exist_ok=True)
    state = k8s_plane.PlaneState(
        home=str(home), workdir=str(workdir), kubeconfig="", server="", assets=str(assets)
    )
    state.save()
    stray = subprocess.Popen([str(binary)], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not k8s_plane.processes_under(workdir / "bin") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert k8s_plane.processes_under(workdir / "bin") == [stray.pid]
        assert k8s_plane.running_components(workdir) == []  # no pid file: not recorded
        k8s_plane.Plane(home).down()
        assert k8s_plane.process_start_time(stray.pid) is None  # killed and reaped by down
        assert _processes_under(home) == []
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_a_pid_file_written_while_start_up_looks_is_not_a_death(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kwokctl writes the pid files while start-up watches for a component that died.

    Read twice, a pid file that appeared in between named a component that was not among
    the live ones read the first time: "kube-apiserver exited during start-up", its log
    empty (CI, twice). One reading answers both questions now.
    """
    workdir = tmp_path / "cluster"
    (workdir / "bin").mkdir(parents=True)
    binary = workdir / "bin" / "kube-apiserver"
    binary.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    binary.chmod(0o755)
    starting = subprocess.Popen([str(binary)])
    try:
        deadline = time.monotonic() + 10
        while not k8s_plane.processes_under(workdir / "bin") and time.monotonic() < deadline:
            time.sleep(0.05)
        readings = iter([{}, {"kube-apiserver": starting.pid}])  # not written, then written
        monkeypatch.setattr(k8s_plane, "recorded_pids", lambda _workdir: next(readings))
        k8s_plane.Plane._fail_if_one_died(workdir)  # raised "kube-apiserver exited" before
    finally:
        starting.kill()
        starting.wait()


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


@pytest.fixture
def kwokctl() -> Path:
    """The real kwokctl from the build cache; the tests fail (never skip) without it."""
    try:
        return k8s_plane.find_assets() / "kwokctl"
    except k8s_plane.PlaneError as exc:
        pytest.fail(f"these tests run the real kwokctl: {exc}", pytrace=False)


def _fake_assets(folder: Path, kwokctl: Path, etcd_body: str) -> Path:
    """Component binaries that kwokctl can run: they print a version, then etcd runs
    ``etcd_body`` (Python) and the others wait to be killed."""
    folder.mkdir()
    for name in k8s_plane.BINARIES:
        if name == "kwokctl":
            (folder / name).symlink_to(kwokctl)
            continue
        body = etcd_body if name == "etcd" else "time.sleep(300)"
        if name == "kubectl":  # kwokctl asks it whether the API server serves: never
            body = "sys.exit(1)"
        script = (
            f"#!{sys.executable}\nimport sys, time\n"
            'if sys.argv[1:] == ["--version"]:\n    print("v1.36.3")\n    sys.exit(0)\n'
            f"{body}\n"
        )
        path = folder / name
        path.write_text(script)
        path.chmod(0o755)
    (folder / "kwok-stages.yaml").write_text("")
    return folder


def _processes_under(folder: Path) -> list[str]:
    """The live processes running a binary from under ``folder`` (the plane's work folder),
    as "pid argv"; a zombie (its cmdline empty) is not one."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")[:2]
            except OSError:
                continue
            words = [arg.decode(errors="replace") for arg in argv]
            if any(word.startswith(str(folder)) for word in words):
                found.append(f"{proc.name} {' '.join(words)}")
    return found


@pytest.mark.k8s
def test_a_component_that_exits_stops_start_up_with_its_log(tmp_path: Path, kwokctl: Path) -> None:
    """The error names the component and quotes its log; nothing is left running."""
    body = 'print("etcd: unknown flag --bogus", file=sys.stderr)\nsys.exit(2)'
    assets = _fake_assets(tmp_path / "bin", kwokctl, body)
    plane = k8s_plane.Plane(tmp_path / "home", assets, log=lambda _msg: None)
    with pytest.raises(k8s_plane.PlaneError) as exc_info:
        plane.up(timeout=60)
    message = str(exc_info.value)
    assert "etcd exited during start-up" in message
    assert "unknown flag --bogus" in message
    assert not (tmp_path / "home" / "state.json").exists()
    assert _processes_under(tmp_path / "home") == []


@pytest.mark.k8s
def test_a_component_that_never_gets_ready_times_out_and_is_stopped(
    tmp_path: Path, kwokctl: Path
) -> None:
    """A hung component is reported with the URL it was polled on, then stopped."""
    assets = _fake_assets(
        tmp_path / "bin", kwokctl, 'print("etcd: waiting forever", flush=True)\ntime.sleep(300)'
    )
    plane = k8s_plane.Plane(tmp_path / "home", assets, log=lambda _msg: None)
    with pytest.raises(k8s_plane.PlaneError) as exc_info:
        plane.up(timeout=3)
    message = str(exc_info.value)
    assert "etcd not ready at http://127.0.0.1:" in message and "/health after 3 s" in message
    assert "waiting forever" in message
    assert not (tmp_path / "home" / "state.json").exists()
    assert _processes_under(tmp_path / "home") == []


def test_free_ports_are_distinct_and_bindable() -> None:
    """Each component gets its own port on 127.0.0.1."""
    ports = k8s_plane.free_ports(("a", "b", "c", "d", "e", "f"))
    assert len(set(ports.values())) == 6
    for port in ports.values():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


@pytest.mark.k8s
def test_a_taken_port_is_retried_with_fresh_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwokctl: Path
) -> None:
    """'address already in use' in a component's log makes up() try again, then give up."""
    body = 'print("listen tcp: address already in use")\nsys.exit(1)'
    assets = _fake_assets(tmp_path / "bin", kwokctl, body)
    plane = k8s_plane.Plane(tmp_path / "home", assets, log=lambda _msg: None)
    calls = []
    real = k8s_plane.free_ports
    monkeypatch.setattr(k8s_plane, "free_ports", lambda names: calls.append(1) or real(names))
    with pytest.raises(k8s_plane.PlaneError, match="address already in use"):
        plane.up(timeout=60)
    assert len(calls) == k8s_plane.PORT_ATTEMPTS
    assert _processes_under(tmp_path / "home") == []


@pytest.mark.k8s
def test_a_plane_tied_to_its_process_dies_with_it_even_on_sigkill(
    tmp_path: Path, kwokctl: Path
) -> None:
    """The guard kills kwokctl's detached components once the process that started them dies."""
    profile = tmp_path / "one.yaml"
    group = {
        "kind": "hgx",
        "prefix": "n",
        "count": 1,
        "gpus": 8,
        "product": "NVIDIA-H100-80GB-HBM3",
    }
    profile.write_text(yaml.safe_dump({"nodeGroups": [group]}))
    home = tmp_path / "home"
    starter = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from hack import k8s_plane
        plane = k8s_plane.Plane(Path({str(home)!r}), tie_to_parent=True, log=lambda _m: None)
        plane.up({str(profile)!r}, controllers=False, scheduler=False)
        print("up", flush=True)
        time.sleep(300)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", starter],
        cwd=k8s_plane.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "up\n", proc.stderr.read() if proc.stderr else ""
        workdir = k8s_plane.cluster_dir(home)
        assert len(k8s_plane.running_components(workdir)) == 3  # etcd, apiserver, kwok
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while k8s_plane.running_components(workdir) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert k8s_plane.running_components(workdir) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        k8s_plane.Plane(home).down()
