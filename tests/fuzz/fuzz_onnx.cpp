// Fuzz target: the ONNX importer (src/onnx: onnx_validate.cpp, then libonnx's
// checker and shape inference, then onnx_import.cpp), byte level.
//
// The bytes are parsed as an onnx::ModelProto, as `tpu-sim net MODEL.onnx`
// parses a file (bytes that do not parse are uninteresting: protobuf's own
// parser is not ours to test). A model is then imported, and must either
// give a FloatNet or be refused with one FileError line starting with the
// model's name; any other exception, a crash, a leak or undefined behaviour
// is a finding. An imported network must be whole: at least one layer, a
// shape per tensor, the output's permutation (if any) a permutation of the
// output's elements. The seeds (make_corpus.sh) are models exported by
// PyTorch (tests/fuzz/make_onnx_seeds.py) and hand-made edge cases.
#include <onnx/onnx_pb.h>  // first: see src/onnx/onnx_import.cpp

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "fuzz_check.h"
#include "onnx/onnx_import.h"

namespace {

constexpr const char* kWhere = "fuzz.onnx";

void check_net(const tpu::onnximport::FloatNet& net) {
  FUZZ_CHECK(!net.layers.empty(), "an imported network without layers");
  std::size_t out = 1;
  for (std::size_t d : net.model_output_shape) out *= d;
  if (net.output_perm.empty()) return;
  FUZZ_CHECK(net.output_perm.size() == out, "the output permutation's size is not the output's");
  std::vector<bool> seen(out, false);
  for (std::size_t p : net.output_perm) {
    FUZZ_CHECK(p < out && !seen[p], "the output permutation is not a permutation");
    seen[p] = true;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  onnx::ModelProto model;
  if (size > 1u << 30 || !model.ParseFromArray(data, static_cast<int>(size))) return 0;
  try {
    check_net(tpu::onnximport::import_onnx_model(std::move(model), kWhere));
  } catch (const tpu::FileError& e) {
    const std::string m = e.what();
    FUZZ_CHECK(tpu::fuzz::one_line(m), m);
    FUZZ_CHECK(m.rfind(std::string(kWhere) + ": ", 0) == 0, "the message does not start with the model: " + m);
  }
  return 0;
}
