#!/usr/bin/env bash
# Command-line tests of `tpu-sim net`; one case per CTest test.
#   net_cli_test.sh CASE BIN_DIR SOURCE_DIR
source "$(dirname "${BASH_SOURCE[0]}")/../cli/test_lib.sh"
nets="$src/programs/nets"
py=/usr/bin/python3  # Debian's python3-numpy

# expect_error PATTERN: stderr is one line matching PATTERN.
expect_error() {
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err" >&2; fail "not one line on stderr"; }
  grep -q -- "$1" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr does not say '$1'"; }
}

# A copy of the MLP demo to break in various ways.
copy_mlp() {
  mkdir -p "$tmp/m"
  cp "$nets"/digits_mlp/*.npy "$nets/digits_mlp/model.json" "$tmp/m/"
}
# edit_model PYTHON: runs PYTHON on the JSON object `m` of $tmp/m/model.json and writes it back.
edit_model() {
  $py -c "
import json
m = json.load(open('$tmp/m/model.json'))
$1
json.dump(m, open('$tmp/m/model.json', 'w'))"
}

# A token_bias network in $tmp/m: tb.json (input 2 x 3 x 4, one prefix token, a 7 x 4 bias table
# tb_b.npy), tb_t.json (the table transposed, tb_bt.npy), an input batch of two tb_x.npy.
token_bias_model() {
  mkdir -p "$tmp/m"
  $py -c "
import json, numpy as np
np.save('$tmp/m/tb_x.npy', np.arange(48, dtype=np.int8).reshape(2, 2, 3, 4))
np.save('$tmp/m/tb_b.npy', np.arange(28, dtype=np.int32).reshape(7, 4) * 50)
np.save('$tmp/m/tb_bt.npy', np.arange(28, dtype=np.int32).reshape(4, 7) * 50)
layer = {'type': 'token_bias', 'name': 'tb', 'prefix_tokens': 1, 'bias': 'tb_b.npy',
         'output': {'scale': 0.05, 'zero_point': 3}}
m = {'format': 'tpu-sim-net', 'version': 1, 'input': {'shape': [2, 3, 4], 'scale': 0.1, 'zero_point': -2},
     'layers': [layer]}
json.dump(m, open('$tmp/m/tb.json', 'w'))
layer['bias'] = 'tb_bt.npy'
json.dump(m, open('$tmp/m/tb_t.json', 'w'))"
}

case "$case_name" in
  report)  # the per-layer report, statistics JSON, labels, --check, int8 and float input
    # The whole network on chip: one program.
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$nets/digits_cnn/test_x.npy" \
      --labels "$nets/digits_cnn/test_y.npy" --stats "$tmp/s1.json" --out "$tmp/y1.npy" --check
    for pattern in "^network digits_cnn: 6 layers, batch 360, on a 8x8 array: 1 program$" \
                   "^  program 0  all layers on chip: .* the host lays out the im2col of layer 'conv1'" \
                   "^pool1 *maxpool2d *360x4x4x8 *prog 0 " "^fc2 *dense *360x10 *prog 0 " \
                   "^accuracy: 357/360 = " "^check: all 3600 output elements equal the int8 reference"; do
      grep -q "$pattern" "$tmp/out" || { cat "$tmp/out"; fail "on chip: no line '$pattern'"; }
    done
    # The per-layer report: one row per layer, units in the header, figures
    # equal to the statistics JSON and adding up to the program's.
    expect_status 0 "$bin/tpu-sim" net "$nets/resnet_mini/model.json" --input "$nets/resnet_mini/test_x.npy" \
      --report "$tmp/r.csv" --stats "$tmp/r.json"
    $py -c "
import csv, json
rows = list(csv.DictReader(open('$tmp/r.csv')))
s = json.load(open('$tmp/r.json'))
p = s['programs'][0]
assert [r['layer'] for r in rows] == [l['name'] for l in s['layers']], rows
for r, l in zip(rows, s['layers']):
    for k in ('cycles', 'array_macs', 'useful_macs', 'host_read_bytes', 'host_write_bytes', 'weight_bytes'):
        assert int(r[k]) == l[k], (k, r, l)
    assert int(r['array_active_cycles']) == l['mmc_rows']
assert sum(int(r['cycles']) for r in rows) == p['cycles']
assert sum(int(r['array_active_cycles']) for r in rows) == p['array_active_cycles']
# The TPUv1 counters: each layer's cycles split four ways; the layers' parts add up to the program's.
for r, l in zip(rows, s['layers']):
    assert int(r['cycles']) == sum(int(r[k]) for k in ('array_active_cycles', 'weight_stall_cycles',
                                                       'weight_shift_cycles', 'non_matrix_cycles')), r
    for k in ('weight_stall_cycles', 'weight_shift_cycles', 'raw_stall_cycles', 'input_data_stall_cycles',
              'non_matrix_cycles'):
        assert int(r[k]) == l[k], (k, r, l)
for k in ('weight_stall_cycles', 'weight_shift_cycles', 'non_matrix_cycles', 'raw_stall_cycles',
          'input_data_stall_cycles'):
    assert sum(int(r[k]) for r in rows) == p['tpuv1'][k], k
assert p['tpuv1']['weight_stall_cycles'] + p['tpuv1']['weight_shift_cycles'] > 0
n = p['array_n']
assert sum(int(r['weight_bytes']) for r in rows) == p['units']['weight_dma']['instructions'] * n * n
# The input: the host's im2col of the 3x3x3 stem, 27 lanes in 4 groups of N = 8, for 16 samples of
# 16x16 pixels; the output: 10 classes in 2 groups, one row each per sample.
assert n == 8
assert sum(int(r['host_read_bytes']) for r in rows) == 16 * 16 * 16 * 4 * n
assert sum(int(r['host_write_bytes']) for r in rows) == 16 * 2 * n
assert {r['type'] for r in rows} >= {'conv2d', 'maxpool2d', 'add', 'global_avgpool2d', 'dense'}
" || fail "per-layer report"
    $py -c "
import json
s = json.load(open('$tmp/s1.json'))
assert len(s['programs']) == 1 and all(l['program'] == 0 for l in s['layers'])
assert sum(l['cycles'] for l in s['layers']) == s['total']['cycles']
assert all(l['cycles'] >= l['mmc_rows'] and l['utilization'] <= 1.0 for l in s['layers'])"
    # With host steps: two programs and a max-pool on the host.
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$nets/digits_cnn/test_x.npy" \
      --labels "$nets/digits_cnn/test_y.npy" --stats "$tmp/s.json" --out "$tmp/y.npy" --check --host-steps
    cmp "$tmp/y.npy" "$tmp/y1.npy" || fail "on chip and with host steps differ"
    for pattern in "^network digits_cnn: 6 layers, batch 360, on a 8x8 array: 2 programs" \
                   "^  program 0  conv1: .* input from the host (im2col)" \
                   "^  host       pool1 (maxpool2d)" \
                   "^  program 1  conv2, flatten, fc1, fc2: " \
                   "^conv1 *conv2d *360x8x8x8 *prog 0 " "^pool1 *maxpool2d *360x4x4x8 *host *- " \
                   "^fc2 *dense *360x10 *prog 1 " "^total: [0-9]* cycles" \
                   "^accuracy: [0-9]*/360 = " "^check: all 3600 output elements equal the int8 reference"; do
      grep -q "$pattern" "$tmp/out" || { cat "$tmp/out"; fail "no line '$pattern'"; }
    done
    $py -c "
import json, numpy as np
s = json.load(open('$tmp/s.json'))
assert [l['name'] for l in s['layers']] == ['conv1', 'pool1', 'conv2', 'flatten', 'fc1', 'fc2']
assert s['layers'][1]['program'] is None and s['layers'][4]['program'] == 1
assert len(s['programs']) == 2 and s['programs'][1]['layers'] == ['conv2', 'flatten', 'fc1', 'fc2']
assert sum(l['cycles'] for l in s['layers']) == s['total']['cycles'] == sum(p['cycles'] for p in s['programs'])
assert s['total']['macs'] == sum(l['array_macs'] for l in s['layers'])
assert all(l['cycles'] >= l['mmc_rows'] and l['utilization'] <= 1.0 for l in s['layers'])
assert s['accuracy']['total'] == 360
y = np.load('$tmp/y.npy'); assert y.dtype == np.int8 and y.shape == (360, 10)
# The same input already quantized gives the same output.
import sys; sys.path.insert(0, '$src/tools'); import int8_reference as r
m = json.load(open('$nets/digits_cnn/model.json'))['input']
np.save('$tmp/xq.npy', r.quantize_input(np.load('$nets/digits_cnn/test_x.npy'), m['scale'], m['zero_point']))"
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$tmp/xq.npy" --out "$tmp/yq.npy"
    cmp "$tmp/y.npy" "$tmp/yq.npy" || fail "int8 input gives another output than float input"
    ;;
  emit_asm)  # --emit-asm: F.s for one program, F.K.s for several; each assembles; --vcd likewise
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$nets/digits_mlp/test_x.npy" \
      --emit-asm "$tmp/mlp.s"
    [ -s "$tmp/mlp.s" ] || fail "no mlp.s"
    expect_status 0 "$bin/tpu-as" "$tmp/mlp.s" -o "$tmp/mlp.tpu"
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$nets/digits_cnn/test_x.npy" \
      --emit-asm "$tmp/one.s"
    expect_status 0 "$bin/tpu-as" "$tmp/one.s" -o "$tmp/one.tpu"
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$nets/digits_cnn/test_x.npy" \
      --emit-asm "$tmp/cnn.s" --host-steps
    [ ! -e "$tmp/cnn.s" ] || fail "cnn.s written for a two-program network"
    for k in 0 1; do expect_status 0 "$bin/tpu-as" "$tmp/cnn.$k.s" -o "$tmp/cnn.$k.tpu"; done
    # A token_bias's constants are host data, like the weight image: the program says where they go.
    token_bias_model
    expect_status 0 "$bin/tpu-sim" net "$tmp/m/tb.json" --input "$tmp/m/tb_x.npy" --emit-asm "$tmp/tb.s" --check
    grep -q "^; host rows [0-9]*-[0-9]*: token_bias constants" "$tmp/tb.s" || fail "tb.s does not name its host constants"
    expect_status 0 "$bin/tpu-as" "$tmp/tb.s" -o "$tmp/tb.tpu"
    # A small batch with waveforms (the detailed model): one VCD per program.
    $py -c "
import numpy as np
np.save('$tmp/x3.npy', np.load('$nets/digits_cnn/test_x.npy')[:3])"
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$tmp/x3.npy" --vcd "$tmp/w.vcd" --check \
      --host-steps
    [ -s "$tmp/w.0.vcd" ] && [ -s "$tmp/w.1.vcd" ] || fail "no w.0.vcd and w.1.vcd"
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$nets/digits_mlp/test_x.npy" --trace
    grep -q "^== program 0 ==" "$tmp/out" || fail "no program heading"
    grep -q "^pc  *[0-9]*  RHM" "$tmp/out" || fail "no trace lines"
    ;;
  engines)  # the network's programs on the RTL core agree with the SystemC model (--engine both)
    $py -c "
import numpy as np
np.save('$tmp/x16.npy', np.load('$nets/digits_mlp/test_x.npy')[:16])
np.save('$tmp/y16.npy', np.load('$nets/digits_mlp/expected.npy')[:16])
np.save('$tmp/x2.npy', np.load('$nets/digits_cnn/test_x.npy')[:2])"
    expect_status 0 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$tmp/x16.npy" --engine rtl \
      --out "$tmp/y.npy"
    cmp "$tmp/y.npy" "$tmp/y16.npy" || fail "--engine rtl differs from the int8 reference"
    for preset in small4 small8; do  # small16's RTL is slow under the sanitizers
      expect_status 0 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$tmp/x2.npy" --engine both \
        --check --preset "$preset" --host-steps
      [ "$(grep -c '^engines: the RTL and the SystemC model agree' "$tmp/out")" -eq 2 ] ||
        { cat "$tmp/out"; fail "$preset: the engines do not agree on both programs"; }
      # Whole networks on chip: MMC.C, POOL, POOL.A, adds, depthwise, gathers.
      for net in digits_cnn resnet_mini mobilenet_mini; do
        $py -c "
import numpy as np
np.save('$tmp/n2.npy', np.load('$nets/$net/test_x.npy')[:2])"
        expect_status 0 "$bin/tpu-sim" net "$nets/$net/model.json" --input "$tmp/n2.npy" --engine both \
          --preset "$preset" --out "$tmp/n2_out.npy"
        [ "$(grep -c '^engines: the RTL and the SystemC model agree' "$tmp/out")" -eq 1 ] ||
          { cat "$tmp/out"; fail "$preset: the engines do not agree on $net"; }
      done
    done
    ;;
  usage)  # usage errors exit 2
    expect_status 2 "$bin/tpu-sim" net
    expect_status 2 "$bin/tpu-sim" net "$nets/digits_mlp/model.json"
    expect_status 2 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$nets/digits_mlp/test_x.npy" --array 3
    ;;
  bad_files)  # malformed models and inputs: one line naming the file, exit 3
    expect_status 3 "$bin/tpu-sim" net "$tmp/missing.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "missing.json"
    echo '{"format": "tpu-sim-net", ' >"$tmp/bad.json"
    expect_status 3 "$bin/tpu-sim" net "$tmp/bad.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "bad.json: invalid JSON"
    copy_mlp
    edit_model "m['layers'][0]['type'] = 'lstm'"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "model.json: layer 0 ('fc1'): 'type' must be one of dense, conv2d, maxpool2d, avgpool2d, global_avgpool2d, add, concat, mul, affine, upsample, flatten, softmax, matmul, layernorm, gelu, token_bias"
    copy_mlp
    edit_model "m['layers'].insert(0, {'type': 'upsample', 'name': 'up', 'scale': [0, 2]})"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "model.json: layer 0 ('up'): 'scale' = 0 is outside 1..255"
    copy_mlp
    edit_model "m['layers'].insert(0, {'type': 'upsample', 'name': 'up', 'scale': 2})"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "layer 'up': upsample needs an HxWxC input, got 64"
    copy_mlp
    edit_model "m['layers'][1]['activaton'] = 'relu'"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "layer 1 ('fc2'): unknown key 'activaton'"
    copy_mlp
    edit_model "m['layers'][1]['output']['zero_point'] = 200"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "'zero_point' = 200 is outside -128..127"
    copy_mlp
    rm "$tmp/m/fc2_w.npy"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "fc2_w.npy"
    copy_mlp
    cp "$tmp/m/fc1_b.npy" "$tmp/m/fc2_w.npy"  # int32, 1-D
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "fc2_w.npy: expected a 2-D int8 array"
    copy_mlp
    cp "$tmp/m/fc2_b.npy" "$tmp/m/fc1_b.npy"  # 10 biases for 32 outputs
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "fc1_b.npy: 10 biases but the weights have 32 outputs"
    # A token_bias's table is tokens x features: (1 + 2*3) x 4 loads, its transpose (same count) does not.
    token_bias_model
    expect_status 0 "$bin/tpu-sim" net "$tmp/m/tb.json" --input "$tmp/m/tb_x.npy" --reference-only
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/tb_t.json" --input "$tmp/m/tb_x.npy" --reference-only
    expect_error "tb_bt.npy: the bias is (4, 7) but the layer has 7 tokens of 4 features (tokens x features, 7 x 4)"
    copy_mlp
    edit_model "m['layers'].insert(1, {'type': 'maxpool2d', 'pool': 2})"
    expect_status 3 "$bin/tpu-sim" net "$tmp/m/model.json" --input "$nets/digits_mlp/test_x.npy"
    expect_error "max-pool needs an HxWxC input"
    # Inputs of the wrong shape or type; labels of the wrong length.
    expect_status 3 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$nets/digits_cnn/test_x.npy"
    expect_error "test_x.npy: expected a batch of inputs of shape (B, 64), got shape (360, 8, 8, 1)"
    expect_status 3 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$nets/digits_mlp/test_y.npy"
    expect_error "test_y.npy: expected a batch of inputs"
    $py -c "
import numpy as np
np.save('$tmp/xi.npy', np.zeros((4, 64), np.int32))
np.save('$tmp/l5.npy', np.zeros(5, np.int64))
np.save('$tmp/x4.npy', np.zeros((4, 64), np.float32))"
    expect_status 3 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$tmp/xi.npy"
    expect_error "must be int8 (quantized) or float32/float64, got int32"
    expect_status 3 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$tmp/x4.npy" --labels "$tmp/l5.npy"
    expect_error "l5.npy: expected 4 labels"
    # A network too big for the machine.
    echo '{"ub_rows": 8}' >"$tmp/tiny.json"
    expect_status 3 "$bin/tpu-sim" net "$nets/digits_mlp/model.json" --input "$tmp/x4.npy" --config "$tmp/tiny.json"
    expect_error "does not fit"
    ;;
  fault)  # a program that runs out of cycles: exit 4, the program named
    expect_status 4 "$bin/tpu-sim" net "$nets/digits_cnn/model.json" --input "$nets/digits_cnn/test_x.npy" \
      --max-cycles 1000
    grep -q "^tpu-sim: fault at pc .*cycle limit 1000 reached" "$tmp/err" || { cat "$tmp/err"; fail "fault message"; }
    grep -q "^== program 0 ==" "$tmp/out" || fail "the faulting program is not named"
    grep -q "^== program 1 ==" "$tmp/out" && fail "program 1 ran after a fault"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
