#!/usr/bin/env bash
# Runs the libFuzzer targets for a fixed time each and fails on any finding.
#
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]
#
# BUILD_DIR is configured with CXX=clang++ -DTPU_FUZZ=ON and built with
# --target tpu_fuzzers; TARGET defaults to all eight (fuzz_asm fuzz_program
# fuzz_npy fuzz_config fuzz_sim fuzz_net fuzz_onnx fuzz_sweep). Up to nproc
# targets run at once.
#
# Each target's corpus is BUILD_DIR/fuzz-corpus/TARGET: seeded by
# make_corpus.sh the first time (with the assembler $TPU_AS, by default
# BUILD_DIR/sim/tpu-as: `--target tpu-as`, or any other build's), it keeps
# what the fuzzer adds, so later runs continue from there. The inputs in tests/fuzz/regressions/TARGET (crashes
# found earlier, now fixed) are run first, every time, each once. A crash, leak, timeout,
# out-of-memory or failed property is saved as
# BUILD_DIR/fuzz-artifacts/TARGET-crash-SHA1 (or -leak-, -timeout-, -oom-);
# reproduce it with BUILD_DIR/tests/fuzz/TARGET FILE.
#
# Prints, per target, libFuzzer's final "Done N runs in S second(s)" (the
# executions) and the size of the corpus; exits 1 if any target found anything.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
seconds=$2
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_asm fuzz_program fuzz_npy fuzz_config fuzz_sim fuzz_net fuzz_onnx fuzz_sweep)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$build/tests/fuzz
corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
logs=$build/fuzz-logs
mkdir -p "$artifacts" "$logs" "$build/fuzz-tmp"
export TMPDIR=$build/fuzz-tmp  # fuzz_npy's and fuzz_sweep's scratch files, kept out of /tmp

assembler=${TPU_AS:-$build/sim/tpu-as}
need_assembler() {
  [ -x "$assembler" ] && return 0
  echo "run_fuzzers.sh: no assembler $assembler to seed the corpus: build tpu-as in $build" \
       "(cmake --build $build --target tpu-as) or set TPU_AS to another build's" >&2
  exit 2
}
if [ ! -d "$corpus" ]; then
  need_assembler
  rm -rf "$corpus.new"
  "$src/tests/fuzz/make_corpus.sh" "$corpus.new" "$assembler" >/dev/null
  mv "$corpus.new" "$corpus"
fi
# A target added since the corpus was made gets its seeds too.
missing=()
for t in "${targets[@]}"; do [ -d "$corpus/$t" ] || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  need_assembler
  rm -rf "$corpus.new"
  "$src/tests/fuzz/make_corpus.sh" "$corpus.new" "$assembler" >/dev/null
  for t in "${missing[@]}"; do
    if [ -d "$corpus.new/$t" ]; then mv "$corpus.new/$t" "$corpus/$t"; fi
  done
  rm -rf "$corpus.new"
fi

# SystemC keeps some memory in its own pools (tools/lsan.supp says why).
export LSAN_OPTIONS=suppressions=$src/tools/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1

run_one() {  # run_one TARGET: replays its regressions, then fuzzes it; the log is $logs/TARGET.log
  local t=$1
  local options=(-timeout=20 -rss_limit_mb=2048 -artifact_prefix="$artifacts/$t-")
  mkdir -p "$corpus/$t"
  : >"$logs/$t.log"
  # The regression inputs run one by one rather than joining the corpus: some
  # are large (expressions nested 20000 deep), and libFuzzer takes -max_len
  # from the largest corpus input, which would slow every later execution.
  if [ -n "$(ls -A "$src/tests/fuzz/regressions/$t" 2>/dev/null)" ]; then
    "$bin/$t" "${options[@]}" "$src/tests/fuzz/regressions/$t"/* >>"$logs/$t.log" 2>&1 || return
  fi
  "$bin/$t" "$corpus/$t" -max_total_time="$seconds" -print_final_stats=1 "${options[@]}" \
    >>"$logs/$t.log" 2>&1
}

declare -A pid_of
for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || { echo "run_fuzzers.sh: no $bin/$t (build --target tpu_fuzzers)" >&2; exit 2; }
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  run_one "$t" &
  pid_of[$t]=$!
done

failed=0
for t in "${targets[@]}"; do
  status=0
  wait "${pid_of[$t]}" || status=$?
  done_line=$(grep -E '^Done [0-9]+ runs' "$logs/$t.log" | tail -1 || true)
  if [ "$status" -eq 0 ] && [ -n "$done_line" ]; then
    printf '%-13s ok      %s; corpus %s inputs\n' "$t" "$done_line" "$(ls "$corpus/$t" | wc -l)"
  else
    failed=1
    printf '%-13s FAILED  exit status %s; log %s\n' "$t" "$status" "$logs/$t.log"
    grep -E 'ERROR|SUMMARY|property failed|what\(\)|Test unit written|^Base64' "$logs/$t.log" |
      sed 's/^/    /' | head -20
    echo "    reproduce: $bin/$t $artifacts/$t-<kind>-<sha1> (the file named above)"
  fi
done
exit "$failed"
