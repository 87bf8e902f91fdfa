#include "onnx/onnx_net.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "common/file_io.h"
#include "common/npy.h"
#include "formats/save_network.h"
#include "onnx/net_fit.h"
#include "onnx/onnx_import.h"
#include "onnx/quantize_float.h"
#include "runtime/host_ops.h"

namespace tpu::onnximport {

std::vector<float> read_model_batch(const std::string& path, const FloatNet& net, std::size_t& batch) {
  const NpyArray a = read_npy(path);
  const std::vector<std::size_t>& want = net.model_input_shape;
  if (net.seq_first_input) {  // (L, B, D) -> (B, L, D)
    if (a.dtype != Dtype::float32 || a.rank() != 3 || a.shape[0] != want[0] || a.shape[2] != want[1])
      throw FileError(fmt::format("{}: expected float32 of shape ({}, B, {}) (the ONNX model's layout), got {} of "
                                  "shape {}", path, want[0], want[1], dtype_name(a.dtype), format_shape(a.shape)));
    batch = a.shape[1];
    if (batch == 0) throw FileError(fmt::format("{}: the batch is empty", path));
    const std::vector<float> v = a.values<float>();
    std::vector<float> out(v.size());
    for (std::size_t t = 0; t < want[0]; ++t)
      for (std::size_t n = 0; n < batch; ++n)
        std::copy_n(v.begin() + static_cast<std::ptrdiff_t>((t * batch + n) * want[1]), want[1],
                    out.begin() + static_cast<std::ptrdiff_t>((n * want[0] + t) * want[1]));
    return out;
  }
  const bool shape_ok = a.rank() == want.size() + 1 && std::equal(want.begin(), want.end(), a.shape.begin() + 1);
  if (a.dtype != Dtype::float32 || !shape_ok)
    throw FileError(fmt::format("{}: expected float32 of shape (B, {}) (the ONNX model's layout), got {} of shape {}",
                                path, fmt::join(want, ", "), dtype_name(a.dtype), format_shape(a.shape)));
  batch = a.shape[0];
  if (batch == 0) throw FileError(fmt::format("{}: the batch is empty", path));
  const std::vector<float> v = a.values<float>();
  if (net.sequence_input) return v;  // (B, L, D) is 1 x L x D per sample already
  if (want.size() != 3 && want.size() != 2) return v;
  // (B, C, H, W) -> (B, H, W, C); (B, C, L) -> (B, 1, L, C).
  const std::size_t C = want[0], H = want.size() == 3 ? want[1] : 1, W = want.back();
  std::vector<float> out(v.size());
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t p = 0; p < H * W; ++p) out[(n * H * W + p) * C + c] = v[(n * C + c) * H * W + p];
  return out;
}

QuantizedOnnx calibrate_and_quantize(const FloatNet& fnet, const std::vector<float>& calib, std::size_t batch,
                                     const FloatOptions& options) {
  QuantizedOnnx q;
  q.calibration = run_float(fnet, calib, batch, options);
  q.net = quantize_float(fnet, q.calibration.ranges);
  return q;
}

std::vector<double> dequantize(const compiler::Tensor& y, const compiler::QuantParams& quant) {
  std::vector<double> out(y.data.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = quant.scale * static_cast<double>(y.data[i] - quant.zero_point);
  return out;
}

std::vector<float> to_model_layout(const FloatNet& net, const std::vector<std::size_t>& shape,
                                   const std::vector<double>& data, std::vector<std::size_t>& out_shape) {
  const std::size_t batch = shape.at(0);
  std::vector<float> out(data.size());
  if (shape.size() == 4) {  // (B, H, W, C) -> (B, C, H, W)
    const std::size_t H = shape[1], W = shape[2], C = shape[3];
    out_shape = {batch, C, H, W};
    if (net.token_output) {  // (B, 1, L, D) is the model's (B, L, D) already
      out_shape = {batch, H * W, C};
      std::transform(data.begin(), data.end(), out.begin(), [](double v) { return static_cast<float>(v); });
      return out;
    }
    if (net.model_output_shape.size() == 2) out_shape = {batch, C, W};  // a 1-D model's (B, C, L), H = 1
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t c = 0; c < C; ++c)
        for (std::size_t p = 0; p < H * W; ++p)
          out[(n * C + c) * H * W + p] = static_cast<float>(data[(n * H * W + p) * C + c]);
    return out;
  }
  out_shape = shape;
  const std::size_t F = batch ? data.size() / batch : 0;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t i = 0; i < F; ++i)
      out[n * F + i] = static_cast<float>(data[n * F + (net.output_perm.empty() ? i : net.output_perm[i])]);
  return out;
}

bool onnx_needs_calibration(const std::string& path) {
  try {
    const std::optional<bool> qdq = onnx_has_qdq_nodes(path);
    return qdq && !*qdq;
  } catch (const std::exception&) {
    return false;  // reported when the model is read for good
  }
}

namespace {

void write_model_layout(const FloatNet& fnet, const std::vector<std::size_t>& shape, const std::vector<double>& v,
                        const std::string& path) {
  std::vector<std::size_t> out_shape;
  const std::vector<float> out = to_model_layout(fnet, shape, v, out_shape);
  write_npy(path, NpyArray::of<float>(out_shape, out));
}

}  // namespace

// The float pass's progress as one line: "WHAT: samples 1-4 of 8, layer 30/54".
FloatOptions float_options(const PrepareOptions& options, const std::string& what) {
  FloatOptions f;
  f.threads = options.threads;
  if (options.progress)
    f.progress = [&options, what](std::size_t first, std::size_t count, std::size_t batch, std::size_t layer,
                                  std::size_t layers) {
      const std::string samples =
          count == 1 ? fmt::format("sample {}", first + 1) : fmt::format("samples {}-{}", first + 1, first + count);
      options.progress(fmt::format("{}: {} of {}, layer {}/{}", what, samples, batch, layer + 1, layers));
    };
  return f;
}

OnnxRun prepare_onnx(const std::string& model, const std::string& calibrate, const std::string& input,
                     const std::string& save_model, const std::string& float_out, const PrepareOptions& options) {
  const auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  OnnxRun run;
  say(fmt::format("importing {}", model));
  run.fnet = import_onnx(model);
  // Exporters name graphs generically ("torch_jit", "main_graph"): the file says more.
  run.fnet.name = std::filesystem::path(model).stem().string();
  say("");
  for (const std::string& w : run.fnet.warnings) fmt::print(stderr, "tpu-sim: warning: {}\n", w);
  if (run.fnet.qdq && !calibrate.empty())
    fmt::print(stderr, "tpu-sim: warning: {}: --calibrate is ignored: the QDQ model brings its own quantization\n",
               model);
  if (!run.fnet.qdq && calibrate.empty())
    throw FileError(fmt::format("{}: a float model needs a calibration set (--calibrate)", model));
  std::size_t batch = 0;
  const std::vector<float> x = read_model_batch(input, run.fnet, batch);
  try {
    if (run.fnet.qdq) {
      run.net = quantize_float(run.fnet, {});
    } else {
      // Shapes and weights decide whether it fits: refuse before the float pass.
      if (options.fit_config) {
        say(fmt::format("checking that {} fits", model));
        check_fit_before_calibration(run.fnet, batch, *options.fit_config);
      }
      std::size_t calib_batch = 0;
      const std::vector<float> calib = read_model_batch(calibrate, run.fnet, calib_batch);
      run.net = calibrate_and_quantize(run.fnet, calib, calib_batch, float_options(options, "calibrating")).net;
    }
  } catch (const compiler::CompileError& e) {
    say("");
    throw FileError(fmt::format("{}: {}", model, e.what()));
  }
  if (!save_model.empty()) compiler::save_network(run.net, save_model);
  std::vector<std::size_t> shape{batch};
  shape.insert(shape.end(), run.fnet.input_shape.begin(), run.fnet.input_shape.end());
  try {
    run.input = compiler::quantize_input(run.net, shape, std::vector<double>(x.begin(), x.end()));
  } catch (const compiler::CompileError& e) {
    say("");
    throw FileError(fmt::format("{}: {}", input, e.what()));
  }
  if (!float_out.empty()) {
    const FloatRun f = run_float(run.fnet, x, batch, float_options(options, "float pass on the input"));
    std::vector<std::size_t> fshape{batch};
    fshape.insert(fshape.end(), f.output_shape.begin(), f.output_shape.end());
    write_model_layout(run.fnet, fshape, std::vector<double>(f.output.begin(), f.output.end()), float_out);
  }
  say("");
  return run;
}

void write_onnx_output(const OnnxRun& run, const compiler::Tensor& y, const std::string& path) {
  const compiler::TensorInfo out = compiler::infer_network(run.net).back();
  write_model_layout(run.fnet, y.shape, dequantize(y, out.quant), path);
}

}  // namespace tpu::onnximport
