// tpu-calib-bench: how long `tpu-sim net MODEL.onnx --calibrate` spends
// importing and calibrating (docs/performance.md, "Calibration").
//
//   tpu-calib-bench MODEL.onnx CALIB.npy [--repeat R]
//
// Imports the model, then runs the float pass over the calibration batch and
// quantizes the network (onnximport::calibrate_and_quantize) R times; prints
// the import time and the best calibration time, wall and CPU (the process's
// user + system time, which a loaded machine does not inflate the way it
// inflates wall time). bench/calibration.py exports the models it times.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "common/file_io.h"
#include "onnx/onnx_import.h"
#include "onnx/onnx_net.h"

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct Times {
  double wall = 0, cpu = 0;
};

template <typename F>
Times timed(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  f();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), cpu_seconds() - c0};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("tpu-calib-bench: import and calibration time of an ONNX model");
  std::string model, calib;
  unsigned repeat = 1;
  app.add_option("model", model, "the model (.onnx)")->required();
  app.add_option("calib", calib, "calibration batch (.npy, float32, the model's layout)")->required();
  app.add_option("--repeat", repeat, "calibrate this many times, report the fastest")->check(CLI::Range(1u, 100u));
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace tpu::onnximport;
    FloatNet net;
    const Times import = timed([&] { net = import_onnx(model); });
    std::size_t batch = 0;
    const std::vector<float> x = read_model_batch(calib, net, batch);
    Times best{1e300, 1e300};
    for (unsigned r = 0; r < repeat; ++r) {
      const Times t = timed([&] { calibrate_and_quantize(net, x, batch); });
      if (t.wall < best.wall) best = t;
    }
    fmt::print("{}: {} layers; import {:.3f} s wall, {:.3f} s CPU; calibration of {} samples: {:.3f} s wall, "
               "{:.3f} s CPU\n",
               model, net.layers.size(), import.wall, import.cpu, batch, best.wall, best.cpu);
  } catch (const std::exception& e) {
    std::cerr << "tpu-calib-bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
