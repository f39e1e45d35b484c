#!/usr/bin/env bash
# The VS Code extension against a convo binary:
#   1. npm ci here, type-check (tsc) and bundle (esbuild);
#   2. unit tests (node --test test/unit/): Markdown → nodes, the transcript's DOM and its
#      escaping, the sessions view's paging and forks, against the real binary;
#   3. end-to-end tests in a real VS Code (test/e2e/e2e.py): code-server on 127.0.0.1 with
#      --auth none, a user-data folder, extensions folder and store of this run's own,
#      telemetry and update checks off; the .vsix that package.sh builds and a second test
#      extension (test/api-ext, which uses exports.client()) installed with
#      --install-extension; driven by Playwright for Python through Debian's chromium.
# The tools of step 3 (Node 24, code-server, Playwright, chromium) are installed by
# test/tools.sh and cached between runs (CONVO_VSCODE_CACHE, by default
# ${XDG_CACHE_HOME:-$HOME/.cache}/convo-vscode). Screenshots are kept in
# CONVO_VSCODE_ARTIFACTS (default editors/vscode/artifacts). Everything started here is
# stopped at the end. CONVO_VSCODE_VSIX names a linux-x64 .vsix to test instead of the one
# package.sh would build. `--prepare` does only the installs (npm ci and the tools), which
# need no binary: scripts/test runs them while it builds one.
#
#   bash editors/vscode/test.sh target/release/convo
#   bash editors/vscode/test.sh --prepare
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# npm ci when node_modules is missing or older than the lock file.
npm_ci() {
  if [ ! -x "$here/node_modules/.bin/esbuild" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}
if [ $# -eq 1 ] && [ "$1" = --prepare ]; then
  npm_ci
  # shellcheck source=test/tools.sh
  source "$here/test/tools.sh"
  tools_install
  exit 0
fi
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_CONVO_BINARY (an executable; got: ${1:-nothing}) | $0 --prepare" >&2
  exit 2
fi
binary=$(realpath "$1")
artifacts=${CONVO_VSCODE_ARTIFACTS:-$here/artifacts}
started_at=$SECONDS

current="start"
step() { current=$*; printf '\n== vscode extension: %s (%d s)\n' "$*" $((SECONDS - started_at)); }
trap 'echo "vscode extension: FAILED during \"$current\" (exit $?)" >&2' ERR

work=$(mktemp -d "${TMPDIR:-/tmp}/convo-vscode-test.XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    # code-server, its extension hosts and their convo processes: one process group.
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 -- "-$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
unset CONVO_BINARY CONVO_STORE CONVO_LIBC

cd "$here"
step "npm ci, type-check, bundle"
npm_ci
node_modules/.bin/tsc -p tsconfig.json
node build.mjs

step "unit tests against $binary"
CONVO_BINARY=$binary TMPDIR=$work node --test test/unit/

step "tools for the end-to-end tests (cached)"
# shellcheck source=test/tools.sh
source "$here/test/tools.sh"
tools_install
echo "node $("$NODE24" --version), code-server $("$NODE24" "$CODE_SERVER" --version 2>/dev/null | head -n 1), $("$CHROMIUM" --version 2>/dev/null), $("$PYTHON" -m playwright --version)"

step "package the .vsix and the test extension"
if [ -n "${CONVO_VSCODE_VSIX:-}" ]; then
  vsix=$(realpath "$CONVO_VSCODE_VSIX") # a package already built (scripts/release): tested as it is
  mkdir -p "$work/vsix"
else
  vsix=$(bash "$here/package.sh" "$work/vsix" linux-x64 "$binary")
fi
(cd test/api-ext && "$here/node_modules/.bin/vsce" package --no-dependencies --allow-missing-repository --skip-license \
  --out "$work/vsix/convo-api-test.vsix" >/dev/null)
ls -l "$work/vsix"

step "code-server: install both, start on loopback"
user=$work/user
mkdir -p "$user/User" "$work/extensions" "$work/workspace" "$work/config" "$work/data"
store="sqlite:$work/store.db"
cat >"$user/User/settings.json" <<EOF
{
  "convo.store": "$store",
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoUpdate": false,
  "extensions.autoCheckUpdates": false,
  "extensions.ignoreRecommendations": true,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "chat.disableAIFeatures": true,
  "security.workspace.trust.enabled": false,
  "window.dialogStyle": "custom"
}
EOF
# code-server's own config and data go to this run's folder too.
export XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data
cs() { "$NODE24" "$CODE_SERVER" --user-data-dir "$user" --extensions-dir "$work/extensions" "$@"; }
cs --install-extension "$vsix" --install-extension "$work/vsix/convo-api-test.vsix"
[ -x "$work/extensions/convo.convo-"*/bin/convo ] || { echo "vscode extension: the installed extension has no executable bin/convo" >&2; exit 1; }
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setsid "$NODE24" "$CODE_SERVER" --bind-addr "127.0.0.1:$port" --auth none --disable-telemetry --disable-update-check \
  --disable-workspace-trust --disable-getting-started-override --user-data-dir "$user" \
  --extensions-dir "$work/extensions" "$work/workspace" >"$work/code-server.log" 2>&1 &
server_pid=$!
# Up to two minutes: CI starts it beside the tests and the benchmarks on two cores.
for _ in $(seq 1200); do
  grep -q "HTTP server listening" "$work/code-server.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/code-server.log" >&2; exit 1; }
  sleep 0.1
done
grep -q "HTTP server listening" "$work/code-server.log" || {
  cat "$work/code-server.log" >&2
  echo "vscode extension: code-server did not start listening within 120 s" >&2
  exit 1
}
echo "code-server on http://127.0.0.1:$port (pid $server_pid)"

step "end-to-end tests (Playwright, chromium)"
rm -rf "$artifacts"
mkdir -p "$artifacts"
status=0
CONVO_BINARY=$binary CONVO_STORE=$store CODE_SERVER_URL="http://127.0.0.1:$port/" WORKSPACE=$work/workspace \
  ARTIFACTS=$artifacts CHROMIUM=$CHROMIUM timeout 900 "$PYTHON" "$here/test/e2e/e2e.py" || status=$?
# The logs, beside the screenshots: code-server's, the extension host's, the Convo channel.
cp "$work/code-server.log" "$artifacts/" 2>/dev/null || true
find "$user/logs" \( -name remoteexthost.log -o -name '*Convo*.log' \) -exec cp {} "$artifacts/" \; 2>/dev/null || true
if [ $status -ne 0 ]; then
  echo "--- code-server log" >&2
  tail -n 40 "$work/code-server.log" >&2
  for log in "$user"/logs/*/exthost*/remoteexthost.log "$user"/logs/*/exthost*/output_logging_*/*Convo*.log; do
    [ -f "$log" ] && { echo "--- $log" >&2; tail -n 40 "$log" >&2; }
  done
  echo "vscode extension: FAILED (screenshots in $artifacts)" >&2
  exit 1
fi
echo "vscode extension: all passed in $((SECONDS - started_at)) s (screenshots in $artifacts)"
