#!/usr/bin/env bash
# Command-line tests of tpu-as, tpu-dis and tpu-gen; one case per CTest test.
#   cli_test.sh CASE BIN_DIR SOURCE_DIR [ARG]
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

case "$case_name" in
  roundtrip)  # assemble, disassemble, re-assemble: identical bytes
    expect_status 0 "$bin/tpu-as" "$arg" -o "$tmp/a.tpu"
    expect_status 0 "$bin/tpu-dis" "$tmp/a.tpu" -o "$tmp/a.s"
    expect_status 0 "$bin/tpu-as" "$tmp/a.s" -o "$tmp/b.tpu"
    cmp "$tmp/a.tpu" "$tmp/b.tpu" || fail "re-assembled bytes differ"
    # The listing with encodings assembles too (the bytes are comments).
    expect_status 0 "$bin/tpu-dis" --encoding "$tmp/a.tpu" -o "$tmp/c.s"
    expect_status 0 "$bin/tpu-as" "$tmp/c.s" -o "$tmp/c.tpu"
    cmp "$tmp/a.tpu" "$tmp/c.tpu" || fail "--encoding listing re-assembles differently"
    ;;
  asm_errors)  # every error reported as file:line:col with a caret; no output file
    printf 'RHM 0, 0, 8\nFOO 1\nMMC.SX 0, 0, 1\n  RW 1 +\n' >"$tmp/bad.s"
    expect_status 1 "$bin/tpu-as" "$tmp/bad.s" -o "$tmp/bad.tpu"
    [ ! -e "$tmp/bad.tpu" ] || fail "an output file was written despite errors"
    grep -qx "$tmp/bad.s:2:1: error: unknown instruction 'FOO'" "$tmp/err" || fail "FOO"
    grep -q "^$tmp/bad.s:3:6: error: unknown flag 'X' for MMC" "$tmp/err" || fail "flag X"
    grep -q "^$tmp/bad.s:4:9: error: expected an expression" "$tmp/err" || fail "expression"
    grep -qx "     ^" "$tmp/err" || fail "caret under column 6"
    grep -qx "3 errors generated." "$tmp/err" || fail "error count"
    # Counts agree in number: one error, one operand.
    printf 'RW\n' >"$tmp/one.s"
    expect_status 1 "$bin/tpu-as" "$tmp/one.s" -o "$tmp/one.tpu"
    grep -qx "$tmp/one.s:1:1: error: RW expects 1 operand (weight_tile), got 0" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 operand"; }
    grep -qx "1 error generated." "$tmp/err" || { cat "$tmp/err"; fail "1 error generated"; }
    ;;
  asm_memory_check)  # ranges are checked against memory sizes only with a config
    printf 'RHM 0, 16383, 2\n' >"$tmp/m.s"
    expect_status 0 "$bin/tpu-as" "$tmp/m.s" -o "$tmp/m.tpu"
    expect_status 1 "$bin/tpu-as" "$tmp/m.s" -o "$tmp/m.tpu" --preset small8
    grep -q "m.s:1:8: error: rows 16383..16384 are past the end of unified buffer (16384 rows)" \
      "$tmp/err" || { cat "$tmp/err"; fail "UB range message"; }
    # One row "is" past the end; a memory of one tile is "(1 tile)".
    printf 'RHM 0, 16384, 1\n' >"$tmp/r.s"
    expect_status 1 "$bin/tpu-as" "$tmp/r.s" -o "$tmp/r.tpu" --preset small8
    grep -q "r.s:1:8: error: row 16384 is past the end of unified buffer (16384 rows)" \
      "$tmp/err" || { cat "$tmp/err"; fail "UB row message"; }
    echo '{"weight_tiles": 1}' >"$tmp/one.json"
    printf 'RW 1\n' >"$tmp/t.s"
    expect_status 1 "$bin/tpu-as" "$tmp/t.s" -o "$tmp/t.tpu" --config "$tmp/one.json"
    grep -q "t.s:1:4: error: tile 1 is past the end of weight memory (1 tile)" \
      "$tmp/err" || { cat "$tmp/err"; fail "one-tile message"; }
    echo '{"ub_rows": 32768}' >"$tmp/big.json"
    expect_status 0 "$bin/tpu-as" "$tmp/m.s" -o "$tmp/m.tpu" --config "$tmp/big.json"
    ;;
  array_size)  # --array and .array set the header's N; a conflict is an error
    printf '.array 16\nHLT\n' >"$tmp/n.s"
    expect_status 0 "$bin/tpu-as" "$tmp/n.s" -o "$tmp/n.tpu"
    [ "$(od -An -tu2 -j6 -N2 "$tmp/n.tpu" | tr -d ' ')" = 16 ] || fail ".array 16 not in header"
    expect_status 1 "$bin/tpu-as" "$tmp/n.s" -o "$tmp/n.tpu" --array 32
    printf 'HLT\n' >"$tmp/m.s"
    expect_status 0 "$bin/tpu-as" "$tmp/m.s" -o "$tmp/m.tpu" --array 32
    [ "$(od -An -tu2 -j6 -N2 "$tmp/m.tpu" | tr -d ' ')" = 32 ] || fail "--array 32 not in header"
    expect_status 2 "$bin/tpu-as" "$tmp/m.s" --array 3
    ;;
  usage)  # usage errors exit 2, missing files exit 3 with one line
    expect_status 2 "$bin/tpu-as"
    expect_status 2 "$bin/tpu-dis"
    expect_status 2 "$bin/tpu-as" x.s --no-such-option
    expect_status 3 "$bin/tpu-as" "$tmp/missing.s"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "missing source: not one line"
    expect_status 3 "$bin/tpu-dis" "$tmp/missing.tpu"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "missing program: not one line"
    ;;
  dis_malformed)  # malformed program files get exactly one line and exit 3
    printf 'HLT\nHLT\n' >"$tmp/ok.s"
    expect_status 0 "$bin/tpu-as" "$tmp/ok.s" -o "$tmp/ok.tpu"
    head -c 40 "$tmp/ok.tpu" >"$tmp/truncated.tpu"
    { printf 'XXXX'; tail -c +5 "$tmp/ok.tpu"; } >"$tmp/magic.tpu"
    { head -c 4 "$tmp/ok.tpu"; printf '\x02\x00'; tail -c +7 "$tmp/ok.tpu"; } >"$tmp/version.tpu"
    { head -c 16 "$tmp/ok.tpu"; printf '\x18'; tail -c +18 "$tmp/ok.tpu"; } >"$tmp/opcode.tpu"
    { head -c 17 "$tmp/ok.tpu"; printf '\x01'; tail -c +19 "$tmp/ok.tpu"; } >"$tmp/flag.tpu"
    : >"$tmp/empty.tpu"
    for f in truncated magic version opcode flag empty; do
      expect_status 3 "$bin/tpu-dis" "$tmp/$f.tpu"
      [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "$f: not one line"; }
      grep -q "^tpu-dis: error: $tmp/$f.tpu: " "$tmp/err" || fail "$f: message does not name the file"
    done
    grep -q "unknown opcode 0x18" <("$bin/tpu-dis" "$tmp/opcode.tpu" 2>&1) || fail "opcode message"
    head -c 1 "$tmp/ok.tpu" >"$tmp/byte.tpu"
    expect_status 3 "$bin/tpu-dis" "$tmp/byte.tpu"
    grep -qx "tpu-dis: error: $tmp/byte.tpu: truncated header: 1 byte, a program starts with 16" \
      "$tmp/err" || { cat "$tmp/err"; fail "1 byte"; }
    # The listing's header counts the instructions: 1 instruction, 2 instructions.
    printf 'HLT\n' >"$tmp/one.s"
    expect_status 0 "$bin/tpu-as" "$tmp/one.s" -o "$tmp/one.tpu"
    expect_status 0 "$bin/tpu-dis" "$tmp/one.tpu"
    grep -qx "; tpu-dis $tmp/one.tpu: 1 instruction" "$tmp/out" || { cat "$tmp/out"; fail "1 instruction"; }
    expect_status 0 "$bin/tpu-dis" "$tmp/ok.tpu"
    grep -qx "; tpu-dis $tmp/ok.tpu: 2 instructions" "$tmp/out" || { cat "$tmp/out"; fail "2 instructions"; }
    ;;
  sim_one_tile)  # programs/one_tile.s on the model equals an independent NumPy reference
    for n in 4 8 16; do
      /usr/bin/python3 "$src/tests/cli/one_tile_check.py" make "$tmp" "$n"
      expect_status 0 "$bin/tpu-as" "$src/programs/one_tile.s" -o "$tmp/p.tpu" --array "$n"
      expect_status 0 "$bin/tpu-sim" run "$tmp/p.tpu" --hostmem "$tmp/host.npy" \
        --weights "$tmp/weights.npy" --out "$tmp/out.npy" --stats "$tmp/s.json"
      /usr/bin/python3 "$src/tests/cli/one_tile_check.py" check "$tmp" "$n"
    done
    ;;
  sim_faults)  # faults and bad inputs: a clear message and a defined exit status
    printf 'RHM 0, 16380, 8\nHLT\n' >"$tmp/f.s"
    expect_status 0 "$bin/tpu-as" "$tmp/f.s" -o "$tmp/f.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/f.tpu"
    grep -qx "tpu-sim: fault at pc 0 (RHM 0, 16380, 8), cycle 0: unified buffer rows 16380..16387 past the end (16384 rows)" \
      "$tmp/err" || { cat "$tmp/err"; fail "bounds fault message"; }
    # One row or tile, and a memory of one tile, are singular.
    printf 'RHM 0, 16384, 1\nHLT\n' >"$tmp/f1.s"
    expect_status 0 "$bin/tpu-as" "$tmp/f1.s" -o "$tmp/f1.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/f1.tpu"
    grep -q "cycle 0: unified buffer row 16384 past the end (16384 rows)$" "$tmp/err" ||
      { cat "$tmp/err"; fail "one-row fault message"; }
    echo '{"weight_tiles": 1, "host_rows": 1}' >"$tmp/one.json"
    printf 'RW 1\nHLT\n' >"$tmp/f2.s"
    expect_status 0 "$bin/tpu-as" "$tmp/f2.s" -o "$tmp/f2.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/f2.tpu" --config "$tmp/one.json"
    grep -q "cycle 0: weight memory tile 1 past the end (1 tile)$" "$tmp/err" ||
      { cat "$tmp/err"; fail "one-tile fault message"; }
    printf 'MMC.S 0, 0, 1\nHLT\n' >"$tmp/d.s"
    expect_status 0 "$bin/tpu-as" "$tmp/d.s" -o "$tmp/d.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/d.tpu"
    grep -q "deadlock" "$tmp/err" || fail "deadlock message"
    printf 'NOP\n' >"$tmp/e.s"
    expect_status 0 "$bin/tpu-as" "$tmp/e.s" -o "$tmp/e.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/e.tpu"
    grep -q "without HLT" "$tmp/err" || fail "run-off message"
    printf 'RW 0\nRW 0\nRW 0\nRW 0\nRW 0\nRW 0\nHLT\n' >"$tmp/c.s"
    expect_status 0 "$bin/tpu-as" "$tmp/c.s" -o "$tmp/c.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/c.tpu"
    grep -q "fault at pc 5 (RW 0), cycle .*: deadlock: RW waits for room in the weight FIFO" \
      "$tmp/err" || { cat "$tmp/err"; fail "FIFO deadlock message"; }
    printf 'RHM 0, 0, 1000\nHLT\n' >"$tmp/l.s"
    expect_status 0 "$bin/tpu-as" "$tmp/l.s" -o "$tmp/l.tpu"
    expect_status 4 "$bin/tpu-sim" run "$tmp/l.tpu" --max-cycles 50
    grep -q "fault at pc 1 (HLT), cycle 50: cycle limit 50 reached" "$tmp/err" ||
      { cat "$tmp/err"; fail "cycle limit message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --hostmem "$tmp/c.s"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "bad npy: not one line"
    # Wrong N, dtype or rank in the memory images; --array against the program's N.
    /usr/bin/python3 -c "
import numpy as np
np.save('$tmp/h4.npy', np.zeros((4, 4), np.int8))
np.save('$tmp/h32.npy', np.zeros((4, 8), np.int32))
np.save('$tmp/w2d.npy', np.zeros((8, 8), np.int8))"
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --hostmem "$tmp/h4.npy"
    grep -qx "tpu-sim: error: $tmp/h4.npy: rows have 4 bytes but the array is N=8" "$tmp/err" ||
      { cat "$tmp/err"; fail "N mismatch message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --hostmem "$tmp/h32.npy"
    grep -q "expected a 2-D int8 array" "$tmp/err" || { cat "$tmp/err"; fail "dtype message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --weights "$tmp/w2d.npy"
    grep -q "expected a 3-D int8 array" "$tmp/err" || { cat "$tmp/err"; fail "rank message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --array 16
    grep -q "assembled for N=8, but --array is 16" "$tmp/err" || fail "--array mismatch message"
    # Counts of bytes, rows and tiles agree in number.
    /usr/bin/python3 -c "
import numpy as np
np.save('$tmp/h1.npy', np.zeros((3, 1), np.int8))
np.save('$tmp/h2.npy', np.zeros((2, 8), np.int8))
np.save('$tmp/w2.npy', np.zeros((2, 8, 8), np.int8))"
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --hostmem "$tmp/h1.npy"
    grep -qx "tpu-sim: error: $tmp/h1.npy: rows have 1 byte but the array is N=8" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 byte message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --hostmem "$tmp/h2.npy" --config "$tmp/one.json"
    grep -qx "tpu-sim: error: $tmp/h2.npy: 2 rows do not fit in host memory (1 row)" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 row message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/c.tpu" --weights "$tmp/w2.npy" --config "$tmp/one.json"
    grep -qx "tpu-sim: error: $tmp/w2.npy: 2 tiles do not fit in weight memory (1 tile)" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 tile message"; }
    # The summary: 1 cycle, 1 instruction; 0 instructions.
    printf 'RW 0\nMMC.SO 0, 0, 1\nHLT\n' >"$tmp/s.s"
    expect_status 0 "$bin/tpu-as" "$tmp/s.s" -o "$tmp/s.tpu" --array 4
    expect_status 0 "$bin/tpu-sim" run "$tmp/s.tpu"
    for pattern in "^array active  1 cycle$" "^  weight_dma  *[0-9]*  (1 instruction)$" \
                   "^  host_dma  *0  (0 instructions)$"; do
      grep -q "$pattern" "$tmp/out" || { cat "$tmp/out"; fail "no line '$pattern'"; }
    done
    expect_status 3 "$bin/tpu-sim" run "$tmp/missing.tpu"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "missing program: not one line"
    ;;
  sim_waveform)  # --vcd writes a VCD and a .gtkw that names only signals the VCD declares
    printf 'RW 0\nMMC.SO 0, 0, 3\nWHM.A 0, 0, 3\nHLT\n' >"$tmp/w.s"
    expect_status 0 "$bin/tpu-as" "$tmp/w.s" -o "$tmp/w.tpu" --array 4
    expect_status 0 "$bin/tpu-sim" run "$tmp/w.tpu" --vcd "$tmp/w.vcd"
    [ -s "$tmp/w.vcd" ] && [ -s "$tmp/w.gtkw" ] || fail "no waveform or save file"
    grep -q "^\[dumpfile\] \"$tmp/w.vcd\"" "$tmp/w.gtkw" || fail ".gtkw does not name the VCD"
    # Full names of the VCD's variables, from its scopes.
    awk '$1=="$scope"{s[++d]=$3} $1=="$upscope"{d--}
         $1=="$var"{n=""; for(i=1;i<=d;i++) n=n s[i] "."; w=($3>1)?"[" $3-1 ":0]":""; print n $5 w}' \
      "$tmp/w.vcd" | sort >"$tmp/declared"
    grep '^SystemC\.' "$tmp/w.gtkw" | sort >"$tmp/listed"
    [ "$(wc -l <"$tmp/listed")" -ge 30 ] || fail "too few signals in the save file"
    missing=$(comm -23 "$tmp/listed" "$tmp/declared")
    [ -z "$missing" ] || fail "signals in .gtkw but not in the VCD: $missing"
    for sig in controller.pc controller.stall systolic_array.x_in_valid_3 systolic_array.sum_out_3 \
               systolic_array.acc_write activation_unit.busy host_dma.busy; do
      grep -q "^SystemC\.$sig" "$tmp/listed" || fail "$sig not traced"
    done
    # The first array input is valid for exactly the MMC's 3 rows.
    id=$(awk '$1=="$var" && $5=="x_in_valid_0"{print $4}' "$tmp/w.vcd")
    [ "$(grep -c "^1$id\$" "$tmp/w.vcd")" -eq 1 ] || fail "x_in_valid_0 does not rise once"
    ;;
  sim_gemm)  # tpu-sim gemm: --check passes, outputs have the right shape, bad shapes are errors
    /usr/bin/python3 -c "
import numpy as np
r = np.random.default_rng(5)
np.save('$tmp/a.npy', r.integers(-128, 128, (19, 23), dtype=np.int8))
np.save('$tmp/b.npy', r.integers(-128, 128, (23, 11), dtype=np.int8))
np.save('$tmp/bad.npy', r.integers(-128, 128, (22, 11), dtype=np.int8))"
    expect_status 0 "$bin/tpu-sim" gemm --a "$tmp/a.npy" --b "$tmp/b.npy" --out "$tmp/c.npy" \
      --check --array 4 --emit-asm "$tmp/g.s" --stats "$tmp/s.json"
    grep -q "check: all 209 elements equal the reference" "$tmp/out" || fail "check line"
    grep -qx "; GEMM 19x23x11 on a 4x4 array: 6 k-tiles, 3 column tiles, 1 chunk of 19 rows, int32 output" \
      "$tmp/g.s" || { grep ';' "$tmp/g.s"; fail "plural GEMM comment"; }
    grep -qx "; chunk 0: rows 0..18 of A into UB region 0" "$tmp/g.s" || fail "plural chunk comment"
    expect_status 0 "$bin/tpu-as" "$tmp/g.s" -o "$tmp/g.tpu"
    expect_status 0 "$bin/tpu-sim" gemm --a "$tmp/a.npy" --b "$tmp/b.npy" --out "$tmp/c8.npy" \
      --check --requant 77,12,-5 --act tanh
    /usr/bin/python3 -c "
import numpy as np
a = np.load('$tmp/a.npy').astype(np.int64); b = np.load('$tmp/b.npy').astype(np.int64)
c = np.load('$tmp/c.npy'); c8 = np.load('$tmp/c8.npy')
assert c.dtype == np.int32 and c.shape == (19, 11) and (c == a @ b).all(), 'int32 C'
assert c8.dtype == np.int8 and c8.shape == (19, 11), 'int8 C'"
    expect_status 3 "$bin/tpu-sim" gemm --a "$tmp/a.npy" --b "$tmp/bad.npy"
    grep -q "shapes do not match: A is 19x23 but B is 22x11" "$tmp/err" || fail "shape message"
    expect_status 2 "$bin/tpu-sim" gemm --a "$tmp/a.npy" --b "$tmp/b.npy" --act relu
    expect_status 2 "$bin/tpu-sim" gemm --a "$tmp/a.npy" --b "$tmp/b.npy" --requant 1,63,0
    # A 1x1x1 GEMM: every count is 1, and singular.
    /usr/bin/python3 -c "
import numpy as np
np.save('$tmp/a1.npy', np.array([[3]], np.int8))
np.save('$tmp/b1.npy', np.array([[-2]], np.int8))"
    expect_status 0 "$bin/tpu-sim" gemm --a "$tmp/a1.npy" --b "$tmp/b1.npy" --check --array 4 \
      --emit-asm "$tmp/g1.s"
    grep -qx "check: 1 element equals the reference GEMM (Eigen)" "$tmp/out" || fail "1 element"
    for line in "; GEMM 1x1x1 on a 4x4 array: 1 k-tile, 1 column tile, 1 chunk of 1 row, int32 output" \
                "; chunk 0: row 0 of A into UB region 0" "; output: C row 0, column 0"; do
      grep -qxF "$line" "$tmp/g1.s" || { grep ';' "$tmp/g1.s"; fail "no line '$line'"; }
    done
    # tpu-sim net with one layer, one sample, one output (tests/net has the rest).
    /usr/bin/python3 -c "
import json, numpy as np
np.save('$tmp/fc_w.npy', np.array([[1], [2], [3], [4]], np.int8))
np.save('$tmp/w11.npy', np.array([[1]], np.int8))
np.save('$tmp/w42.npy', np.ones((4, 2), np.int8))
np.save('$tmp/bias1.npy', np.array([5], np.int32))
np.save('$tmp/bias2.npy', np.array([1, 2], np.int32))
np.save('$tmp/x.npy', np.array([[1, 2, 3, 4]], np.int8))
np.save('$tmp/y1.npy', np.array([0], np.int64))
np.save('$tmp/y2.npy', np.array([0, 1], np.int64))
fc = {'type': 'dense', 'name': 'fc', 'weights': 'fc_w.npy', 'weight_scale': 0.01, 'output': 'int32'}
def model(name, **changes):
    m = {'format': 'tpu-sim-net', 'version': 1, 'name': 'tiny',
         'input': {'shape': [4], 'scale': 0.01, 'zero_point': 0}, 'layers': [dict(fc, **changes)]}
    json.dump(m, open('$tmp/' + name + '.json', 'w'))
model('tiny')
model('k1', weights='w11.npy')
model('bias1', weights='w42.npy', bias='bias1.npy')
model('bias2', bias='bias2.npy')"
    expect_status 0 "$bin/tpu-sim" net "$tmp/tiny.json" --input "$tmp/x.npy" --array 4 --check \
      --labels "$tmp/y1.npy" --emit-asm "$tmp/t.s" --host-steps
    for pattern in "^network tiny: 1 layer, batch 1, on a 4x4 array: 1 program$" \
                   "^  program 0  fc: [0-9]* instructions, input from the host, 1 chunk of 1 row$" \
                   "^check: 1 output element equals the int8 reference$"; do
      grep -q "$pattern" "$tmp/out" || { cat "$tmp/out"; fail "no line '$pattern'"; }
    done
    for line in "; fc on a 4x4 array: 1 row in 1 chunk of 1" \
                ";   layer 'fc': K = 4 (1 K tile), 1 output (1 column tile), int32 output" \
                "; chunk 0: row 0 into input region 0" "; chunk 0, layer 'fc', column tile 0: ACC row 0"; do
      grep -qxF "$line" "$tmp/t.s" || { grep ';' "$tmp/t.s"; fail "no line '$line'"; }
    done
    expect_status 3 "$bin/tpu-sim" net "$tmp/tiny.json" --input "$tmp/x.npy" --array 4 --labels "$tmp/y2.npy"
    grep -qx "tpu-sim: error: $tmp/y2.npy: expected 1 label (a 1-D array), got shape (2,)" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 label"; }
    expect_status 3 "$bin/tpu-sim" net "$tmp/k1.json" --input "$tmp/x.npy" --array 4
    grep -q "layer 'fc': weights of shape 1x1 expect 1 input feature, the input has 4$" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 input feature"; }
    expect_status 3 "$bin/tpu-sim" net "$tmp/bias1.json" --input "$tmp/x.npy" --array 4
    grep -qx "tpu-sim: error: $tmp/bias1.npy: 1 bias but the weights have 2 outputs" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 bias"; }
    expect_status 3 "$bin/tpu-sim" net "$tmp/bias2.json" --input "$tmp/x.npy" --array 4
    grep -qx "tpu-sim: error: $tmp/bias2.npy: 2 biases but the weights have 1 output" "$tmp/err" ||
      { cat "$tmp/err"; fail "1 output"; }
    ;;
  sim_engines)  # --engine rtl and both give the SystemC model's outputs; no build: exit 3
    expect_status 0 "$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/m.tpu"
    data="$src/programs/data/mlp2"
    expect_status 0 "$bin/tpu-sim" run "$tmp/m.tpu" --hostmem "$data/host.npy" \
      --weights "$data/weights.npy" --out "$tmp/sc.npy" --stats "$tmp/sc.json"
    expect_status 0 "$bin/tpu-sim" run "$tmp/m.tpu" --hostmem "$data/host.npy" \
      --weights "$data/weights.npy" --out "$tmp/rtl.npy" --stats "$tmp/rtl.json" --engine rtl
    cmp "$tmp/sc.npy" "$tmp/rtl.npy" || fail "--engine rtl output differs"
    cmp "$tmp/sc.json" "$tmp/rtl.json" || fail "--engine rtl stats differ"
    # The clock converts cycles to seconds and MACs to TOPS and changes no
    # cycle (the RTL build of small8 serves any clock).
    echo '{"clock_mhz": 350}' >"$tmp/clk.json"
    expect_status 0 "$bin/tpu-sim" run "$tmp/m.tpu" --hostmem "$data/host.npy" \
      --weights "$data/weights.npy" --stats "$tmp/clk.json.out" --config "$tmp/clk.json" --engine rtl
    /usr/bin/python3 -c "
import json
a, b = json.load(open('$tmp/sc.json')), json.load(open('$tmp/clk.json.out'))
assert a['clock_mhz'] == 700 and b['clock_mhz'] == 350, (a['clock_mhz'], b['clock_mhz'])
assert a['cycles'] == b['cycles'] and a['macs'] == b['macs']
for s, mhz in ((a, 700), (b, 350)):
    assert abs(s['seconds'] - s['cycles'] / (mhz * 1e6)) <= 1e-12 * s['seconds'], s
    assert abs(s['tops'] - 2 * s['macs'] / s['seconds'] / 1e12) <= 1e-9 * s['tops'], s
" || fail "seconds and TOPS do not follow the clock"
    expect_status 0 "$bin/tpu-sim" run "$tmp/m.tpu" --hostmem "$data/host.npy" \
      --weights "$data/weights.npy" --engine both
    grep -q "the RTL and the SystemC model agree" "$tmp/out" || fail "--engine both message"
    # Counts agree in number: one retire record, one program and seed.
    printf 'HLT\n' >"$tmp/h.s"
    expect_status 0 "$bin/tpu-as" "$tmp/h.s" -o "$tmp/h.tpu"
    expect_status 0 "$bin/tpu-sim" run "$tmp/h.tpu" --engine both
    grep -qx "engines: the RTL and the SystemC model agree on 1 retire record, the statistics and every memory" \
      "$tmp/out" || { cat "$tmp/out"; fail "1 retire record"; }
    expect_status 0 "$bin/tpu-cosim" --seed 3 --count 1
    grep -q "^tpu-cosim: 1 program (seed 3) on small8 with N=8 and random memory timing: " "$tmp/out" || { cat "$tmp/out"; fail "1 program"; }
    expect_status 0 "$bin/tpu-cosim" --seed 3 --count 2
    grep -q "^tpu-cosim: 2 programs (seeds 3..4) on small8 with N=8 and random memory timing: " "$tmp/out" || { cat "$tmp/out"; fail "2 programs"; }
    expect_status 0 "$bin/tpu-cosim" --seed 3 --count 1 --fixed-timing
    grep -q "^tpu-cosim: 1 program (seed 3) on small8 with N=8: " "$tmp/out" || { cat "$tmp/out"; fail "--fixed-timing"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/m.tpu" --hostmem "$data/host.npy" \
      --weights "$data/weights.npy" --engine rtl --preset tpuv1 --array 8
    grep -q "no RTL build for this configuration" "$tmp/err" || fail "no-build message"
    # ... and the one command that builds it: the package, then the builds so far and tpuv1/8
    grep -qF "build it with: build/sim/tpu-gen config-pkg --preset tpuv1 --array 8 -o rtl/config/tpuv1_n8/tpu_config_pkg.sv && cmake -S . -B build -DTPU_RTL_PRESETS='" "$tmp/err" ||
      { cat "$tmp/err"; fail "no-build message: the command that builds it"; }
    grep -qF ";tpuv1/8' && cmake --build build" "$tmp/err" || { cat "$tmp/err"; fail "no-build message: the entry"; }
    # The RTL implements HWT: the host route runs on both engines alike.
    printf 'RHM 0, 0, 4\nHWT.T 0, 1, 4\nRW 1\nMMC.SO 0, 0, 4\nHLT\n' >"$tmp/hwt.s"
    expect_status 0 "$bin/tpu-as" "$tmp/hwt.s" -o "$tmp/hwt.tpu" --preset small4
    expect_status 0 "$bin/tpu-sim" run "$tmp/hwt.tpu" --preset small4 --engine both
    grep -q "the RTL and the SystemC model agree" "$tmp/out" || { cat "$tmp/out"; fail "HWT on both engines"; }
    # So does RWU, with ub_weight_path (an input of the core, not a build's):
    # the on-chip route runs on both engines alike, and without the flag the
    # RTL faults at the RWU with the model's reason.
    printf 'RHM 0, 0, 4\nHWT.T 0, 1, 4\nRWU.T 0, 3\nRW 1\nMMC.SO 0, 0, 4\nMMC.SO 0, 4, 4\nHLT\n' >"$tmp/att.s"
    echo '{"preset": "small4", "ub_weight_path": 1}' >"$tmp/att.json"
    expect_status 0 "$bin/tpu-as" "$tmp/att.s" -o "$tmp/att.tpu" --config "$tmp/att.json"
    expect_status 0 "$bin/tpu-sim" run "$tmp/att.tpu" --config "$tmp/att.json" --engine both
    grep -q "the RTL and the SystemC model agree" "$tmp/out" || { cat "$tmp/out"; fail "RWU on both engines"; }
    expect_status 4 "$bin/tpu-sim" run "$tmp/att.tpu" --preset small4 --engine rtl
    grep -qF "fault at pc 2 (RWU.T 0, 3), cycle" "$tmp/err" || { cat "$tmp/err"; fail "RWU fault: pc"; }
    grep -qF "RWU needs the configuration's ub_weight_path" "$tmp/err" || { cat "$tmp/err"; fail "RWU fault: reason"; }
    ;;
  isa_pkg_fresh)  # the committed SystemVerilog package matches the instruction table
    "$bin/tpu-gen" isa-pkg >"$tmp/pkg.sv"
    diff -u "$src/rtl/tpu_isa_pkg.sv" "$tmp/pkg.sv" ||
      fail "rtl/tpu_isa_pkg.sv is stale: run tpu-gen isa-pkg -o rtl/tpu_isa_pkg.sv"
    ;;
  act_pkg_fresh)  # the committed activation tables match the model's generator
    "$bin/tpu-gen" act-pkg >"$tmp/act.sv"
    diff -u "$src/rtl/tpu_act_pkg.sv" "$tmp/act.sv" ||
      fail "rtl/tpu_act_pkg.sv is stale: run tpu-gen act-pkg -o rtl/tpu_act_pkg.sv"
    ;;
  codes_pkg_fresh)  # the committed stall and fault codes match the model's tables
    "$bin/tpu-gen" codes-pkg >"$tmp/codes.sv"
    diff -u "$src/rtl/tpu_codes_pkg.sv" "$tmp/codes.sv" ||
      fail "rtl/tpu_codes_pkg.sv is stale: run tpu-gen codes-pkg -o rtl/tpu_codes_pkg.sv"
    ;;
  rtl_config_fresh)  # the committed configuration package ARG (PRESET or PRESET_nN) is up to date
    preset=$arg
    args=()
    if [[ $arg =~ ^(.+)_n([0-9]+)$ ]]; then
      preset=${BASH_REMATCH[1]}
      args=(--array "${BASH_REMATCH[2]}")
    fi
    "$bin/tpu-gen" config-pkg --preset "$preset" "${args[@]}" >"$tmp/cfg.sv"
    diff -u "$src/rtl/config/$arg/tpu_config_pkg.sv" "$tmp/cfg.sv" ||
      fail "rtl/config/$arg is stale: tpu-gen config-pkg --preset $preset ${args[*]} -o rtl/config/$arg/tpu_config_pkg.sv"
    ;;
  rtl_lint)  # the RTL core is lint-clean (verilator -Wall) for configuration ARG (rtl/config/ARG)
    (cd "$src/rtl" && verilator --lint-only -Wall --top-module tpu_core \
      "config/$arg/tpu_config_pkg.sv" -F tpu_core.f)
    ;;
  isa_pkg_lint)  # the generated package is clean Verilog
    # UNUSEDPARAM is waived because a package linted on its own uses none of its parameters.
    verilator --lint-only -Wall -Wno-UNUSEDPARAM "$src/rtl/tpu_isa_pkg.sv"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name $arg"
