// SCALE-Sim topology files (formats/topology.h): both formats as SCALE-Sim
// v2's topology_utils.py reads them (header skipped, trailing comma, one or
// two stride columns, 'DP' depthwise rows, the GEMM header Layer, M, N, K),
// the output sizes of its ceil rule against a valid convolution, the row
// networks built from them, and the errors. Expected sizes and MAC counts
// are closed forms worked out by hand here; outputs come from the independent
// int8 reference (compiler/layer_reference.h), never from the compiler.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "compiler/layer_reference.h"
#include "formats/topology.h"

namespace {

using namespace tpu::compiler;

const std::string kConvHeader =
    "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n";

std::string error_of(const std::string& text, TopologyFormat format = TopologyFormat::Auto) {
  try {
    parse_topology(text, "t.csv", format);
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "no error";
}

std::string build_error_of(const std::string& text, const TopologyOptions& opts = {}) {
  const Topology topo = parse_topology(text, "t.csv");
  try {
    build_row_network(topo, 0, opts);
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("topology: the convolution format with trailing commas, spaces, CRLF and a BOM") {
  const std::string text = "\xEF\xBB\xBF" + kConvHeader +
                           "Conv1,  224, 224,    11, 11,    3,      96,     4,\r\n"
                           "\r\n"
                           "Conv2,27,27,5,5,96,256,1,\n"
                           "Conv3,13,13,3,3,256,384,1";  // no trailing comma, no final newline
  const Topology t = parse_topology(text, "t.csv");
  REQUIRE(t.format == TopologyFormat::Conv);
  REQUIRE(t.rows.size() == 3);
  const TopologyRow& r = t.rows[0];
  CHECK(r.line == 2);
  CHECK(r.name == "Conv1");
  CHECK(r.ifmap_h == 224);
  CHECK(r.ifmap_w == 224);
  CHECK(r.filter_h == 11);
  CHECK(r.filter_w == 11);
  CHECK(r.channels == 3);
  CHECK(r.num_filters == 96);
  CHECK(r.stride_h == 4);
  CHECK(r.stride_w == 4);
  CHECK_FALSE(r.gemm);
  CHECK(t.rows[1].line == 4);  // the empty line 3 is skipped
  CHECK(t.rows[2].line == 5);
  CHECK(t.rows[2].num_filters == 384);
  CHECK(t.rows[2].stride_h == 1);
}

TEST_CASE("topology: a ninth column is the stride width") {
  const Topology t = parse_topology(kConvHeader + "L,9,10,3,2,4,5,2,3,\n", "t.csv");
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].stride_h == 2);
  CHECK(t.rows[0].stride_w == 3);
  // ceil((9 - 3 + 2) / 2) = 4 rows, ceil((10 - 2 + 3) / 3) = 4 columns.
  CHECK(scalesim_macs(t.rows[0]) == 4 * 4 * 3 * 2 * 4 * 5);
}

TEST_CASE("topology: the field after the last comma is dropped unless it is a number") {
  // SCALE-Sim's mobilnet_paper.csv: a '#dw' after the last comma, which
  // SCALE-Sim drops; its depthwise layers written as single-channel convolutions.
  const Topology t = parse_topology(kConvHeader + "\nConv2_dw, 112, 112, 3, 3, 1, 1, 1,#dw\n", "p.csv");
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].line == 3);
  CHECK(t.rows[0].channels == 1);
  CHECK(t.rows[0].stride_h == 1);
  CHECK(t.rows[0].stride_w == 1);
  CHECK(scalesim_macs(t.rows[0]) == 110ull * 110 * 9);
  const RowNetwork rn = build_row_network(t, 0, {});
  CHECK_FALSE(rn.depthwise);
  CHECK(rn.note.empty());
  // A number there is a column (a row without the trailing comma).
  CHECK(parse_topology(kConvHeader + "L,9,9,3,3,1,1,2,1", "p.csv").rows.at(0).stride_w == 1);
}

TEST_CASE("topology: GEMM files by their header") {
  for (const std::string header : {"Layer, M, N, K,\n", "Layer,M,N,K,\r\n", "Layer Name, M, N, K\n"}) {
    const Topology t = parse_topology(header + "QKT,1024,1024,64,\r\nTest 1, 128, 64, 256,", "g.csv");
    REQUIRE(t.format == TopologyFormat::Gemm);
    REQUIRE(t.rows.size() == 2);
    CHECK(t.rows[0].gemm);
    CHECK(t.rows[1].name == "Test 1");
    CHECK(t.rows[1].m == 128);
    CHECK(t.rows[1].n == 64);
    CHECK(t.rows[1].k == 256);
    CHECK(scalesim_macs(t.rows[1]) == 128ull * 64 * 256);
  }
  // Forced: a GEMM-looking header read as a convolution file fails on its rows.
  CHECK(error_of("Layer, M, N, K,\n1,2,3,4,\n", TopologyFormat::Conv) ==
        "t.csv:2: error: expected 8 columns (Layer name, IFMAP Height, IFMAP Width, Filter Height, "
        "Filter Width, Channels, Num Filter, Strides) or 9 (with the stride width last), got 4");
  CHECK(parse_topology("anything\nA,1,2,3,\n", "g.csv", TopologyFormat::Gemm).rows.at(0).k == 3);
}

TEST_CASE("topology: SCALE-Sim's ceil rule against a valid convolution") {
  // ceil((H - R + S) / S) and floor((H - R) / S) + 1, by hand.
  CHECK(scalesim_out(224, 11, 4) == 55);  // ceil(217 / 4) = ceil(54.25)
  CHECK(valid_out(224, 11, 4) == 54);
  CHECK(scalesim_out(227, 11, 4) == 55);  // 216 / 4 = 54 exactly
  CHECK(valid_out(227, 11, 4) == 55);
  CHECK(scalesim_out(224, 7, 2) == 110);  // ceil(219 / 2)
  CHECK(valid_out(224, 7, 2) == 109);
  CHECK(scalesim_out(56, 1, 2) == 29);  // ceil(57 / 2)
  CHECK(valid_out(56, 1, 2) == 28);
  CHECK(scalesim_out(13, 3, 1) == 11);
  CHECK(valid_out(13, 3, 1) == 11);
  CHECK(scalesim_out(3, 3, 5) == 1);

  // ResNet-18's Conv1 as SCALE-Sim writes it: padded by one row and column
  // at the bottom and right so the output is SCALE-Sim's 110 x 110:
  // (110 - 1) * 2 + 7 = 225 = 224 + 1.
  const Topology t = parse_topology(kConvHeader + "Conv1,224,224,7,7,3,64,2,\n", "r.csv");
  const RowNetwork rn = build_row_network(t, 0, {});
  CHECK(rn.out_h == 110);
  CHECK(rn.out_w == 110);
  CHECK(rn.pad_bottom == 1);
  CHECK(rn.pad_right == 1);
  CHECK(rn.note == "padded bottom 1 right 1 to SCALE-Sim's 110x110 (valid: 109x109)");
  const std::vector<TensorInfo> infos = infer_network(rn.net);
  CHECK(infos.back().shape == std::vector<std::size_t>{110, 110, 64});
  CHECK(scalesim_macs(t.rows[0]) == 110ull * 110 * 7 * 7 * 3 * 64);

  TopologyOptions valid;
  valid.valid = true;
  const RowNetwork rv = build_row_network(t, 0, valid);
  CHECK(rv.out_h == 109);
  CHECK(rv.pad_bottom == 0);
  CHECK(rv.note == "valid convolution: 109x109, SCALE-Sim's output is 110x110");
  CHECK(infer_network(rv.net).back().shape == std::vector<std::size_t>{109, 109, 64});

  // Only the width differs: padding on the right only.
  const Topology w = parse_topology(kConvHeader + "L,13,14,3,3,2,2,2,\n", "w.csv");
  const RowNetwork rw = build_row_network(w, 0, {});
  CHECK(rw.pad_bottom == 0);  // (13 - 3) / 2 = 5 exactly: 6 rows both ways
  CHECK(rw.pad_right == 1);   // ceil(13 / 2) = 7 columns against 6
  CHECK(infer_network(rw.net).back().shape == std::vector<std::size_t>{6, 7, 2});
}

TEST_CASE("topology: depthwise rows as SCALE-Sim reads them") {
  // 'DP' in the name: SCALE-Sim runs Channels single-channel convolutions;
  // tpu-sim one depthwise convolution (groups = channels).
  const Topology t = parse_topology(kConvHeader +
                                        "conv_DP1,114,114,3,3,32,1,1,\n"  // DP: depthwise
                                        "Conv2,112,112,3,3,32,1,1,\n"     // mobilenet.csv's form
                                        "dp3,16,16,3,3,8,1,1,\n"          // lower case: not DP
                                        "DP4,16,16,3,3,1,4,1,\n",         // one channel: a plain conv
                                    "m.csv");
  CHECK(t.rows[0].dp_name);
  CHECK_FALSE(t.rows[1].dp_name);
  CHECK_FALSE(t.rows[2].dp_name);
  const RowNetwork dp = build_row_network(t, 0, {});
  CHECK(dp.depthwise);
  const Layer& l = dp.net.layers.at(0);
  CHECK(l.groups == 32);
  CHECK(l.weight_shape == std::vector<std::size_t>{3, 3, 1, 32});
  CHECK(infer_network(dp.net).back().shape == std::vector<std::size_t>{112, 112, 32});
  CHECK(dp.note == "depthwise ('DP' in the name; SCALE-Sim runs 32 single-channel layers)");
  // SCALE-Sim's MACs for its 32 single-channel layers: 112 * 112 * 9 each.
  CHECK(scalesim_macs(t.rows[0]) == 32ull * 112 * 112 * 9);

  // Without 'DP': one filter over all channels, as SCALE-Sim computes it (same MACs).
  const RowNetwork one = build_row_network(t, 1, {});
  CHECK_FALSE(one.depthwise);
  CHECK(one.net.layers.at(0).weight_shape == std::vector<std::size_t>{3, 3, 32, 1});
  CHECK(infer_network(one.net).back().shape == std::vector<std::size_t>{110, 110, 1});
  CHECK(one.note == "one filter over all 32 channels, as SCALE-Sim computes it (--single-filter-depthwise: depthwise)");
  TopologyOptions opts;
  opts.single_filter_depthwise = true;
  const RowNetwork as_dw = build_row_network(t, 1, opts);
  CHECK(as_dw.depthwise);
  CHECK(as_dw.net.layers.at(0).groups == 32);
  CHECK(infer_network(as_dw.net).back().shape == std::vector<std::size_t>{110, 110, 32});

  const RowNetwork plain = build_row_network(t, 3, {});
  CHECK_FALSE(plain.depthwise);
  CHECK(plain.net.layers.at(0).weight_shape == std::vector<std::size_t>{3, 3, 1, 4});

  // A channel multiplier has no depthwise form on tpu-sim.
  CHECK(build_error_of(kConvHeader + "DP,8,8,3,3,4,2,1,\n") ==
        "t.csv:2: error: 'DP' is a depthwise row ('DP' in its name) with 2 filters per channel: "
        "tpu-sim's depthwise convolution has one");
}

TEST_CASE("topology: row networks are reproducible, seeded and spread over int8") {
  const Topology t = parse_topology(kConvHeader + "A,12,12,3,3,16,8,1,\nB,12,12,3,3,16,8,1,\n", "s.csv");
  TopologyOptions opts;
  opts.batch = 2;
  const RowNetwork a1 = build_row_network(t, 0, opts), a2 = build_row_network(t, 0, opts);
  CHECK(a1.input.data == a2.input.data);
  CHECK(a1.net.layers[0].weights == a2.net.layers[0].weights);
  CHECK(a1.input.shape == std::vector<std::size_t>{2, 12, 12, 16});
  const RowNetwork b = build_row_network(t, 1, opts);  // same shape, another row
  CHECK(b.input.data != a1.input.data);
  opts.seed = 2;
  CHECK(build_row_network(t, 0, opts).input.data != a1.input.data);

  // The reference output: no bias, input zero point 0, the output scale
  // mapping the accumulators' spread into int8: few values saturate.
  const Tensor y = reference_network(a1.net, a1.input);
  REQUIRE(y.data.size() == 2u * 10 * 10 * 8);
  std::size_t saturated = 0;
  double sum2 = 0;
  for (std::int32_t v : y.data) {
    saturated += v == 127 || v == -128;
    sum2 += static_cast<double>(v) * v;
  }
  CHECK(saturated < y.data.size() / 50);
  CHECK(std::sqrt(sum2 / static_cast<double>(y.data.size())) > 15.0);
}

TEST_CASE("topology: GEMM rows are dense layers of M samples") {
  const Topology t = parse_topology("Layer,M,N,K,\nfc,5,7,11,\n", "g.csv");
  const RowNetwork rn = build_row_network(t, 0, {});
  CHECK(rn.batch == 5);
  CHECK(rn.net.layers.at(0).kind == LayerKind::Dense);
  CHECK(rn.net.layers.at(0).weight_shape == std::vector<std::size_t>{11, 7});
  CHECK(rn.input.shape == std::vector<std::size_t>{5, 11});
  CHECK(reference_network(rn.net, rn.input).shape == std::vector<std::size_t>{5, 7});
}

TEST_CASE("topology: bands of a convolution stack up to the whole layer") {
  // 3x3 stride 2 with SCALE-Sim's padding (ceil((15 - 3 + 2) / 2) = 7 rows,
  // one padded row at the bottom): bands of 3, 3 and 1 output rows.
  const Topology t = parse_topology(kConvHeader + "DP,14,9,3,3,5,1,2,\n", "b.csv");
  TopologyOptions opts;
  opts.batch = 2;
  const RowNetwork rn = build_row_network(t, 0, opts);
  REQUIRE(rn.out_h == 7);
  REQUIRE(rn.pad_bottom == 1);
  const std::vector<RowNetwork> bands = split_into_bands(rn, 3);
  REQUIRE(bands.size() == 3);
  CHECK(bands[0].net.input_shape == std::vector<std::size_t>{7, 9, 5});  // rows 0..6
  CHECK(bands[1].net.input_shape == std::vector<std::size_t>{7, 9, 5});  // rows 6..12
  CHECK(bands[2].net.input_shape == std::vector<std::size_t>{2, 9, 5});  // rows 12..13 and padding
  CHECK(bands[2].net.layers[0].pad_bottom == 1);
  const Tensor whole = reference_network(rn.net, rn.input);
  std::vector<std::int32_t> stacked(whole.data.size());
  const std::size_t per_row = whole.shape[2] * whole.shape[3], per_sample = 7 * per_row;
  std::size_t row0 = 0;
  for (const RowNetwork& band : bands) {
    const Tensor y = reference_network(band.net, band.input);
    for (std::size_t n = 0; n < 2; ++n)
      std::copy(y.data.begin() + static_cast<std::ptrdiff_t>(n * band.out_h * per_row),
                y.data.begin() + static_cast<std::ptrdiff_t>((n + 1) * band.out_h * per_row),
                stacked.begin() + static_cast<std::ptrdiff_t>(n * per_sample + row0 * per_row));
    row0 += band.out_h;
  }
  CHECK(row0 == 7);
  CHECK(stacked == whole.data);
}

TEST_CASE("topology: errors name the file and line") {
  CHECK(error_of("") == "t.csv: error: the file is empty (no header line)");
  CHECK(error_of(kConvHeader + "\n\n") ==
        "t.csv: error: no layers: the file has a header line and no rows after it");
  CHECK(error_of(kConvHeader + "Conv1,224,224,11,11,3,96,\n") ==
        "t.csv:2: error: expected 8 columns (Layer name, IFMAP Height, IFMAP Width, Filter Height, "
        "Filter Width, Channels, Num Filter, Strides) or 9 (with the stride width last), got 7");
  CHECK(error_of(kConvHeader + "ok,8,8,3,3,1,1,1,\nbad,8,8,x3,3,1,1,1,\n") ==
        "t.csv:3: error: column 4 (Filter Height) is 'x3', not a positive integer");
  CHECK(error_of(kConvHeader + "bad,8,8,3,3,1,1,-1,\n") ==
        "t.csv:2: error: column 8 (Strides) is '-1', not a positive integer");
  CHECK(error_of(kConvHeader + "bad,8,8,3,3,1,1,0,\n") == "t.csv:2: error: column 8 (Strides) is 0");
  CHECK(error_of(kConvHeader + "bad,8,8,3,3,,1,1,\n") == "t.csv:2: error: column 6 (Channels) is empty");
  CHECK(error_of(kConvHeader + "bad,3,8,5,3,1,1,1,\n") ==
        "t.csv:2: error: the filter height 5 is larger than the IFMAP height 3");
  CHECK(error_of(kConvHeader + "bad,8,2,3,3,1,1,1,\n") ==
        "t.csv:2: error: the filter width 3 is larger than the IFMAP width 2");
  CHECK(error_of(kConvHeader + ",8,8,3,3,1,1,1,\n") == "t.csv:2: error: the layer name (column 1) is empty");
  CHECK(error_of(kConvHeader + "big,99999999,8,3,3,1,1,1,\n") ==
        "t.csv:2: error: column 2 (IFMAP Height) is 99999999, more than 16777216");
  CHECK(error_of("Layer,M,N,K,\nfc,1,2,\n") == "t.csv:2: error: expected 4 columns (Layer, M, N, K), got 3");
  CHECK(error_of(kConvHeader + std::string("a,1,1,1,1,1,1,1,\0\n", 19)) ==
        "t.csv:2: error: a NUL byte: this is not a text file");
  // Too large to allocate: an error, not an allocation.
  CHECK(build_error_of(kConvHeader + "huge,16777216,16777216,1,1,16,1,1,\n") ==
        "t.csv:2: error: the row's input has more than 2^31 elements");
}
