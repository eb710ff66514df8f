"""Finding the ``pev`` binary the wheel installed (ruff's ``_find_ruff`` search, plus PEV_BIN).

The Linux wheels install ``pev`` and its sandbox helper ``pev-sandbox`` side by side into the
environment's scripts directory (the helper must sit beside ``pev``: the sandbox re-executes it).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from ._errors import PevBinaryNotFound

_EXE = "pev" + (sysconfig.get_config_var("EXE") or "")


def _candidate_dirs() -> list[str]:
    dirs: list[str] = []
    dirs.append(sysconfig.get_path("scripts"))
    # A `pip install --user` (the user scheme) and a `--prefix`/`--target` install.
    user_scheme = f"{os.name}_user" if os.name != "nt" else "nt_user"
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=user_scheme))
    except KeyError:
        pass
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs.append(os.path.join(pkg_root, "bin"))
    # site-packages/../../../bin for `--prefix`, and the interpreter's own directory.
    dirs.append(os.path.normpath(os.path.join(pkg_root, "..", "..", "..", "bin")))
    dirs.append(os.path.dirname(sys.executable))
    return dirs


def find_pev_bin() -> str:
    """The path of the ``pev`` executable: ``PEV_BIN`` when set, else the one installed with this
    package, else the first on PATH. Raises ``PevBinaryNotFound``."""
    override = os.environ.get("PEV_BIN")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise PevBinaryNotFound(f"PEV_BIN={override!r} is not an executable file")
    for directory in _candidate_dirs():
        path = os.path.join(directory, _EXE)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("pev")
    if found:
        return found
    raise PevBinaryNotFound(
        "no pev executable: the Linux wheels of pev-harness carry one (elsewhere only the "
        "in-process linter is available); set PEV_BIN, or put pev on PATH (`cargo install`)"
    )
