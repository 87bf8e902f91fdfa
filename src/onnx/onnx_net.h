// What `tpu-sim net MODEL.onnx` does around the compiler: reads float batches
// in the model's layout (NCHW float32) into tpu-sim's (NHWC), calibrates and
// quantizes the imported network, and turns the int8 (or int32) output back
// into float32 in the model's layout.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/network.h"
#include "config/arch_config.h"
#include "onnx/float_exec.h"
#include "onnx/float_net.h"

namespace tpu::onnximport {

// A float32 .npy batch of shape (B, model input shape), returned in tpu
// layout (B x input_shape, C order). Throws FileError naming `path` and
// what it expected (`what`: "the input", "the calibration set").
std::vector<float> read_model_batch(const std::string& path, const FloatNet& net, std::size_t& batch);

struct QuantizedOnnx {
  compiler::Network net;
  FloatRun calibration;  // the float pass over the calibration set
};

// Runs the float network over the calibration batch (tpu layout) and
// quantizes it (quantize_float.h).
QuantizedOnnx calibrate_and_quantize(const FloatNet& fnet, const std::vector<float>& calib, std::size_t batch,
                                     const FloatOptions& options = {});

// A tpu-layout batch (`shape` = {B, ...}, values `data`, dequantized as
// scale * (q - zero_point) in double, then rounded to float32) in the
// model's layout: NHWC maps to NCHW, a flattened map's features back in
// the model's order. Returns the values; `out_shape` gets {B, model shape}.
std::vector<float> to_model_layout(const FloatNet& net, const std::vector<std::size_t>& shape,
                                   const std::vector<double>& data, std::vector<std::size_t>& out_shape);

// Dequantized output of a run: `quant` is the output tensor's quantization
// (for int32, scale = input scale * weight scale, zero point 0).
std::vector<double> dequantize(const compiler::Tensor& y, const compiler::QuantParams& quant);

// Everything `tpu-sim net MODEL.onnx` needs before compiling: the imported
// float network, its quantization by the calibration set and the quantized
// input batch. With `save_model` it also writes the quantized network as a
// tpu-sim-net model file (save_network.h); with `float_out` the float
// network's output on the input batch (model layout, float32).
struct OnnxRun {
  FloatNet fnet;
  compiler::Network net;
  compiler::Tensor input;
};
struct PrepareOptions {
  // Refuse a float model that does not fit this configuration for the
  // input's batch before calibrating it (net_fit.h); null: no check.
  const ArchConfig* fit_config = nullptr;
  // Told what is being done, one line at a time ("" when about to print
  // something else: the caller's progress line should make room).
  std::function<void(const std::string&)> progress;
  unsigned threads = 0;  // of the float pass (FloatOptions::threads)
};
OnnxRun prepare_onnx(const std::string& model, const std::string& calibrate, const std::string& input,
                     const std::string& save_model, const std::string& float_out,
                     const PrepareOptions& options = {});

// Whether MODEL.onnx is a float model, which needs a calibration set: false
// for a QDQ model (quantized already) and for a file that does not read or
// parse (prepare_onnx then says what is wrong with it).
bool onnx_needs_calibration(const std::string& path);

// Writes the network's output `y` to `path` as float32 in the model's layout.
void write_onnx_output(const OnnxRun& run, const compiler::Tensor& y, const std::string& path);

}  // namespace tpu::onnximport
