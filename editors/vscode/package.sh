#!/usr/bin/env bash
# Builds the platform-specific .vsix of the convo extension, carrying a convo binary:
#
#   bash editors/vscode/package.sh OUT [TARGET] [BINARY]
#     → OUT/convo-<target>-<version>.vsix
#
# TARGET is one of VS Code's: linux-x64 linux-arm64 alpine-x64 alpine-arm64 darwin-x64
# darwin-arm64 win32-x64 (default: this machine's); BINARY the convo built for it (default:
# target/release/convo, for this machine's target only). Installs the build tools (npm ci
# here: esbuild, TypeScript, @vscode/vsce), type-checks and bundles the extension
# (build.mjs), then packs a staging folder holding only what the extension runs: the
# manifest, README, the bundles, media/ and bin/convo[.exe].
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() {
  echo "usage: $0 OUT [TARGET] [BINARY]" >&2
  exit 2
}
[ $# -ge 1 ] && [ $# -le 3 ] || usage
mkdir -p "$1"
out=$(cd "$1" && pwd)

machine_target() {
  local cpu
  case "$(uname -m)" in
    x86_64 | amd64) cpu=x64 ;;
    aarch64 | arm64) cpu=arm64 ;;
    *) echo "no VS Code target for $(uname -m)" >&2; return 1 ;;
  esac
  case "$(uname -s)" in
    Linux) if ldd --version 2>&1 | grep -qi musl; then echo "alpine-$cpu"; else echo "linux-$cpu"; fi ;;
    Darwin) echo "darwin-$cpu" ;;
    *) echo "win32-$cpu" ;;
  esac
}
target=${2:-$(machine_target)}
case "$target" in
  linux-x64 | linux-arm64 | alpine-x64 | alpine-arm64 | darwin-x64 | darwin-arm64 | win32-x64) ;;
  *) echo "unknown target $target" >&2; usage ;;
esac
exe=convo
[[ $target != win32-* ]] || exe=convo.exe
if [ $# -ge 3 ]; then
  binary=$3
elif [ "$target" = "$(machine_target)" ]; then
  binary=$here/../../target/release/convo
else
  echo "package.sh: give the $target binary as the third argument" >&2
  exit 2
fi
[ -f "$binary" ] || { echo "package.sh: no convo binary at $binary (cargo build --release)" >&2; exit 1; }

cd "$here"
if [ ! -x node_modules/.bin/vsce ] || [ ! -x node_modules/.bin/esbuild ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
node_modules/.bin/tsc -p tsconfig.json >&2
node build.mjs >&2

version=$(node -p 'require("./package.json").version')
stage=$(mktemp -d "${TMPDIR:-/tmp}/convo-vsix.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/dist" "$stage/bin"
cp package.json README.md "$stage/"
[ ! -f LICENSE ] || cp LICENSE "$stage/"
cp dist/extension.js dist/webview.js "$stage/dist/"
cp -r media "$stage/"
cp "$binary" "$stage/bin/$exe"
chmod 755 "$stage/bin/$exe"
# The folder holds only what is to be packed: nothing for vsce to leave out.
printf '# package.sh stages only what the package holds\n' >"$stage/.vscodeignore"
if [[ $target == linux-* || $target == alpine-* ]] && command -v strip >/dev/null; then
  strip --strip-debug "$stage/bin/$exe" 2>/dev/null || true # another CPU's: left as built
fi

vsix=$out/convo-$target-$version.vsix
(cd "$stage" && "$here/node_modules/.bin/vsce" package --target "$target" --no-dependencies \
  --allow-missing-repository --skip-license --no-rewrite-relative-links --out "$vsix" >&2)
echo "$vsix"
