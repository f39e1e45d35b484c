#!/usr/bin/env bash
# convo.nvim against a convo binary, in a real Neovim run headless: the plugin's suite
# (tests/plugin_test.lua: setup, the commands, the Lua API, errors through vim.notify,
# :checkhealth, live refresh) and Neovim's own vim.lsp.rpc with no plugin
# (tests/rpc_test.lua). Installs Debian's neovim when nvim is missing; CONVO_NVIM names
# another Neovim to run instead.
#
#   bash editors/nvim/test.sh target/release/convo
#   CONVO_NVIM=~/nvim-nightly/bin/nvim bash editors/nvim/test.sh target/release/convo
set -euo pipefail

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_CONVO_BINARY (an executable; got: ${1:-nothing})" >&2
  exit 2
fi
binary=$(realpath "$1")
root=$(cd "$(dirname "$0")" && pwd)

nvim=${CONVO_NVIM:-nvim}
if [ -z "${CONVO_NVIM:-}" ] && ! command -v nvim >/dev/null; then
  echo "nvim not found: installing Debian's neovim" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  # apt-get, waiting for the package locks another run may hold: dpkg's
  # (DPkg::Lock::Timeout), and that of the package lists, which apt-get update does not
  # wait for (tried again).
  apt_get() {
    local out tries=0
    until out=$($sudo apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1); do
      if [[ $out == *"Could not get lock"* ]] && ((tries++ < 300)); then
        sleep 2
        continue
      fi
      echo "$out" >&2
      return 1
    done
  }
  if ! apt_get install -y neovim; then
    apt_get update && apt_get install -y neovim
  fi
  command -v nvim >/dev/null || { echo "FAIL: could not install neovim" >&2; exit 1; }
fi
echo "$("$nvim" --version | head -n 1), $("$binary" --version)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# No user configuration, state or plugins; nothing of the machine's own convo.
export XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data" XDG_STATE_HOME="$tmp/state" XDG_CACHE_HOME="$tmp/cache"
unset CONVO_BINARY CONVO_STORE
export CONVO_TEST_BINARY="$binary" CONVO_TEST_ROOT="$root"

status=0
run() {
  local name=$1
  shift
  mkdir -p "$tmp/$name"
  # Headless Neovim leaves the terminal alone only with stdin not a terminal.
  if ! CONVO_TEST_DIR="$tmp/$name" timeout 120 "$nvim" --headless "$@" </dev/null; then
    echo "FAIL: $name (see the lines above)" >&2
    status=1
  fi
}

# The plugin as a plugin manager installs it: on 'runtimepath', its plugin/ file loaded.
run plugin --clean --cmd "set runtimepath^=$root" -c "luafile $root/tests/plugin_test.lua"
# No plugin at all: -u NONE loads nothing but Neovim's own Lua modules.
run rpc -u NONE -i NONE -c "luafile $root/tests/rpc_test.lua"

if [ $status -ne 0 ]; then
  echo "FAIL: convo.nvim tests" >&2
else
  echo "convo.nvim: all tests passed"
fi
exit $status
