"""Finding the convo executable: the one the wheel installed beside this package."""

from __future__ import annotations

import os
import shutil
import sysconfig

__all__ = ["find_convo_bin"]

_EXE = "convo" + (sysconfig.get_config_var("EXE") or "")


def _candidates() -> list[str]:
    dirs: list[str] = []
    # The environment this package is installed in (a venv, the system, a --target dir).
    dirs.append(sysconfig.get_path("scripts"))
    # pip install --user
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=sysconfig.get_preferred_scheme("user")))
    except (KeyError, ValueError):
        pass
    # pip install --target DIR / --prefix: the package's own folder's neighbours.
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs.append(os.path.join(pkg_root, "bin"))
    dirs.append(os.path.join(os.path.dirname(pkg_root), "bin"))
    out = []
    for d in dirs:
        if d:
            out.append(os.path.join(d, _EXE))
    return out


def find_convo_bin(binary: str | os.PathLike[str] | None = None) -> str:
    """The path of the convo executable.

    Looked up in this order: ``binary`` when given, the ``CONVO_BINARY`` environment
    variable, the scripts folder of the environment this package is installed in (where
    the wheel puts it), the user scripts folder, then ``PATH``.
    """
    if binary is not None:
        path = os.fspath(binary)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"convo binary not found at {path!r} (given explicitly)")
        return path
    env = os.environ.get("CONVO_BINARY")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"convo binary not found at {env!r} (from CONVO_BINARY)")
        return env
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(_EXE)
    if found:
        return found
    raise FileNotFoundError(
        "the convo executable was not found: install the `convo` wheel (it carries the "
        "binary), set CONVO_BINARY, or pass binary=... (looked in "
        + ", ".join(repr(p) for p in _candidates())
        + " and PATH)"
    )
