#!/usr/bin/env bash
# Command-line tests of `tpu-sim topo`; one case per CTest test.
#   topo_cli_test.sh CASE BIN_DIR SOURCE_DIR [SUBSET]
# SUBSET (the sanitizer build): "small" runs fewer rows.
source "$(dirname "${BASH_SOURCE[0]}")/../cli/test_lib.sh"
topos="$src/programs/topologies"
py=/usr/bin/python3

# expect_stderr TEXT: stderr is exactly the one line TEXT.
expect_stderr() {
  [ "$(cat "$tmp/err")" = "$1" ] || { cat "$tmp/err" >&2; fail "stderr is not '$1'"; }
}

# check_report CSV ROWS: the header of the per-layer report and ROWS rows,
# each row's useful MACs equal to SCALE-Sim's count (closed form) times the
# batch, and its cycles at least its array-active cycles.
check_report() {
  $py - "$1" "$2" <<'EOF' || fail "report $1"
import csv, sys
path, want = sys.argv[1], int(sys.argv[2])
lines = open(path).read().splitlines()
assert lines[0] == ("layer,type,output_shape,program,cycles,instructions,array_active_cycles,array_macs,"
                    "useful_macs,utilization_percent,mapping_efficiency_percent,host_read_bytes,"
                    "host_write_bytes,weight_bytes,host_bytes_per_cycle,weight_bytes_per_cycle,"
                    "weight_stall_cycles,weight_shift_cycles,non_matrix_cycles,raw_stall_cycles,"
                    "input_data_stall_cycles,energy_uj,static_energy_uj,avg_power_w,"
                    "matrix_unit_energy_uj,unified_buffer_energy_uj,accumulators_energy_uj,"
                    "weight_fifo_energy_uj,activation_unit_energy_uj,weight_memory_energy_uj,"
                    "host_interface_energy_uj,controller_energy_uj,fixed_energy_uj,"
                    "line,scalesim_ofmap_hxw,scalesim_macs,useful_utilization_percent,note"), lines[0]
rows = list(csv.DictReader(open(path)))
assert len(rows) == want, (len(rows), want)
for r in rows:
    assert int(r['useful_macs']) == int(r['scalesim_macs']), r
    assert int(r['cycles']) >= int(r['array_active_cycles']) > 0, r
    # The TPUv1 counters split the cycles; RAW and input data stalls are parts of non-matrix.
    assert int(r['cycles']) == sum(int(r[k]) for k in ('array_active_cycles', 'weight_stall_cycles',
                                                       'weight_shift_cycles', 'non_matrix_cycles')), r
    assert int(r['raw_stall_cycles']) + int(r['input_data_stall_cycles']) <= int(r['non_matrix_cycles']), r
    assert 0 < float(r['utilization_percent']) <= 100, r
    u = float(r['utilization_percent']) * float(r['mapping_efficiency_percent']) / 100
    assert abs(float(r['useful_utilization_percent']) - u) < 0.01, r
EOF
}

case "$case_name" in
  alexnet)  # every row but fc6 (its 37.7 MB of weights exceed small16's weight memory)
    rows=1-5,7-8
    [ "$arg" = small ] && rows=3,8
    expect_status 0 "$bin/tpu-sim" topo "$topos/alexnet.csv" --preset small16 --rows $rows --check \
      --report "$tmp/r.csv"
    grep -q "^check: $( [ "$arg" = small ] && echo 2 || echo 7) rows equal the int8 reference" "$tmp/out" ||
      { cat "$tmp/out"; fail "no check line"; }
    check_report "$tmp/r.csv" "$( [ "$arg" = small ] && echo 2 || echo 7)"
    # conv1: 55 x 55 x 11 x 11 x 3 x 96 MACs (SCALE-Sim's and a valid convolution's sizes agree).
    [ "$arg" = small ] || grep -q "^   2 conv1 .* 55x55x96 .* 105415200 " "$tmp/out" || { cat "$tmp/out"; fail "conv1"; }
    ;;
  resnet18)  # all 21 rows; ResNet-18's 1.814 GMACs (He et al.: 1.8 GFLOPs)
    rows=1-21
    [ "$arg" = small ] && rows=1,8,21
    expect_status 0 "$bin/tpu-sim" topo "$topos/resnet18.csv" --preset small8 --rows $rows --check \
      --report "$tmp/r.csv" --stats "$tmp/s.json"
    if [ "$arg" != small ]; then
      check_report "$tmp/r.csv" 21
      # The MACs by the closed form of each row, summed independently of tpu-sim.
      $py - "$topos/resnet18.csv" "$tmp/s.json" <<'EOF' || fail "ResNet-18 MACs"
import json, sys
rows = [l.split(',') for l in open(sys.argv[1]).read().splitlines()[1:]]
total = 0
for r in rows:
    h, w, fh, fw, c, n, s = (int(x) for x in r[1:8])
    oh, ow = (h - fh) // s + 1, (w - fw) // s + 1
    total += oh * ow * fh * fw * c * n
stats = json.load(open(sys.argv[2]))
assert total == 1814073344, total
assert stats['total']['useful_macs'] == total, stats['total']
assert stats['total']['scalesim_macs'] == total
assert len(stats['layers']) == 21
assert sum(l['cycles'] for l in stats['layers']) == stats['total']['cycles']
EOF
    else
      check_report "$tmp/r.csv" 3
    fi
    ;;
  mobilenet)  # depthwise 'DP' rows (some in bands), pointwise rows; MobileNet's 569 M mult-adds
    rows=1-28
    [ "$arg" = small ] && rows=1-4,27-28
    expect_status 0 "$bin/tpu-sim" topo "$topos/mobilenet.csv" --preset small8 --rows $rows --check \
      --report "$tmp/r.csv" --stats "$tmp/s.json"
    grep -q "^   3 DP1 .*dwconv .* 112x112x32 .*depthwise ('DP' in the name; SCALE-Sim runs 32 single-channel layers); in [0-9]* bands" \
      "$tmp/out" || { cat "$tmp/out"; fail "DP1 as depthwise in bands"; }
    if [ "$arg" != small ]; then
      check_report "$tmp/r.csv" 28
      $py -c "
import json
s = json.load(open('$tmp/s.json'))
# Howard et al. 2017, Table 2: 569 million mult-adds; by the closed form of every layer 568 740 352.
assert s['total']['useful_macs'] == 568740352, s['total']
t = [l['type'] for l in s['layers']]
assert t.count('depthwise_conv2d') == 13 and t.count('conv2d') == 15, t
" || fail "MobileNet MACs"
    fi
    ;;
  gemm)  # the GEMM list: M samples of a K -> N dense layer
    rows=1-6
    [ "$arg" = small ] && rows=2-3
    expect_status 0 "$bin/tpu-sim" topo "$topos/gemm_bert_base.csv" --preset small16 --rows $rows --check \
      --report "$tmp/r.csv"
    check_report "$tmp/r.csv" "$( [ "$arg" = small ] && echo 2 || echo 6)"
    grep -q "^   3 attention_scores .*dense .* 128x64 .* 64x128 .* 128x128 .* 1048576 " "$tmp/out" ||
      { cat "$tmp/out"; fail "attention_scores (128 x 128 x 64 MACs)"; }
    ;;
  tpuv1)  # rows on the TPUv1 machine; SCALE-Sim's ceil rule in the note and the padded output
    # ResNet-18's stem: 112 x 112 x 7 x 7 x 3 x 64 MACs.
    expect_status 0 "$bin/tpu-sim" topo "$topos/resnet18.csv" --preset tpuv1 --rows 1 --check
    grep -q "^   2 conv1 .* 229x229x3 .* 112x112x64 .* 118013952 " "$tmp/out" || { cat "$tmp/out"; fail "conv1"; }
    grep -q "^check: 1 row equals the int8 reference (802816 output elements)$" "$tmp/out" || fail "check"
    printf '%s\n' "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides," \
      "Conv3_s,56,56,1,1,64,128,2," >"$tmp/t.csv"
    expect_status 0 "$bin/tpu-sim" topo "$tmp/t.csv" --preset tpuv1 --check --report "$tmp/r.csv"
    # ceil((56 - 1 + 2) / 2) = 29 rows and columns; a valid convolution has 28.
    grep -q "^   2 Conv3_s .* 29x29x128 .*padded bottom 1 right 1 to SCALE-Sim's 29x29 (valid: 28x28)$" "$tmp/out" ||
      { cat "$tmp/out"; fail "Conv3_s"; }
    check_report "$tmp/r.csv" 1
    grep -q ',2,29x29,6889472,[0-9.]*,padded bottom 1 right 1' "$tmp/r.csv" || { cat "$tmp/r.csv"; fail "row"; }
    expect_status 0 "$bin/tpu-sim" topo "$tmp/t.csv" --preset tpuv1 --check --valid
    grep -q "^   2 Conv3_s .* 28x28x128 .*valid convolution: 28x28, SCALE-Sim's output is 29x29$" "$tmp/out" ||
      { cat "$tmp/out"; fail "--valid"; }
    ;;
  errors)  # one line FILE:LINE: error: ..., exit 3; usage errors exit 2
    h="Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,"
    printf '%s\n' "$h" "Conv1,224,224,11,11,3,96,4," "Conv2,27,27,5,5,96,256," >"$tmp/short.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/short.csv"
    expect_stderr "$tmp/short.csv:3: error: expected 8 columns (Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides) or 9 (with the stride width last), got 7"
    [ ! -s "$tmp/out" ] || fail "output before a parse error"
    printf '%s\n' "$h" "Conv1,224,224,11,11,three,96,4," >"$tmp/word.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/word.csv"
    expect_stderr "$tmp/word.csv:2: error: column 6 (Channels) is 'three', not a positive integer"
    printf '%s\n' "$h" "L,5,5,7,3,1,1,1," >"$tmp/big.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/big.csv"
    expect_stderr "$tmp/big.csv:2: error: the filter height 7 is larger than the IFMAP height 5"
    # Every row is checked before any runs.
    printf '%s\n' "$h" "ok,8,8,3,3,4,2,1," "DP_x,8,8,3,3,4,2,1," >"$tmp/dp.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/dp.csv"
    expect_stderr "$tmp/dp.csv:3: error: 'DP_x' is a depthwise row ('DP' in its name) with 2 filters per channel: tpu-sim's depthwise convolution has one"
    [ ! -s "$tmp/out" ] || { cat "$tmp/out"; fail "a row ran before the error"; }
    : >"$tmp/empty.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/empty.csv"
    expect_stderr "$tmp/empty.csv: error: the file is empty (no header line)"
    printf 'Layer, M, N, K,\nfc,4,4,\n' >"$tmp/g.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/g.csv"
    expect_stderr "$tmp/g.csv:2: error: expected 4 columns (Layer, M, N, K), got 3"
    # A row that does not fit the machine: its line, exit 3.
    printf 'Layer, M, N, K,\nok,2,2,2,\nhuge,1,1024,2048,\n' >"$tmp/fit.csv"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/fit.csv" --preset small4
    grep -q "^$tmp/fit.csv:3: error: layer 'huge' does not compile: the network's weights need 131072 tiles, weight memory has 65536" "$tmp/err" ||
      { cat "$tmp/err"; fail "does not fit"; }
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "not one line"
    expect_status 3 "$bin/tpu-sim" topo "$tmp/missing.csv"
    grep -q "missing.csv" "$tmp/err" || fail "missing file"
    # Usage errors.
    expect_status 2 "$bin/tpu-sim" topo "$topos/alexnet.csv" --rows 0
    grep -q "outside the file's rows 1..8" "$tmp/err" || { cat "$tmp/err"; fail "--rows 0"; }
    expect_status 2 "$bin/tpu-sim" topo "$topos/alexnet.csv" --rows 2-x
    expect_status 2 "$bin/tpu-sim" topo "$topos/gemm_bert_base.csv" --batch 2
    grep -q "a GEMM file's rows are M samples each" "$tmp/err" || { cat "$tmp/err"; fail "--batch"; }
    expect_status 2 "$bin/tpu-sim" topo "$topos/alexnet.csv" --vcd "$tmp/t.vcd"
    expect_status 2 "$bin/tpu-sim" topo "$topos/alexnet.csv" --format csv
    ;;
  batch_seed)  # --batch multiplies the work; the seed changes the data, not the figures
    printf '%s\n' "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides," \
      "a,10,10,3,3,12,20,1," >"$tmp/t.csv"
    expect_status 0 "$bin/tpu-sim" topo "$tmp/t.csv" --preset small8 --batch 3 --check --report "$tmp/r.csv"
    $py -c "
import csv
r = list(csv.DictReader(open('$tmp/r.csv')))[0]
assert r['output_shape'] == '3x8x8x20', r
assert int(r['useful_macs']) == 3 * 8 * 8 * 3 * 3 * 12 * 20 == int(r['scalesim_macs']), r
" || fail "batch 3"
    expect_status 0 "$bin/tpu-sim" topo "$tmp/t.csv" --preset small8 --batch 3 --seed 7 --check --report "$tmp/r7.csv"
    cmp "$tmp/r.csv" "$tmp/r7.csv" || fail "the seed changed the figures"
    # No progress line when stderr is not a terminal.
    [ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "stderr not empty"; }
    ;;
  *) fail "unknown case $case_name" ;;
esac
