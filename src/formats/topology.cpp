#include "formats/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "common/plural.h"

namespace tpu::compiler {
namespace {

std::string format_error(const std::string& path, std::size_t line, const std::string& message) {
  return line ? fmt::format("{}:{}: error: {}", path, line, message)
              : fmt::format("{}: error: {}", path, message);
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// The fields of a line, trimmed. SCALE-Sim drops the field after a row's
// last comma (its rows end with a comma); so does this, unless that field is
// a number (a row written without the trailing comma).
std::vector<std::string> split_fields(std::string_view line, bool header = false) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    fields.emplace_back(trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  const std::string& last = fields.back();
  if (fields.size() > 1 &&
      (last.empty() || (!header && last.find_first_not_of("0123456789") != std::string::npos)))
    fields.pop_back();
  return fields;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Dimensions up to 2^24: products of a few of them stay far below 2^64.
constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 24;

class RowReader {
 public:
  RowReader(const std::string& path, std::size_t line, const std::vector<std::string>& fields)
      : path_(path), line_(line), fields_(fields) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw TopologyError(path_, line_, message);
  }

  std::uint64_t number(std::size_t i, const char* column) const {
    const std::string& f = fields_[i];
    if (f.empty()) fail(fmt::format("column {} ({}) is empty", i + 1, column));
    std::uint64_t v = 0;
    for (char c : f) {
      if (c < '0' || c > '9')
        fail(fmt::format("column {} ({}) is '{}', not a positive integer", i + 1, column, f));
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
      if (v > kMaxDim) fail(fmt::format("column {} ({}) is {}, more than {}", i + 1, column, f, kMaxDim));
    }
    if (v == 0) fail(fmt::format("column {} ({}) is 0", i + 1, column));
    return v;
  }

 private:
  const std::string& path_;
  std::size_t line_;
  const std::vector<std::string>& fields_;
};

constexpr const char* kConvColumns[] = {"Layer name",   "IFMAP Height", "IFMAP Width", "Filter Height",
                                        "Filter Width", "Channels",     "Num Filter",  "Strides",
                                        "Stride Width"};
constexpr const char* kGemmColumns[] = {"Layer", "M", "N", "K"};

// A row of either kind: its line and its layer name (column 1).
TopologyRow named_row(const RowReader& r, std::size_t line, const std::vector<std::string>& f) {
  TopologyRow row;
  row.line = line;
  row.name = f[0];
  if (row.name.empty()) r.fail("the layer name (column 1) is empty");
  return row;
}

TopologyRow parse_conv_row(const std::string& path, std::size_t line, const std::vector<std::string>& f) {
  const RowReader r(path, line, f);
  if (f.size() != 8 && f.size() != 9)
    r.fail(fmt::format("expected 8 columns (Layer name, IFMAP Height, IFMAP Width, Filter Height, "
                       "Filter Width, Channels, Num Filter, Strides) or 9 (with the stride width "
                       "last), got {}",
                       f.size()));
  TopologyRow row = named_row(r, line, f);
  row.ifmap_h = r.number(1, kConvColumns[1]);
  row.ifmap_w = r.number(2, kConvColumns[2]);
  row.filter_h = r.number(3, kConvColumns[3]);
  row.filter_w = r.number(4, kConvColumns[4]);
  row.channels = r.number(5, kConvColumns[5]);
  row.num_filters = r.number(6, kConvColumns[6]);
  row.stride_h = r.number(7, kConvColumns[7]);
  row.stride_w = f.size() == 9 ? r.number(8, kConvColumns[8]) : row.stride_h;
  if (row.filter_h > row.ifmap_h)
    r.fail(fmt::format("the filter height {} is larger than the IFMAP height {}", row.filter_h, row.ifmap_h));
  if (row.filter_w > row.ifmap_w)
    r.fail(fmt::format("the filter width {} is larger than the IFMAP width {}", row.filter_w, row.ifmap_w));
  row.dp_name = row.name.find("DP") != std::string::npos;
  return row;
}

TopologyRow parse_gemm_row(const std::string& path, std::size_t line, const std::vector<std::string>& f) {
  const RowReader r(path, line, f);
  if (f.size() != 4) r.fail(fmt::format("expected 4 columns (Layer, M, N, K), got {}", f.size()));
  TopologyRow row = named_row(r, line, f);
  row.gemm = true;
  row.m = r.number(1, kGemmColumns[1]);
  row.n = r.number(2, kGemmColumns[2]);
  row.k = r.number(3, kGemmColumns[3]);
  return row;
}

// Elements of a tensor, at most 2^31 (larger rows are errors, not allocations).
std::uint64_t checked_count(const std::string& path, std::size_t line,
                            std::initializer_list<std::uint64_t> dims, const char* what) {
  std::uint64_t n = 1;
  for (std::uint64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n) || n > (std::uint64_t{1} << 31))
      throw TopologyError(path, line, fmt::format("the row's {} has more than 2^31 elements", what));
  return n;
}

// Uniform int8 in lo..127 from a 64-bit draw (the generator is specified
// by the standard, so the data is the same on every platform).
std::int32_t draw(std::mt19937_64& rng, int lo) {
  const std::uint64_t span = static_cast<std::uint64_t>(128 - lo);
  return static_cast<std::int32_t>(rng() % span) + lo;
}

}  // namespace

TopologyError::TopologyError(const std::string& path, std::size_t line, const std::string& message)
    : FileError(format_error(path, line, message)), line_(line), message_(message) {}

Topology parse_topology(std::string_view text, const std::string& path, TopologyFormat format) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  Topology topo;
  topo.path = path;
  std::size_t line_no = 0;
  bool header = true;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (raw.find('\0') != std::string_view::npos)
      throw TopologyError(path, line_no, "a NUL byte: this is not a text file");
    const std::string_view line = trim(raw);
    if (header) {
      // The first line is the header, as in SCALE-Sim (which skips it unread).
      header = false;
      if (format == TopologyFormat::Auto) {
        const std::vector<std::string> f = split_fields(line, true);
        const bool mnk = f.size() == 4 && lower(f[1]) == "m" && lower(f[2]) == "n" && lower(f[3]) == "k";
        format = mnk ? TopologyFormat::Gemm : TopologyFormat::Conv;
      }
      topo.format = format;
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> fields = split_fields(line);
    topo.rows.push_back(format == TopologyFormat::Gemm ? parse_gemm_row(path, line_no, fields)
                                                       : parse_conv_row(path, line_no, fields));
  }
  if (line_no == 0) throw TopologyError(path, 0, "the file is empty (no header line)");
  if (topo.rows.empty())
    throw TopologyError(path, 0, "no layers: the file has a header line and no rows after it");
  return topo;
}

Topology load_topology(const std::string& path, TopologyFormat format) {
  return parse_topology(read_file_text(path), path, format);
}

std::uint64_t scalesim_out(std::uint64_t in, std::uint64_t k, std::uint64_t s) {
  return (in - k + s + s - 1) / s;  // ceil((in - k + s) / s), in >= k
}

std::uint64_t valid_out(std::uint64_t in, std::uint64_t k, std::uint64_t s) { return (in - k) / s + 1; }

std::uint64_t scalesim_macs(const TopologyRow& row) {
  if (row.gemm) return row.m * row.n * row.k;
  return scalesim_out(row.ifmap_h, row.filter_h, row.stride_h) *
         scalesim_out(row.ifmap_w, row.filter_w, row.stride_w) * row.filter_h * row.filter_w *
         row.channels * row.num_filters;
}

namespace {

// The row's network; with `data`, its random weights and input too.
RowNetwork row_network(const Topology& topo, std::size_t index, const TopologyOptions& opts, bool data) {
  const TopologyRow& row = topo.rows.at(index);
  const auto count = [&](std::initializer_list<std::uint64_t> dims, const char* what) {
    return checked_count(topo.path, row.line, dims, what);
  };
  RowNetwork out;
  Layer layer;
  layer.name = row.name;
  std::uint64_t window = 0;  // MACs per output element
  std::uint64_t in_count = 0, w_count = 0;
  std::vector<std::size_t> in_shape;
  if (row.gemm) {
    out.batch = row.m;
    layer.kind = LayerKind::Dense;
    layer.weight_shape = {row.k, row.n};
    in_shape = {row.k};
    in_count = count({row.m, row.k}, "input (M x K)");
    w_count = count({row.k, row.n}, "weights (K x N)");
    count({row.m, row.n}, "output (M x N)");
    window = row.k;
    out.out_h = out.scalesim_h = row.m;
    out.out_w = out.scalesim_w = 1;
  } else {
    out.batch = opts.batch;
    const bool dp = row.dp_name && row.channels > 1;
    const bool single_filter = !row.dp_name && opts.single_filter_depthwise && row.num_filters == 1 && row.channels > 1;
    if (dp && row.num_filters > 1)
      throw TopologyError(topo.path, row.line, fmt::format("'{}' is a depthwise row ('DP' in its name) with {} per channel: tpu-sim's "
                         "depthwise convolution has one",
                         row.name, plural(row.num_filters, "filter")));
    out.depthwise = dp || single_filter;
    layer.kind = LayerKind::Conv2d;
    layer.kernel_h = static_cast<unsigned>(row.filter_h);
    layer.kernel_w = static_cast<unsigned>(row.filter_w);
    layer.stride_h = static_cast<unsigned>(row.stride_h);
    layer.stride_w = static_cast<unsigned>(row.stride_w);
    const std::uint64_t cout = out.depthwise ? row.channels : row.num_filters;
    layer.weight_shape = {row.filter_h, row.filter_w, out.depthwise ? 1 : row.channels, cout};
    if (out.depthwise) layer.groups = static_cast<unsigned>(row.channels);
    in_shape = {row.ifmap_h, row.ifmap_w, row.channels};
    in_count = count({opts.batch, row.ifmap_h, row.ifmap_w, row.channels}, "input");
    w_count = count({row.filter_h, row.filter_w, out.depthwise ? 1 : row.channels, cout}, "weights");
    window = row.filter_h * row.filter_w * (out.depthwise ? 1 : row.channels);
    out.scalesim_h = scalesim_out(row.ifmap_h, row.filter_h, row.stride_h);
    out.scalesim_w = scalesim_out(row.ifmap_w, row.filter_w, row.stride_w);
    const std::uint64_t vh = valid_out(row.ifmap_h, row.filter_h, row.stride_h);
    const std::uint64_t vw = valid_out(row.ifmap_w, row.filter_w, row.stride_w);
    count({opts.batch, out.scalesim_h, out.scalesim_w, cout}, "output");
    std::vector<std::string> notes;
    if (row.dp_name && row.channels > 1)
      notes.push_back(fmt::format("depthwise ('DP' in the name; SCALE-Sim runs {} single-channel layers)",
                                  row.channels));
    else if (single_filter)
      notes.push_back(fmt::format("depthwise (--single-filter-depthwise; SCALE-Sim computes one filter "
                                  "over all {} channels, the same MACs)",
                                  row.channels));
    else if (row.num_filters == 1 && row.channels > 1)
      notes.push_back(fmt::format("one filter over all {} channels, as SCALE-Sim computes it "
                                  "(--single-filter-depthwise: depthwise)",
                                  row.channels));
    if (vh != out.scalesim_h || vw != out.scalesim_w) {
      if (opts.valid) {
        notes.push_back(fmt::format("valid convolution: {}x{}, SCALE-Sim's output is {}x{}", vh, vw,
                                    out.scalesim_h, out.scalesim_w));
      } else {
        // The extra rows and columns of SCALE-Sim's rule: padding at the
        // bottom and right (the input's zero point), fewer than the stride.
        out.pad_bottom = static_cast<unsigned>((out.scalesim_h - 1) * row.stride_h + row.filter_h - row.ifmap_h);
        out.pad_right = static_cast<unsigned>((out.scalesim_w - 1) * row.stride_w + row.filter_w - row.ifmap_w);
        notes.push_back(fmt::format("padded bottom {} right {} to SCALE-Sim's {}x{} (valid: {}x{})",
                                    out.pad_bottom, out.pad_right, out.scalesim_h, out.scalesim_w, vh, vw));
      }
    }
    layer.pad_bottom = out.pad_bottom;
    layer.pad_right = out.pad_right;
    out.out_h = opts.valid ? vh : out.scalesim_h;
    out.out_w = opts.valid ? vw : out.scalesim_w;
    for (const std::string& n : notes) out.note += (out.note.empty() ? "" : "; ") + n;
  }

  // Random data: the seed, the row's position and nothing else.
  if (!data) w_count = in_count = 0;
  std::seed_seq seq{static_cast<std::uint32_t>(opts.seed), static_cast<std::uint32_t>(opts.seed >> 32),
                    static_cast<std::uint32_t>(index)};
  std::mt19937_64 rng(seq);
  layer.weights.resize(w_count);
  for (std::int8_t& w : layer.weights) w = static_cast<std::int8_t>(draw(rng, -127));
  out.input.shape = {static_cast<std::size_t>(out.batch)};
  out.input.shape.insert(out.input.shape.end(), in_shape.begin(), in_shape.end());
  out.input.data.resize(in_count);
  for (std::int32_t& x : out.input.data) x = draw(rng, -128);

  // Scales: input and weights 1, so an accumulator is the sum of `window`
  // products of standard deviation about 74 * 74; the output scale maps
  // its standard deviation to 40 (int8 outputs spread, few saturate).
  layer.weight_scale = 1.0;
  layer.output.scale = std::sqrt(static_cast<double>(window)) * 74.0 * 74.0 / 40.0;
  layer.output.zero_point = 0;
  out.net.name = fmt::format("{}:{}", std::filesystem::path(topo.path).filename().string(), row.name);
  out.net.input_shape = in_shape;
  out.net.input.scale = 1.0;
  out.net.input.zero_point = 0;
  out.net.layers.push_back(std::move(layer));
  return out;
}

}  // namespace

void check_row(const Topology& topo, std::size_t index, const TopologyOptions& opts) {
  row_network(topo, index, opts, false);
}

RowNetwork build_row_network(const Topology& topo, std::size_t index, const TopologyOptions& opts) {
  return row_network(topo, index, opts, true);
}

std::vector<RowNetwork> split_into_bands(const RowNetwork& row, std::uint64_t band_rows) {
  const Layer& layer = row.net.layers.at(0);
  if (layer.kind != LayerKind::Conv2d || band_rows == 0)
    throw std::invalid_argument("split_into_bands: a convolution row and a band height > 0");
  const std::uint64_t in_h = row.net.input_shape[0], w = row.net.input_shape[1], c = row.net.input_shape[2];
  const std::uint64_t s = layer.stride_h, k = layer.kernel_h;
  std::vector<RowNetwork> bands;
  for (std::uint64_t o0 = 0; o0 < row.out_h; o0 += band_rows) {
    const std::uint64_t o1 = std::min(row.out_h, o0 + band_rows);
    const std::uint64_t first = o0 * s, end = (o1 - 1) * s + k;  // input rows read, padding included
    const std::uint64_t last = std::min(end, in_h);
    RowNetwork band;
    band.net = row.net;
    band.net.name += fmt::format("[rows {}..{}]", o0, o1 - 1);
    band.net.input_shape[0] = last - first;
    band.net.layers[0].pad_bottom = static_cast<unsigned>(end - last);
    band.batch = row.batch;
    band.depthwise = row.depthwise;
    band.out_h = o1 - o0;
    band.out_w = row.out_w;
    band.input.shape = {row.batch, last - first, w, c};
    const std::size_t plane = w * c;
    for (std::uint64_t n = 0; n < row.batch; ++n) {
      const auto from = row.input.data.begin() + static_cast<std::ptrdiff_t>((n * in_h + first) * plane);
      band.input.data.insert(band.input.data.end(), from, from + static_cast<std::ptrdiff_t>((last - first) * plane));
    }
    bands.push_back(std::move(band));
  }
  return bands;
}

}  // namespace tpu::compiler
