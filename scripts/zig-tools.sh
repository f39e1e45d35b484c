#!/usr/bin/env bash
# cargo-zigbuild and zig from PyPI, as scripts/release and scripts/pgo build with them.
# Sourced; `zig_tools` installs the two when either is missing, and puts the folders pip
# puts commands in on PATH (exported): the interpreter's and a user install's, even where
# the shell's PATH lacks them (a pyenv whose shims were not rehashed, `pip --user`).
zig_tools() {
  if ! command -v cargo-zigbuild >/dev/null || ! python3 -c 'import ziglang' 2>/dev/null; then
    python3 -m pip install --quiet ziglang cargo-zigbuild >&2
  fi
  PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$(python3 -c 'import site, os; print(os.path.join(site.getuserbase(), "bin"))'):$PATH"
  export PATH
}
