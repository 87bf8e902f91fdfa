#!/usr/bin/env bash
# Sets tpu-sim up on a Debian 12 machine and runs one job.
#
#   tools/setup.sh demo      install what the demo needs, build tpu-as, tpu-dis and tpu-sim
#                            (the SystemC model, no RTL), run the example program   (default)
#   tools/setup.sh test      install everything, build (plain and ASan/UBSan), run the test
#                            suite's default tier through CTest, then the libFuzzer targets
#                            briefly (CI's command)
#   tools/setup.sh test-all  the same with the full tier: every long regression whole, and
#                            the RTL at two more sizes (docs/development.md, "Test tiers")
#   tools/setup.sh build     install everything and build build/ whole (the default RTL
#                            engines, the tests, the Python module, the benchmarks)
#
# Installing is idempotent: only Debian packages that are missing are
# installed (with sudo when not root). Builds go to build/, build-asan/ and
# build-fuzz/; ccache is used when it is installed (the test job installs it).
# Every stage prints how long it took, and the job ends with the list.
set -euo pipefail

job=${1:-demo}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

# What the demo needs: the compiler, the libraries tpu-sim links (SystemC,
# ONNX, Verilator's runtime headers) and NumPy for the demo's check.
demo_packages=(
  g++ cmake make ninja-build pkg-config zlib1g-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libsystemc-dev libeigen3-dev verilator
  libonnx-dev libprotobuf-dev
  python3 python3-numpy
)
# Everything the project builds and tests with.
all_packages=(
  "${demo_packages[@]}"
  catch2 ccache yosys gtkwave
  clang libclang-rt-14-dev
  python3-sklearn python3-pytest python3-torch python3-torchvision python3-onnx
  python3-dev pybind11-dev python3-distributed python3-pandas python3-matplotlib
)

# Stage timing: `stage NAME COMMAND...` runs COMMAND, prints its wall time
# and remembers it for the summary at the end of the job.
stage_names=()
stage_seconds=()
job_start=$SECONDS
fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
stage() {
  local name=$1
  shift
  local start=$SECONDS
  printf '\n== setup: %s ==\n' "$name"
  local status=0
  "$@" || status=$?
  local took=$((SECONDS - start))
  stage_names+=("$name")
  stage_seconds+=("$took")
  printf '== setup: %s: %s%s ==\n' "$name" "$(fmt_time "$took")" \
    "$([ $status -eq 0 ] || echo ", FAILED (status $status)")"
  return $status
}
summary() {
  local status=$?
  [ ${#stage_names[@]} -gt 0 ] || return 0
  printf '\n== setup %s: stage times ==\n' "$job"
  local i
  for i in "${!stage_names[@]}"; do
    printf '  %-58s %s\n' "${stage_names[$i]}" "$(fmt_time "${stage_seconds[$i]}")"
  done
  printf '  %-58s %s%s\n' "total" "$(fmt_time $((SECONDS - job_start)))" \
    "$([ $status -eq 0 ] || echo " (failed, status $status)")"
}
trap summary EXIT

install_packages() {  # install_packages PACKAGE...
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#} packages are installed"
    return 0
  fi
  echo "setup: installing ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

launcher=()
use_ccache() {
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
}

# Options for a new build directory (none for one configured before, which
# keeps its generator, since CMake refuses to switch it, and its choice of
# unity build):
# - Ninja when installed: it compiles a target's files while the libraries it
#   links are still being built (Make waits for them, leaving a core idle at
#   every such step on a 2-core machine) and checks an up-to-date tree in a
#   fraction of a second;
# - a unity build (CMake joins a target's sources by eight into one
#   translation unit; the Verilated C++ is never joined): the compilers spent
#   most of their time on the same headers and inline code again (SystemC,
#   CLI11, ONNX, JSON, pybind11, Catch2). Measured on a 2-core machine,
#   tpu-sim with its libraries: 326 s of CPU against 585 s compiled file by
#   file. These directories are built to be run, not edited; for an edit to
#   recompile one file, `cmake -B build -DCMAKE_UNITY_BUILD=OFF`.
new_dir_options() {  # new_dir_options DIR
  [ -e "$root/$1/CMakeCache.txt" ] && return 0
  if command -v ninja >/dev/null; then echo "-GNinja"; fi
  echo "-DCMAKE_UNITY_BUILD=ON"
}

configure() {  # configure DIR [cmake options...]
  local dir=$1
  shift
  cmake -S "$root" -B "$root/$dir" $(new_dir_options "$dir") -DTPU_WERROR=ON "${launcher[@]}" "$@" >/dev/null
}
configure_clang() {  # configure_clang DIR [cmake options...]: a new DIR with Clang
  CC=clang CXX=clang++ configure "$@"
}

build() {  # build DIR [TARGET...]
  local dir=$1
  shift
  local targets=()
  [ $# -eq 0 ] || targets=(--target "$@")
  cmake --build "$root/$dir" -j "$jobs" "${targets[@]}"
}

# CTest's cost data for a build directory that has none: the slow tests'
# seconds from tests/ctest_costs.txt (column 2 plain, 3 sanitizers).
seed_test_costs() {  # seed_test_costs DIR COLUMN
  local data=$root/$1/Testing/Temporary/CTestCostData.txt
  [ -e "$data" ] && return 0
  mkdir -p "$(dirname "$data")"
  awk -v c="$2" '!/^#/ && NF == 3 && $c > 0 {print $1, 1, $c}' \
    "$root/tests/ctest_costs.txt" > "$data"
  echo "---" >> "$data"
}

run_tests() {  # run_tests DIR [ctest options...]
  local dir=$1
  shift
  local column=2
  [ "$dir" = build-asan ] && column=3
  seed_test_costs "$dir" "$column"
  (cd "$root/$dir" && ctest --output-on-failure -j "$jobs" "$@")
}

# The default configuration of build/ (a demo build leaves the RTL, the tests
# and the Python module out of the CMake cache: -U puts the defaults back).
full_config=(-UTPU_RTL_PRESETS -UTPU_BUILD_TESTS -UTPU_PYTHON -UTPU_RTL_TRACE_MAX_N)

# The fuzz targets of tests/fuzz with Clang's libFuzzer, ASan and UBSan in
# build-fuzz/. Not -Werror: Clang warns where GCC, the project's compiler, does not.
fuzz_build() {
  CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-fuzz" $(new_dir_options build-fuzz) -DTPU_FUZZ=ON \
    -DTPU_BUILD_TESTS=OFF -DTPU_RTL_PRESETS= "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
    "${unity[@]}" "${launcher[@]}" >/dev/null
  cmake --build "$root/build-fuzz" -j "$jobs" --target tpu_fuzzers
}

# The sanitizer and fuzz builds are unity builds whether new or not: they
# are built once per job and never edited.
unity=(-DCMAKE_UNITY_BUILD=ON)

# The ASan/UBSan build takes the plain build's Verilated engines (not
# instrumented in either build: src/rtl_engine/CMakeLists.txt) instead of compiling
# them a second time.
# Line tables only (-g1): the sanitizers' reports keep file and line, and the
# build is some 10-15% faster than with full debug information.
# Compiled by Clang (a new directory; one configured before keeps its compiler):
# at -O0 with ASan and UBSan it compiled the heaviest files 1.5-2 times as fast
# as GCC, and the instrumented tests ran within 20% of GCC's either way.
asan_config=(-DTPU_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1
             -DTPU_RTL_PREBUILT_DIR="$root/build" -UTPU_RTL_TRACE_MAX_N "${unity[@]}")

# The full tier Verilates the tpuv1 machine at N = 32 and 64 too (the default
# set, src/rtl_engine/CMakeLists.txt, brackets them with small16 and N = 128).
all_presets="small4;small8;small16;tpuv1/32;tpuv1/64;tpuv1/128"

# Every package, then build/ whole (full_build [PRESETS]: the RTL
# configurations instead of TPU_RTL_PRESETS' default).
full_build() {
  local presets=${1:-}
  local options=("${full_config[@]}")
  [ -z "$presets" ] || options+=(-DTPU_RTL_PRESETS="$presets")
  stage "install packages (${#all_packages[@]}, missing ones only)" install_packages "${all_packages[@]}"
  use_ccache
  echo "build/: the simulator and tools, the RTL core Verilated for ${presets:-its default configurations},"
  echo "the test programs, the Python module and the benchmark"
  stage "configure build/" configure build "${options[@]}"
  stage "build build/" build build
}

test_job() {  # test_job TIER (default or full)
  local tier=$1
  local tier_args=()
  [ "$tier" = full ] || tier_args=(-LE full-only)
  # The full tier also runs whole the test cases that the sanitizer build's
  # default tier runs reduced (tests/support/tier.h).
  local presets=""
  [ "$tier" = full ] && export TPU_TEST_FULL=1 && presets=$all_presets
  full_build "$presets"
  echo "build-asan/: the same with AddressSanitizer and UndefinedBehaviorSanitizer (Clang, Debug),"
  echo "linking build/'s Verilated RTL engines"
  stage "configure build-asan/" configure_clang build-asan "${asan_config[@]}"
  stage "build build-asan/" build build-asan
  stage "tests ($tier tier)" run_tests build "${tier_args[@]}"
  stage "tests under ASan + UBSan ($tier tier)" run_tests build-asan "${tier_args[@]}"
  echo "build-fuzz/: the libFuzzer targets (Clang, ASan, UBSan)"
  stage "build build-fuzz/" fuzz_build
  local seconds=45
  [ "$tier" = full ] && seconds=180
  stage "fuzzers ($seconds s each)" env TPU_AS="$root/build/sim/tpu-as" \
    "$root/tests/fuzz/run_fuzzers.sh" "$root/build-fuzz" "$seconds"
}

case "$job" in
  demo)
    stage "install packages (${#demo_packages[@]} for the demo, missing ones only)" \
      install_packages "${demo_packages[@]}"
    use_ccache
    echo "build/: tpu-as, tpu-dis and tpu-sim with the SystemC model (no RTL engine, no tests;"
    echo "'bash tools/setup.sh build' builds the rest)"
    stage "configure build/" configure build -DTPU_RTL_PRESETS= -DTPU_BUILD_TESTS=OFF -DTPU_PYTHON=OFF
    stage "build tpu-as, tpu-dis, tpu-sim" build build tpu-as tpu-dis tpu-sim
    stage "demo" "$root/tools/demo.sh" "$root/build"
    ;;
  test) test_job default ;;
  test-all) test_job full ;;
  build) full_build ;;
  *)
    echo "usage: tools/setup.sh [demo|test|test-all|build]" >&2
    exit 2
    ;;
esac
