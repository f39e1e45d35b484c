"""What `pip install` of the wheel gives: `convo` on PATH beside an importable, typed client."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

import convo


def test_convo_on_path_runs() -> None:
    exe = shutil.which("convo")
    assert exe, "convo is not on PATH"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"convo {convo.__version__}"


def test_the_client_finds_the_installed_binary() -> None:
    found = convo.find_convo_bin()
    if "CONVO_BINARY" in os.environ:
        assert found == os.environ["CONVO_BINARY"]
    else:  # the wheel's binary, in this environment's scripts folder, beside its package
        assert pathlib.Path(found) == pathlib.Path(sysconfig.get_path("scripts")) / "convo"
        assert pathlib.Path(convo.__file__).is_relative_to(sysconfig.get_path("purelib"))
    with convo.Client(store="memory") as c:
        assert c.server_info["version"] == convo.__version__


def test_python_dash_m_convo() -> None:
    out = subprocess.run([sys.executable, "-m", "convo", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("convo ")


def test_typed_package() -> None:
    pkg = pathlib.Path(convo.__file__).parent
    assert (pkg / "py.typed").is_file()
    for mod in ("errors", "pycodeloop", "agent", "integrations"):
        __import__(f"convo.{mod}")


def test_frameworks_come_only_with_their_extras() -> None:
    """`pip install convo` pulls in no framework; `convo[openai-agents]` and
    `convo[pydantic-ai]` pull in the one they name."""
    from importlib import metadata

    try:
        dist = metadata.distribution("convo")
    except metadata.PackageNotFoundError:
        pytest.skip("convo is imported from the source tree, not installed")
    requires = dist.requires or []
    assert all("extra ==" in r for r in requires), requires
    assert {"openai-agents", "pydantic-ai"} <= set(dist.metadata.get_all("Provides-Extra") or [])
    by_extra = {
        r.split(";")[1].split("==")[1].strip().strip("'\"").replace("_", "-"): r.split(";")[0] for r in requires
    }
    assert by_extra["openai-agents"].startswith("openai-agents")
    assert by_extra["pydantic-ai"].startswith("pydantic-ai-slim")
