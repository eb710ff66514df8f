"""``python -m pev …``: the bundled ``pev`` binary, with the same arguments and exit code."""

from __future__ import annotations

import os
import subprocess
import sys

from ._bin import find_pev_bin


def main() -> None:
    pev = find_pev_bin()
    if sys.platform == "win32":
        sys.exit(subprocess.run([pev, *sys.argv[1:]]).returncode)
    os.execvp(pev, [pev, *sys.argv[1:]])


if __name__ == "__main__":
    main()
