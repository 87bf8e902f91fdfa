#!/usr/bin/env bash
# Sets tpu-sim up on a Debian 12 machine and runs one job.
#
#   tools/setup.sh demo    install, build, run the example program      (default)
#   tools/setup.sh test    install, build (plain and ASan/UBSan), run every test through CTest,
#                          then build the libFuzzer targets and run each one briefly
#   tools/setup.sh build   install and build only
#
# Installing is idempotent: only Debian packages that are missing are
# installed (with sudo when not root). Builds go to build/, build-asan/ and
# build-fuzz/.
set -euo pipefail

job=${1:-demo}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

# Exactly the Debian packages the project builds and tests with.
packages=(
  g++ cmake make pkg-config
  libfmt-dev libcli11-dev nlohmann-json3-dev catch2
  libsystemc-dev libeigen3-dev
  verilator yosys gtkwave
  clang libclang-rt-14-dev
  python3 python3-numpy python3-sklearn python3-pytest python3-torch python3-torchvision
  libonnx-dev libprotobuf-dev python3-onnx
  python3-dev pybind11-dev python3-distributed python3-pandas python3-matplotlib
)

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

build() {  # build DIR [cmake options...]
  local dir=$1
  shift
  cmake -S "$root" -B "$root/$dir" -DTPU_WERROR=ON "$@" >/dev/null
  cmake --build "$root/$dir" -j "$jobs"
}

run_tests() {  # run_tests DIR
  (cd "$root/$1" && ctest --output-on-failure -j "$jobs")
}

# The fuzz targets of tests/fuzz with Clang's libFuzzer, ASan and UBSan in
# build-fuzz/, each run for SECONDS (about 2 + 3 * SECONDS / 60 minutes on two
# cores). Not -Werror: Clang warns where GCC, the project's compiler, does not.
fuzz() {  # fuzz SECONDS
  CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-fuzz" -DTPU_FUZZ=ON \
    -DTPU_BUILD_TESTS=OFF >/dev/null
  cmake --build "$root/build-fuzz" -j "$jobs" --target tpu_fuzzers
  "$root/tests/fuzz/run_fuzzers.sh" "$root/build-fuzz" "$1"
}

case "$job" in
  demo)
    install_packages
    build build
    exec "$root/tools/demo.sh" "$root/build"
    ;;
  test)
    install_packages
    build build
    build build-asan -DTPU_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    echo "== tests =="
    run_tests build
    echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer =="
    run_tests build-asan
    echo "== fuzzers (libFuzzer, 45 s each) =="
    fuzz 45
    ;;
  build)
    install_packages
    build build
    ;;
  *)
    echo "usage: tools/setup.sh [demo|test|build]" >&2
    exit 2
    ;;
esac
