#!/usr/bin/env bash
# The fast path's split of large MMCs over threads, end to end:
#   threads_test.sh CASE BIN_DIR SOURCE_DIR [ROWS]
#   gemm_threads  tpu-sim gemm at N = 256 with MMCs of ROWS rows (a comma
#                 list; default 513,977,1025,2049: the 977-row GEMM lost its
#                 last row on 2 threads) under TPU_GEMM_THREADS=1, 2, 3 and 8,
#                 checked by --check (Eigen) and against NumPy's product.
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

case "$case_name" in
  gemm_threads)
    IFS=, read -r -a rows <<<"${arg:-513,977,1025,2049}"
    for m in "${rows[@]}"; do
      /usr/bin/python3 - "$tmp" "$m" <<'PY'
import sys
import numpy as np
tmp, m = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(m)
a = rng.integers(-128, 128, (m, 256), dtype=np.int8)
b = rng.integers(-128, 128, (256, 256), dtype=np.int8)
np.save(f"{tmp}/a.npy", a)
np.save(f"{tmp}/b.npy", b)
np.save(f"{tmp}/want.npy", a.astype(np.int32) @ b.astype(np.int32))
PY
      for threads in 1 2 3 8; do
        rm -f "$tmp/c.npy"
        TPU_GEMM_THREADS=$threads expect_status 0 "$bin/tpu-sim" gemm --a "$tmp/a.npy" \
          --b "$tmp/b.npy" --out "$tmp/c.npy" --array 256 --check
        /usr/bin/python3 -c "
import sys, numpy as np
c, want = np.load('$tmp/c.npy'), np.load('$tmp/want.npy')
bad = np.argwhere(c != want)
sys.exit(f'M = $m, $threads threads: C differs from NumPy at {bad[0].tolist()} ({len(bad)} elements)' if len(bad) else 0)
" || fail "tpu-sim gemm, M = $m, TPU_GEMM_THREADS=$threads"
      done
    done
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
