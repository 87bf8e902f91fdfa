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
