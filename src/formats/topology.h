// SCALE-Sim topology files (docs/topologies.md): the convolution topology
// CSV (Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width,
// Channels, Num Filter, Strides) and the GEMM topology CSV (Layer, M, N, K),
// read as SCALE-Sim v2 reads them, and each row turned into a one-layer
// network with random int8 data that tpu-sim can compile and run.
//
// Every row of a SCALE-Sim file is an independent layer with its own IFMAP:
// the rows do not form a graph (pooling layers and shortcuts are missing or
// out of order), so each row becomes its own network.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_io.h"
#include "compiler/network.h"

namespace tpu::compiler {

enum class TopologyFormat { Auto, Conv, Gemm };

// A problem in a topology file, at a line (1-based; 0 for the file as a whole).
// what() is "FILE:LINE: error: MESSAGE" (or "FILE: error: MESSAGE").
class TopologyError : public FileError {
 public:
  TopologyError(const std::string& path, std::size_t line, const std::string& message);
  std::size_t line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::size_t line_;
  std::string message_;
};

struct TopologyRow {
  std::size_t line = 0;  // its line in the file, 1-based
  std::string name;
  bool gemm = false;
  // A convolution row: IFMAP H x W x Channels, Num Filter filters of
  // Filter H x W, strides (one Strides column sets both).
  std::uint64_t ifmap_h = 0, ifmap_w = 0, filter_h = 0, filter_w = 0, channels = 0, num_filters = 0;
  std::uint64_t stride_h = 1, stride_w = 1;
  // SCALE-Sim's depthwise rows: 'DP' in the layer name. SCALE-Sim runs such a
  // row as `channels` single-channel convolutions of `num_filters` filters each.
  bool dp_name = false;
  // A GEMM row: C (M x N) = A (M x K) . B (K x N).
  std::uint64_t m = 0, n = 0, k = 0;
};

struct Topology {
  std::string path;
  TopologyFormat format = TopologyFormat::Conv;  // Conv or Gemm
  std::vector<TopologyRow> rows;
};

// Parses the text of a topology file. The first non-empty line is the
// header; with TopologyFormat::Auto a header whose columns after the first
// are M, N, K makes it a GEMM file, anything else a convolution file. Throws
// TopologyError naming `path` and the line.
Topology parse_topology(std::string_view text, const std::string& path,
                        TopologyFormat format = TopologyFormat::Auto);
Topology load_topology(const std::string& path, TopologyFormat format = TopologyFormat::Auto);

// SCALE-Sim's output size along one axis: ceil((in - k + s) / s).
std::uint64_t scalesim_out(std::uint64_t in, std::uint64_t k, std::uint64_t s);
// A valid (unpadded) convolution's output size: floor((in - k) / s) + 1.
std::uint64_t valid_out(std::uint64_t in, std::uint64_t k, std::uint64_t s);
// SCALE-Sim's MACs for the row, one sample: OFMAP H x W x Filter H x W x
// Channels x Num Filter (GEMM: M x N x K); a DP row's single-channel layers together.
std::uint64_t scalesim_macs(const TopologyRow& row);

struct TopologyOptions {
  std::uint64_t seed = 1;
  std::uint64_t batch = 1;  // samples per convolution row (a GEMM row has M)
  // Unpadded convolutions instead of padding to SCALE-Sim's output size.
  bool valid = false;
  // Rows of one filter over several channels (SCALE-Sim's mobilenet.csv
  // writes MobileNet's depthwise layers so) run as depthwise convolutions.
  bool single_filter_depthwise = false;
};

// One row as a network: one conv2d (or depthwise conv2d, or dense for a
// GEMM row) with random int8 weights and a random int8 input batch, input
// zero point 0 and no bias (no bias pass), no activation, the output scale
// chosen so that the outputs spread over int8.
struct RowNetwork {
  Network net;
  Tensor input;
  std::uint64_t batch = 0;
  bool depthwise = false;
  std::uint64_t out_h = 0, out_w = 0;            // tpu-sim's output (GEMM: M x 1)
  std::uint64_t scalesim_h = 0, scalesim_w = 0;  // SCALE-Sim's OFMAP (GEMM: M x 1)
  unsigned pad_bottom = 0, pad_right = 0;        // added to reach SCALE-Sim's size
  std::string note;  // how the row was read, when it is not a plain convolution or GEMM
};

// A convolution row's network cut into horizontal bands of at most
// `band_rows` output rows, each a network of its own reading the input rows
// its band needs (for a layer whose maps do not fit the unified buffer:
// the on-chip compiler keeps a sample's whole input and output maps there).
// The bands' outputs, stacked, are the row's output.
std::vector<RowNetwork> split_into_bands(const RowNetwork& row, std::uint64_t band_rows);

// Throws TopologyError (at the row's line) for rows tpu-sim cannot represent.
// `index` (the row's position among the file's rows) and the seed choose the
// random data, so a row's data does not depend on which other rows run.
RowNetwork build_row_network(const Topology& topo, std::size_t index, const TopologyOptions& opts);
// The same checks without making the data (to find every bad row before running any).
void check_row(const Topology& topo, std::size_t index, const TopologyOptions& opts);

}  // namespace tpu::compiler
