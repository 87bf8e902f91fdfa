// Windows (importer.h): the kernel, strides and pads of a Conv or pool from
// its attributes (a 1-D model's as 2-D), ceil_mode's extra cells, and a
// constant Pad node, which binds its input with the padding pending
// (Value::padded) until the Conv or pool that reads it takes it over.
#include "onnx/importer.h"

namespace tpu::onnximport::detail {

void take_pad(const Value& x, FloatLayer& l) {
  if (!x.padded) return;
  l.pad_top = x.pad[0];
  l.pad_bottom = x.pad[1];
  l.pad_left = x.pad[2];
  l.pad_right = x.pad[3];
}

// Kernel, strides and pads of a Conv or pool, with a pending Pad folded in.
void Importer::window(const onnx::NodeProto& n, FloatLayer& l, const Shape& in, bool is_pool) const {
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    fail(n, fmt::format("auto_pad '{}' is not supported (NOTSET with explicit pads, or VALID)", auto_pad));
  const auto strides = window_ints(n, "strides", {1, 1});
  const auto pads = window_ints(n, "pads", {0, 0, 0, 0});
  const auto dil = window_ints(n, "dilations", {1, 1});
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2)
    fail(n, "only 2-D windows are supported (strides, pads and dilations of a 2-D map)");
  if (dil[0] != 1 || dil[1] != 1)
    fail(n, fmt::format("dilations [{}, {}] are not supported (tpu-sim's convolutions and pools are not dilated)",
                        dil[0], dil[1]));
  // validate_model has bounded strides (1 up) and pads (0 up) by kWindowLimit.
  l.stride_h = static_cast<unsigned>(strides[0]);
  l.stride_w = static_cast<unsigned>(strides[1]);
  // ONNX pads: [top, left, bottom, right].
  l.pad_top += static_cast<unsigned>(pads[0]);
  l.pad_left += static_cast<unsigned>(pads[1]);
  l.pad_bottom += static_cast<unsigned>(pads[2]);
  l.pad_right += static_cast<unsigned>(pads[3]);
  if (is_pool && attr_int(n, "ceil_mode", 0) != 0 && in.size() == 3) {
    // ceil_mode 1: the output size rounds (size + pads - k) / s up. A max-pool
    // gets the extra cells of its last window as padding at the bottom and
    // right, which never wins (docs/quantization.md, "Max-pool with
    // ceil_mode"); an average pool would have to leave them out of its
    // count, which the TPU's average (a fixed window) does not.
    const auto extra = [](std::size_t size, unsigned k, unsigned s, unsigned a, unsigned b) -> unsigned {
      const std::size_t padded = size + a + b;
      if (padded < k) return 0;  // float_layer_shape reports the window larger than the input
      const std::size_t out = (padded - k + s - 1) / s + 1;
      return static_cast<unsigned>((out - 1) * s + k - padded);
    };
    const unsigned eh = extra(in[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom);
    const unsigned ew = extra(in[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right);
    if ((eh != 0 || ew != 0) && n.op_type() != "MaxPool")
      fail(n, "ceil_mode 1 is not supported where it changes the output size (ONNX leaves the extra cells of the last "
              "window out of the average's count; tpu-sim's average divides by the whole window)");
    if ((eh != 0 && l.pad_bottom + eh >= l.kernel_h) || (ew != 0 && l.pad_right + ew >= l.kernel_w))
      fail(n, "ceil_mode 1 with this padding gives a last window entirely in the padding, which is not supported");
    l.pad_bottom += eh;
    l.pad_right += ew;
  }
  if (is_pool) {
    if (l.pad_top >= l.kernel_h || l.pad_bottom >= l.kernel_h || l.pad_left >= l.kernel_w ||
        l.pad_right >= l.kernel_w)
      fail(n, fmt::format("padding [{}, {}, {}, {}] (top, bottom, left, right) must be smaller than the {}x{} window",
                          l.pad_top, l.pad_bottom, l.pad_left, l.pad_right, l.kernel_h, l.kernel_w));
  }
}

void Importer::pad(const onnx::NodeProto& n) {
  only_attrs(n, {"mode", "pads", "value"});
  const std::string mode = attr_string(n, "mode", "constant");
  if (mode != "constant") fail(n, fmt::format("mode '{}' is not supported (only constant zero padding)", mode));
  Value x = need_value(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  std::vector<double> pads;
  if (n.input_size() > 1 && !n.input(1).empty()) pads = need_const(n, 1, "the pads").values;
  else for (std::int64_t p : attr_ints(n, "pads", {})) pads.push_back(static_cast<double>(p));
  double value = attr_float(n, "value", 0.0f);
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Const& v = need_const(n, 2, "the constant value");
    value = v.values.empty() ? 0.0 : v.values[0];
  }
  if (n.input_size() > 3 && !n.input(3).empty()) fail(n, "the axes input is not supported");
  if (value != 0.0) fail(n, fmt::format("padding with {} is not supported (only zeros)", value));
  if (one_d_ && pads.size() == 6) pads = {0, 0, 0, pads[2], 0, 0, 0, pads[5]};  // (N, C, L): L as W
  // [n, c, h, w begin; n, c, h, w end]: only h and w, not negative.
  if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0)
    fail(n, "only padding of H and W of a 4-D map is supported");
  for (double p : pads)
    if (p < 0 || p > 65536) fail(n, fmt::format("pad {} is not supported", p));
  x.padded = true;
  x.pad_node = n.name();
  x.pad[0] += static_cast<unsigned>(pads[2]);
  x.pad[1] += static_cast<unsigned>(pads[6]);
  x.pad[2] += static_cast<unsigned>(pads[3]);
  x.pad[3] += static_cast<unsigned>(pads[7]);
  set_output(n, x);
}

}  // namespace tpu::onnximport::detail
