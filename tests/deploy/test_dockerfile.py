"""The image runs the decision core compiled, as `make native` builds it (Dockerfile).

There is no Docker here to build the image, so these tests check what the build's steps rest
on: a stage that installs the `native` tools and runs `hack/build_native.py --require` (which
`make test` runs too, so CI proves the command itself), the final stage copying that build to
where `gpupool.scheduler.native` looks for it inside the image, and a checkout's own build
never sent to Docker in its place.
"""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest
from deployment_files import ROOT, dockerfile_stages

from gpupool.scheduler import native


def test_a_stage_compiles_the_core_and_the_image_keeps_only_its_build() -> None:
    *builders, (base, _, final) = dockerfile_stages()
    compiled = [
        name
        for _, name, steps in builders
        if any(s.startswith("RUN ") and "hack/build_native.py --require" in s for s in steps)
    ]
    assert compiled, "no stage runs hack/build_native.py --require"
    (stage,) = compiled
    image = {name: image for image, name, _ in builders}[stage]
    # The build's key hashes the interpreter's ABI: the same Python line on both stages.
    assert image.split(":")[1].split("-")[0] == base.split(":")[1].split("-")[0] == "3.11"
    steps = {name: steps for _, name, steps in builders}[stage]
    installs = [shlex.split(step)[1:] for step in steps if step.startswith("RUN pip install")]
    assert any(".[native]" in words for words in installs), steps
    workdir = next(step.split()[1] for step in final if step.startswith("WORKDIR "))
    copies = [step.split() for step in final if step.startswith(f"COPY --from={stage} ")]
    assert [words[2:] for words in copies] == [[f"{workdir}/build/native", "build/native"]]
    # Copied before `pip install .`, whose site-packages copy is not what runs: the checkout
    # in WORKDIR is (PYTHONPATH), and the loader looks beside it.
    assert any(f"PYTHONPATH={workdir}" in step for step in final if step.startswith("ENV "))


@pytest.fixture
def no_native_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPOOL_NATIVE_DIR", raising=False)


def test_the_loader_looks_for_the_build_where_the_image_puts_it(no_native_dir: None) -> None:
    """``native.native_root()`` is ``build/native`` beside the package: /app/build/native in
    the image, where the final stage copies the build."""
    assert native.native_root() == ROOT / "build" / "native"


def test_a_checkouts_own_build_is_never_sent_to_docker() -> None:
    """A stale build of the developer's checkout never reaches the image's context: the build
    stage makes the only one."""
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "build" in ignored or "build/" in ignored


def test_the_native_tools_are_an_extra_the_dev_tools_include() -> None:
    """The build stage installs ``.[native]`` (mypy, whose mypyc compiles, and setuptools);
    ``make venv`` installs ``.[dev]``, which includes it, so ``make native`` finds the same
    tools, pinned once."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", requirement)[0] for requirement in extras["native"]}
    assert names == {"mypy", "setuptools"}
    assert "gpupool[native]" in extras["dev"]
    assert not any(r.startswith("mypy") for r in extras["dev"])  # pinned once, in native
