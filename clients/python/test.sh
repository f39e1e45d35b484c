#!/usr/bin/env bash
# The Python client's checks, as CI runs them (from the repo root, after
# `cargo test --release` built target/release/convo):
#
#   bash clients/python/test.sh
#
# 1. a fresh venv with maturin builds the wheel (the convo binary plus the pure-Python
#    package), in the repo's target dir so that the release artifacts are reused;
# 2. a second fresh venv installs that wheel with its framework extras (the pinned
#    openai-agents and pydantic-ai-slim the adapters are tested against), pytest,
#    pytest-asyncio (the OpenAI Agents SDK's own session tests use it), pycodeloop==0.8.2
#    and agent-core-py, and runs the tests against the installed `convo` (on PATH, no
#    CONVO_BINARY, no source tree on sys.path);
# 3. `convo --version` from the venv.
#
#   bash clients/python/test.sh build DIR    # step 1 only: the wheel into DIR
#   bash clients/python/test.sh test WHEEL   # steps 2 and 3, on a wheel built before
#   bash clients/python/test.sh prepare      # step 2's packages into pip's cache (no
#                                            # wheel needed: scripts/test runs it while
#                                            # it builds one)
#
# (scripts/test builds the wheel before the tests that run side by side: a cargo build
# while they run would link target/release/convo again under the tests that spawn it.)
#
# Environment: CARGO_TARGET_DIR (default: the repo's target/), PYTHON (default python3),
# CONVO_PY_KEEP=1 keeps the work folder. Prints one last line saying OK or FAILED.
set -euo pipefail

cd "$(dirname "$0")/../.."
repo=$PWD
here=$repo/clients/python
python=${PYTHON:-python3}
started=$(date +%s)

work=$(mktemp -d "${TMPDIR:-/tmp}/convo-py-test.XXXXXX")
finish() {
  status=$?
  if [[ ${CONVO_PY_KEEP:-} != 1 ]]; then rm -rf "$work"; else echo "kept $work" >&2; fi
  if [[ $status -ne 0 ]]; then
    echo "clients/python/test.sh: FAILED (exit $status) after $(($(date +%s) - started)) s"
  fi
}
trap finish EXIT

# --no-compile: no byte-code for every module of every package (openai, pydantic, the
# frameworks) up front; Python writes it for what the tests import, as they import it.
pip_install() {
  "$1/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-compile "${@:2}"
}

# What the test venv installs beside the wheel. The frameworks pinned exactly: the
# extras allow the minor series, CI tests these.
test_packages=("openai-agents==0.24.0" "pydantic-ai-slim==2.68.0" "pytest>=8,<10" "pytest-asyncio==1.5.0"
  "pycodeloop==0.8.2" "agent-core-py==0.1.0")

step=${1:-all}
usage() {
  echo "usage: clients/python/test.sh [build DIR | test WHEEL | prepare]" >&2
  exit 2
}
case $step in
  all | prepare) [[ $# -le 1 ]] || usage ;;
  build | test) [[ $# -eq 2 ]] || usage ;;
  *) usage ;;
esac

if [[ $step == prepare ]]; then
  # Downloaded by a venv's pip (the system's Python may have none), and so in pip's
  # cache, from which step 2's install takes them.
  "$python" -m venv "$work/download-venv"
  "$work/download-venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-input \
    --dest "$work/download" "${test_packages[@]}"
  exit 0
fi

if [[ $step == test ]]; then
  wheel=$(realpath "$2")
else
  echo "== build venv: maturin"
  "$python" -m venv "$work/build-venv"
  pip_install "$work/build-venv" "maturin==1.16.0"

  echo "== building the wheel"
  t0=$(date +%s)
  out=$work/dist
  [[ $step == all ]] || out=$(realpath "$2")
  # Same profile and features as `cargo build --release`, no --target and no extra rustc
  # flags, so cargo finds the release build that `cargo test --release` made fresh and
  # maturin only copies target/release/convo into the wheel: the very binary the Rust tests
  # ran. `--strip false` for that: pyproject.toml's `strip = true` passes `-C strip=symbols`
  # to rustc, which makes the binary another cargo unit, compiled and linked again (70 s
  # here). Unstripped, this test wheel is 33 MB instead of 9.5 MB.
  (cd "$here" && "$work/build-venv/bin/maturin" build --release --locked --strip false --out "$out")
  wheel=$(ls "$out"/convo-*.whl)
  echo "built $(basename "$wheel"): $(stat -c %s "$wheel") bytes in $(($(date +%s) - t0)) s"
  [[ $step == all ]] || exit 0
fi
wheel_bytes=$(stat -c %s "$wheel")

echo "== test venv: the wheel with its extras, pytest, pycodeloop==0.8.2, agent-core-py"
"$python" -m venv "$work/venv"
pip_install "$work/venv" "${wheel}[openai-agents,pydantic-ai]" "${test_packages[@]}"

echo "== convo --version from the venv"
version=$("$work/venv/bin/convo" --version)
echo "$version"
[[ $version == "convo "* ]]

echo "== pytest"
# The installed wheel only: no CONVO_BINARY, the venv's bin first on PATH, and a working
# folder outside the source tree.
(
  unset CONVO_BINARY CONVO_STORE PYTHONPATH
  export PATH="$work/venv/bin:$PATH"
  cd "$work"
  python -m pytest "$here/tests" -q -p no:cacheprovider
)

echo "clients/python/test.sh: OK ($version, wheel $((wheel_bytes / 1024)) KiB, $(($(date +%s) - started)) s)"
