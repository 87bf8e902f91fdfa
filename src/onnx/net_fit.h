// Whether a network fits a configuration, and if not, which memory size
// would make it fit. `tpu-sim net MODEL.onnx` asks before the float
// calibration pass (docs/onnx.md, "Calibration"): what the compiler needs
// (shapes, weight tiles, live maps, accumulator bands, host rows) does not
// depend on the calibrated ranges, so the network quantized with placeholder
// ranges compiles exactly when the calibrated one does (up to the bias
// passes of a layer whose biases are huge against its input scale).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compiler/network.h"
#include "config/arch_config.h"
#include "onnx/float_net.h"

namespace tpu::onnximport {

// One --config field that alone makes the network compile.
struct FitAdvice {
  std::string field;  // an arch_params() name: weight_tiles, ub_rows, acc_rows, host_rows
  std::uint64_t have = 0;
  std::uint64_t need = 0;  // the smallest value that compiles (with the other fields as they are)
  std::uint64_t bytes_per_unit = 0;  // of one tile or row of that memory
};

// For a network that compile_network(net, batch, cfg) refuses: the first of
// weight_tiles, acc_rows, ub_rows, host_rows that alone makes it compile when
// raised, with its smallest such value; nothing if none alone does. Compiles
// the network a few times (a binary search).
std::optional<FitAdvice> advise_fit(const compiler::Network& net, std::uint64_t batch, const ArchConfig& cfg);

// "REASON; weight_tiles = 1024 (64 MiB) is too small: the network needs
// weight_tiles >= 2200 (138 MiB): --config FILE with {"weight_tiles": 2200}"
// (on a configuration with a 1024-tile weight memory).
std::string fit_message(const std::string& reason, const FitAdvice& advice);

// compile_network(net, batch, cfg) (CompileMode::Auto); a refusal throws
// CompileError with the compiler's reason and, when one memory size fixes
// it, fit_message's advice.
compiler::NetworkPlan compile_with_fit_advice(const compiler::Network& net, std::uint64_t batch,
                                              const ArchConfig& cfg);

// Before calibration: throws CompileError when the float network cannot fit
// `cfg` for `batch` samples whatever its calibration gives. The weight tiles
// of a layer's bias passes (its biases and its input's zero-point
// correction, docs/quantization.md) depend on the calibrated scales. The
// network is quantized with every activation in [0, 1] (zero point -128, the
// largest correction, which most networks' calibration stays under) and
// compiled without its biases and zero points (a lower bound); it is refused
// only when that fails, with the reason and advice of the network as
// quantized. The compile after calibration
// gives exact advice (compile_with_fit_advice) when the calibrated network still fails.
void check_fit_before_calibration(const FloatNet& net, std::uint64_t batch, const ArchConfig& cfg);

}  // namespace tpu::onnximport
