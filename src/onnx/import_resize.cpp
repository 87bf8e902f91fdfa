// Resize and Upsample (import_resize.h, importer.h): nearest upsampling by
// integer factors along H and W -> upsample, with the check that the node's
// coordinate transformation reads input floor(o / s) for every output o, as
// tpu-sim's upsample does.
#include "onnx/importer.h"

#include "onnx/import_resize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tpu::onnximport {

std::string resize_nearest_mismatch(const std::string& ctm, const std::string& nearest_mode, std::size_t in,
                                    unsigned s) {
  static const char* const kModes[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                       "tf_half_pixel_for_nearest"};
  if (std::find(std::begin(kModes), std::end(kModes), ctm) == std::end(kModes))
    return fmt::format("coordinate_transformation_mode '{}' is not supported", ctm);
  if (nearest_mode != "round_prefer_floor" && nearest_mode != "round_prefer_ceil" && nearest_mode != "floor" &&
      nearest_mode != "ceil")
    return fmt::format("nearest_mode '{}' is not supported", nearest_mode);
  const std::size_t out = in * s;
  const double scale = s;
  for (std::size_t o = 0; o < out; ++o) {
    // The source coordinate (ONNX's Resize, opset 11 on), in double.
    const double x = static_cast<double>(o);
    double src = 0.0;
    if (ctm == "half_pixel") src = (x + 0.5) / scale - 0.5;
    else if (ctm == "pytorch_half_pixel") src = out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    else if (ctm == "align_corners") src = out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
    else if (ctm == "asymmetric") src = x / scale;
    else src = (x + 0.5) / scale;  // tf_half_pixel_for_nearest
    double r = 0.0;
    if (nearest_mode == "floor") r = std::floor(src);
    else if (nearest_mode == "ceil") r = std::ceil(src);
    else if (nearest_mode == "round_prefer_ceil") r = std::floor(src + 0.5);
    else r = src == std::floor(src) + 0.5 ? std::floor(src) : std::round(src);  // round_prefer_floor
    const double clamped = std::clamp(r, 0.0, static_cast<double>(in - 1));
    if (clamped != static_cast<double>(o / s))
      return fmt::format("coordinate_transformation_mode '{}' with nearest_mode '{}' reads input {} for output {} "
                         "of a factor {}; only floor(output / factor) is supported (PyTorch's asymmetric, floor)",
                         ctm, nearest_mode, clamped, o, s);
  }
  return "";
}

}  // namespace tpu::onnximport

namespace tpu::onnximport::detail {

// The factors per model axis (N, C, then H and W or L) from the node's
// scales attribute (Upsample-7), its scales input, or its sizes input.
std::vector<double> Importer::resize_factors(const onnx::NodeProto& n, const std::vector<double>& model_in) {
  const bool upsample = n.op_type() == "Upsample";
  std::vector<double> factors;
  if (upsample && attr(n, "scales")) {
    for (float f : attr(n, "scales")->floats()) factors.push_back(f);
  } else {
    // Resize-10 and Upsample-9: (X, scales); Resize-11 on: (X, roi, scales, sizes).
    const int si = n.input_size() == 2 ? 1 : 2;
    const bool has_scales = n.input_size() > si && !n.input(si).empty() && !need_const(n, si, "the scales").values.empty();
    const bool has_sizes = !has_scales && n.input_size() > 3 && !n.input(3).empty();
    if (has_scales) {
      factors = need_const(n, si, "the scales").values;
    } else if (has_sizes) {
      const Const& sizes = need_const(n, 3, "the sizes");
      if (sizes.values.size() != model_in.size())
        fail(n, fmt::format("{} sizes for a {}-D input", sizes.values.size(), model_in.size()));
      for (std::size_t a = 0; a < model_in.size(); ++a) {
        if (!(sizes.values[a] >= 1) || sizes.values[a] != std::floor(sizes.values[a] / model_in[a]) * model_in[a])
          fail(n, fmt::format("sizes [{}] are not whole multiples of the input's [{}]: only integer factors are "
                              "supported", fmt::join(sizes.values, ", "), fmt::join(model_in, ", ")));
        factors.push_back(sizes.values[a] / model_in[a]);
      }
    } else {
      fail(n, "needs constant scales or sizes");
    }
  }
  return factors;
}

// Resize (opset 10 on) and Upsample (before): nearest upsampling by integer
// factors along H and W (L of a 1-D map), docs/onnx.md.
void Importer::resize(const onnx::NodeProto& n) {
  const bool upsample = n.op_type() == "Upsample";
  if (upsample) only_attrs(n, {"mode", "scales"});
  else only_attrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                      "extrapolation_value"});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const Value x = need_input(n, 0);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 3) fail(n, "needs a 4-D (N, C, H, W) or 3-D (N, C, L) input");
  const std::string mode = attr_string(n, "mode", "nearest");
  if (mode != "nearest") fail(n, fmt::format("mode '{}' is not supported (only nearest)", mode));
  const std::string ctm = upsample ? "asymmetric" : attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const std::string nearest = upsample ? "floor" : attr_string(n, "nearest_mode", "round_prefer_floor");
  if (ctm == "tf_crop_and_resize") fail(n, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  // The model's axes: (N, C, H, W), or (N, C, L) for a 1-D model.
  const std::vector<double> model_in = one_d_ ? std::vector<double>{1, double(in[2]), double(in[1])}
                                              : std::vector<double>{1, double(in[2]), double(in[0]), double(in[1])};
  const std::vector<double> factors = resize_factors(n, model_in);
  if (factors.size() != model_in.size())
    fail(n, fmt::format("{} scales for a {}-D input", factors.size(), model_in.size()));
  const std::size_t sp = 2;  // the first spatial axis
  bool ok = factors[0] == 1 && factors[1] == 1;
  for (std::size_t a = sp; a < factors.size(); ++a)
    ok = ok && factors[a] >= 1 && factors[a] <= 255 && factors[a] == std::floor(factors[a]);
  if (!ok)
    fail(n, fmt::format("scales [{}] are not supported (only integer factors 1 to 255 along {}, and 1 for N and C)",
                        fmt::join(factors, ", "), one_d_ ? "L" : "H and W"));
  FloatLayer l;
  l.kind = LayerKind::Upsample;
  l.inputs = {x.tensor};
  l.stride_h = one_d_ ? 1 : static_cast<unsigned>(factors[2]);
  l.stride_w = static_cast<unsigned>(factors.back());
  Value out;
  out.tensor = add_layer(n, std::move(l));  // first: it bounds the output's size
  for (std::size_t a = sp; a < factors.size(); ++a) {
    const std::string why = resize_nearest_mismatch(ctm, nearest, static_cast<std::size_t>(model_in[a]),
                                                    static_cast<unsigned>(factors[a]));
    if (!why.empty()) fail(n, why);
  }
  set_output(n, out);
}

}  // namespace tpu::onnximport::detail
