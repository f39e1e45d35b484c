#!/usr/bin/env bash
# The Node client's checks, as CI runs them: install the dev dependencies (npm ci), build
# (tsc) and type-check the tests, run the tests against the real binary, pack the client
# and the linux-x64-gnu platform package, install both tarballs into a fresh project
# OFFLINE, and run smoke.mjs there (the binary found through the platform package).
#
#   bash clients/node/test.sh [path/to/convo]    (default: target/release/convo)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
binary=${1:-$here/../../target/release/convo}
[ -x "$binary" ] || { echo "node client: no convo binary at $binary (build it: cargo build --release)" >&2; exit 1; }
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")

work=$(mktemp -d "${TMPDIR:-/tmp}/convo-node-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
current="start"
step() { current=$*; printf '\n== node client: %s\n' "$*"; }
fail() { echo "node client: FAILED: $*" >&2; exit 1; }
trap 'echo "node client: FAILED during \"$current\" (exit $?)" >&2' ERR

cd "$here"
step "npm ci"
npm ci --no-audit --no-fund --loglevel=error

step "build and type-check"
npm run --silent build
npm run --silent check

step "tests against $binary"
CONVO_BINARY=$binary node --test test/*.test.mjs

step "pack"
client=$(node pack.mjs client "$work" | node -pe 'JSON.parse(require("fs").readFileSync(0, "utf8")).tarball')
platform_json=$(node pack.mjs platform linux-x64-gnu "$binary" "$work")
platform=$(node -pe 'JSON.parse(process.argv[1]).tarball' "$platform_json")
platform_size=$(node -pe 'JSON.parse(process.argv[1]).size' "$platform_json")
ls -l "$client" "$platform"

# The registry dependencies of the client (vscode-jsonrpc) go into a cache of their own,
# the one the offline install may use: npm ci keeps the tarballs it installs but not the
# registry metadata an install from a tarball resolves them with.
step "install the tarballs into a fresh project, offline"
cache=$work/npm-cache
deps=$(node -pe 'Object.entries(require("./package.json").dependencies).map(([n, v]) => `${n}@${v}`).join(" ")')
# shellcheck disable=SC2086
npm cache add --cache "$cache" --loglevel=error $deps
app=$work/app
mkdir "$app"
cp smoke.mjs "$app/"
cd "$app"
printf '{ "name": "convo-smoke", "private": true, "type": "module" }\n' > package.json
npm install --offline --cache "$cache" --no-audit --no-fund --loglevel=error "$client" "$platform"
[ -x node_modules/@convo/linux-x64-gnu/bin/convo ] || fail "the platform package has no executable bin/convo"

step "type-check smoke.mjs against the installed .d.ts"
"$here/node_modules/.bin/tsc" --noEmit --allowJs --checkJs --strict --skipLibCheck \
  --module nodenext --moduleResolution nodenext --target es2022 --lib es2022 \
  --types node --typeRoots "$here/node_modules/@types" smoke.mjs

step "smoke.mjs in the fresh project, the binary from the platform package"
env -u CONVO_BINARY node smoke.mjs

echo
echo "node client: all passed (platform package $(basename "$platform"): $platform_size bytes packed)"
