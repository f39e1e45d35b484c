"""``python -m convo ...`` runs the convo executable the wheel installed."""

from __future__ import annotations

import os
import subprocess
import sys

from ._binary import find_convo_bin


def main() -> None:
    binary = find_convo_bin()
    if sys.platform == "win32":  # pragma: no cover
        sys.exit(subprocess.call([binary, *sys.argv[1:]]))
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
