// Constants (importer.h): initializers and Constant nodes are read as
// Consts; the shape arithmetic of exported models (Shape, Gather, Add, Mul
// and Div, Concat and Slice of constants, ConstantOfShape, a Cast of a
// constant) is computed here, at import, into further Consts. Identity and
// Dropout (inference) only rename their input.
#include "onnx/importer.h"

#include <algorithm>
#include <cfloat>

namespace tpu::onnximport::detail {

void Importer::constant(const onnx::NodeProto& n) {
  only_attrs(n, {"value"});
  const auto* v = attr(n, "value");
  if (!v) fail(n, "only a Constant with a tensor 'value' is supported");
  consts_[n.output(0)] = read_tensor(v->t(), "the Constant");
}

void Importer::identity(const onnx::NodeProto& n) {
  if (n.op_type() == "Dropout") {
    only_attrs(n, {"ratio", "seed", "is_test"});
    no_extra_outputs(n, 1);
    if (has_input(n, 2)) {
      const Const& t = need_const(n, 2, "training_mode");
      if (!t.values.empty() && t.values[0] != 0) fail(n, "training_mode = true is not supported");
    }
  } else {
    only_attrs(n, {});
  }
  if (n.input_size() < 1) fail(n, "needs an input");
  if (is_const(n.input(0))) consts_[n.output(0)] = consts_.at(n.input(0));
  else bind(n.output(0), need_value(n, 0, true, true));
}

// Shape of a computed tensor: the model's layout, batch 1 (as PyTorch's
// export traced it), a constant for the shape arithmetic that follows.
void Importer::shape_op(const onnx::NodeProto& n) {
  if (seq_shape(n)) return;
  only_attrs(n, {});
  const Value x = need_value(n, 0);
  const Shape& s = shape(x);
  Const c;
  c.type = onnx::TensorProto::INT64;
  c.values.push_back(1.0);
  if (s.size() == 3 && one_d_) c.values.insert(c.values.end(), {double(s[2]), double(s[1])});  // (1, C, L)
  else if (s.size() == 3) c.values.insert(c.values.end(), {double(s[2]), double(s[0]), double(s[1])});
  else for (std::size_t d : s) c.values.push_back(static_cast<double>(d));
  c.dims = {static_cast<std::int64_t>(c.values.size())};
  consts_[n.output(0)] = std::move(c);
}

void Importer::gather(const onnx::NodeProto& n) {
  if (seq_gather(n)) return;
  only_attrs(n, {"axis"});
  const Const& data = need_const(n, 0, "the data (tpu-sim gathers only from constants, such as a Shape)");
  const Const& idx = need_const(n, 1, "the indices");
  if (data.dims.size() != 1 || attr_int(n, "axis", 0) != 0) fail(n, "only a gather from a 1-D constant is supported");
  Const c;
  c.type = data.type;
  c.dims = idx.dims;
  const auto size = static_cast<double>(data.values.size());
  for (double i : idx.values) {
    const double k = i < 0 ? i + size : i;
    if (!(k >= 0 && k < size) || k != std::floor(k)) fail(n, fmt::format("index {} is outside the {} values", i, data.values.size()));
    c.values.push_back(data.values[static_cast<std::size_t>(k)]);
  }
  consts_[n.output(0)] = std::move(c);
}

// Add, Mul, Div of two constants (shape arithmetic), element-wise or with a
// scalar; integer division truncates.
void Importer::const_arith(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const std::string& op = n.op_type();
  if (n.input_size() != 2 || !is_const(n.input(0)) || !is_const(n.input(1)))
    fail(n, fmt::format("{} of computed tensors is not supported (only of constants, such as shape arithmetic)", op));
  const Const& a = consts_.at(n.input(0));
  const Const& b = consts_.at(n.input(1));
  const bool ints = a.type != onnx::TensorProto::FLOAT && a.type != onnx::TensorProto::DOUBLE;
  const std::size_t len = std::max(a.values.size(), b.values.size());
  if (!((a.values.size() == len || a.values.size() == 1) && (b.values.size() == len || b.values.size() == 1)))
    fail(n, "constants of different sizes (only element-wise or with a scalar)");
  Const c;
  c.type = a.type;
  c.dims = a.values.size() == len ? a.dims : b.dims;
  for (std::size_t i = 0; i < len; ++i) {
    const double x = a.values[a.values.size() == 1 ? 0 : i], y = b.values[b.values.size() == 1 ? 0 : i];
    double v = op == "Add" ? x + y : op == "Mul" ? x * y : op == "Equal" ? double(x == y) : 0.0;
    if (op == "Div") {
      if (y == 0) fail(n, "divides by zero");
      v = ints ? std::trunc(x / y) : x / y;
    }
    c.values.push_back(v);
  }
  if (op == "Equal") c.type = onnx::TensorProto::BOOL;
  consts_[n.output(0)] = std::move(c);
}

// Where(cond, x, y) of constants: element-wise, or with scalars (as ViT's
// class token's Expand shape: torch.onnx.export's -1 replaced by 1).
void Importer::const_where(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (n.input_size() != 3 || !is_const(n.input(0)) || !is_const(n.input(1)) || !is_const(n.input(2)))
    fail(n, "Where of computed tensors is not supported (only of constants, such as shape arithmetic)");
  const Const& c = consts_.at(n.input(0));
  const Const& a = consts_.at(n.input(1));
  const Const& b = consts_.at(n.input(2));
  const std::size_t len = std::max({c.values.size(), a.values.size(), b.values.size()});
  for (const Const* p : {&c, &a, &b})
    if (p->values.size() != len && p->values.size() != 1)
      fail(n, "constants of different sizes (only element-wise or with a scalar)");
  Const out;
  out.type = a.type;
  out.dims = c.values.size() == len ? c.dims : a.values.size() == len ? a.dims : b.dims;
  const auto at = [len](const Const& p, std::size_t i) { return p.values[p.values.size() == len ? i : 0]; };
  for (std::size_t i = 0; i < len; ++i) out.values.push_back(at(c, i) != 0.0 ? at(a, i) : at(b, i));
  consts_[n.output(0)] = std::move(out);
}

// Constants (shape arithmetic) along axis 0.
void Importer::const_concat(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  Const c;
  c.type = onnx::TensorProto::INT64;
  for (int i = 0; i < n.input_size(); ++i) {
    const Const& p = need_const(n, i, "a part (all constants or all computed)");
    if (p.dims.size() > 1) fail(n, "only 1-D constants are concatenated");
    c.values.insert(c.values.end(), p.values.begin(), p.values.end());
  }
  c.dims = {static_cast<std::int64_t>(c.values.size())};
  consts_[n.output(0)] = std::move(c);
}

std::size_t Importer::slice_bound(const onnx::NodeProto& n, double v, double len) const {
  if (std::isnan(v)) fail(n, "starts and ends must be numbers");
  if (v < 0) v += len;
  return static_cast<std::size_t>(std::clamp(v, 0.0, len));
}

void Importer::unit_steps(const onnx::NodeProto& n) const {
  if (has_input(n, 4))
    for (double s : need_const(n, 4, "steps").values)
      if (s != 1) fail(n, "steps other than 1 are not supported");
}

// A Slice of a 1-D constant (shape arithmetic, as PyTorch's export of
// F.interpolate(size=...) slices the input's Shape).
void Importer::const_slice(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Const& x = need_const(n, 0, "the data");
  if (x.dims.size() != 1) fail(n, "only a slice of a 1-D constant or of a map's channels is supported");
  const Const& starts = need_const(n, 1, "starts");
  const Const& ends = need_const(n, 2, "ends");
  if (has_input(n, 3))
    for (double a : need_const(n, 3, "axes").values)
      if (a != 0 && a != -1) fail(n, "a slice of a 1-D constant has axes [0]");
  unit_steps(n);
  if (starts.values.size() != 1 || ends.values.size() != 1) fail(n, "a slice of a 1-D constant has one start and end");
  const double len = static_cast<double>(x.values.size());
  const std::size_t b = slice_bound(n, starts.values[0], len), e = slice_bound(n, ends.values[0], len);
  Const c;
  c.type = x.type;
  if (e > b) c.values.assign(x.values.begin() + static_cast<std::ptrdiff_t>(b), x.values.begin() + static_cast<std::ptrdiff_t>(e));
  c.dims = {static_cast<std::int64_t>(c.values.size())};
  consts_[n.output(0)] = std::move(c);
}

void Importer::constant_of_shape(const onnx::NodeProto& n) {
  only_attrs(n, {"value"});
  const Const& shp = need_const(n, 0, "the shape");
  Const c;
  std::size_t count = 1;
  for (double d : shp.values) {
    if (!(d >= 0 && d <= 16777216.0)) fail(n, fmt::format("dimension {} is not supported", d));
    c.dims.push_back(static_cast<std::int64_t>(d));
    count *= static_cast<std::size_t>(d);
    if (count > 16777216) fail(n, "makes a constant of more than 16777216 values");
  }
  double value = 0.0;
  if (const auto* a = attr(n, "value")) {
    const Const v = read_tensor(a->t(), "the value");
    if (v.values.size() != 1) fail(n, "the value must hold one element");
    value = v.values[0];
    c.type = v.type;
  }
  c.values.assign(count, value);
  consts_[n.output(0)] = std::move(c);
}

// A Cast of a constant to `to`, as the operator converts: to float32
// rounded (out of range: infinity), to an integer type truncated and
// checked against its range.
void Importer::cast_const(const onnx::NodeProto& n, std::int64_t to) {
  Const c = consts_.at(n.input(0));
  double lo = 0, hi = 0;
  switch (to) {
    case onnx::TensorProto::FLOAT:
      for (double& v : c.values)
        v = std::fabs(v) <= FLT_MAX || std::isnan(v) ? static_cast<double>(static_cast<float>(v))
                                                     : std::copysign(INFINITY, v);
      break;
    case onnx::TensorProto::DOUBLE:
      break;
    case onnx::TensorProto::BOOL:
      for (double& v : c.values) v = v != 0.0;
      break;
    case onnx::TensorProto::INT8: lo = -128, hi = 127; break;
    case onnx::TensorProto::UINT8: lo = 0, hi = 255; break;
    case onnx::TensorProto::INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    case onnx::TensorProto::INT64: lo = -9.2e18, hi = 9.2e18; break;
    default:
      fail(n, fmt::format("a Cast of a constant to {} is not supported", type_name(static_cast<int>(to))));
  }
  if (hi > lo)
    for (double& v : c.values) {
      v = std::trunc(v);
      if (!(v >= lo && v <= hi))
        fail(n, fmt::format("casts {} to {}, out of its range", v, type_name(static_cast<int>(to))));
    }
  c.type = static_cast<int>(to);
  c.dequantized = false;
  consts_[n.output(0)] = std::move(c);
}

// Unsqueeze of a constant (shape arithmetic): the values, with size-1 axes
// added at `axes` (input 1 from opset 13, the attribute before).
void Importer::unsqueeze(const onnx::NodeProto& n) {
  only_attrs(n, {"axes"});
  const Const& x = need_const(n, 0, "the data (tpu-sim unsqueezes only constants, such as a Shape's)");
  std::vector<double> axes;
  if (has_input(n, 1)) axes = need_const(n, 1, "axes").values;
  else for (std::int64_t a : attr_ints(n, "axes", {})) axes.push_back(static_cast<double>(a));
  Const c = x;
  const double rank = static_cast<double>(x.dims.size() + axes.size());
  std::vector<bool> unit(static_cast<std::size_t>(rank), false);
  for (double a : axes) {
    const double k = a < 0 ? a + rank : a;
    if (!(k >= 0 && k < rank) || unit[static_cast<std::size_t>(k)]) fail(n, fmt::format("axis {} is not valid", a));
    unit[static_cast<std::size_t>(k)] = true;
  }
  c.dims.clear();
  for (std::size_t k = 0, from = 0; k < unit.size(); ++k) c.dims.push_back(unit[k] ? 1 : x.dims[from++]);
  consts_[n.output(0)] = std::move(c);
}

// Expand of a constant to a constant shape (NumPy broadcasting): the zero
// initial state of a recurrent layer.
void Importer::expand(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Const& x = need_const(n, 0, "the data (tpu-sim expands only constants)");
  const Const& s = need_const(n, 1, "the shape");
  const std::size_t rank = std::max(x.dims.size(), s.values.size());
  std::vector<std::int64_t> dims(rank, 1), xd(rank, 1);
  std::copy(x.dims.begin(), x.dims.end(), xd.begin() + static_cast<std::ptrdiff_t>(rank - x.dims.size()));
  std::size_t count = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t sk = k + s.values.size() >= rank ? k + s.values.size() - rank : rank;
    const double want = sk < s.values.size() ? s.values[sk] : 1.0;
    if (!(want >= 0 && want <= 16777216.0) || want != std::floor(want)) fail(n, fmt::format("dimension {} is not valid", want));
    const auto w = static_cast<std::int64_t>(want);
    if (xd[k] != 1 && w != 1 && w != xd[k]) fail(n, "the shapes do not broadcast");
    dims[k] = xd[k] == 1 ? w : xd[k];
    count *= static_cast<std::size_t>(dims[k]);
    if (count > 16777216) fail(n, "makes a constant of more than 16777216 values");
  }
  Const c;
  c.type = x.type;
  c.dims = dims;
  c.values.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    // Index i's coordinates, each clamped to x's size-1 axes.
    std::size_t rest = i, from = 0, stride = 1;
    for (std::size_t k = rank; k-- > 0;) {
      const std::size_t coord = rest % static_cast<std::size_t>(dims[k]);
      rest /= static_cast<std::size_t>(dims[k]);
      if (xd[k] != 1) from += coord * stride;
      stride *= static_cast<std::size_t>(xd[k]);
    }
    c.values[i] = x.values.at(from);
  }
  consts_[n.output(0)] = std::move(c);
}

}  // namespace tpu::onnximport::detail
