// Fuzz target: the .npy reader (src/common/npy.*) on arbitrary file bytes, as
// tpu-sim reads host memory, weight memory and GEMM matrices.
//
// Properties, beyond not crashing or allocating more than the file holds:
// read_npy either returns an array or throws a FileError whose message is one
// line starting with the path; a returned array holds exactly the bytes its
// shape and dtype need, and writing it with write_npy and reading it back
// gives the same array.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/file_io.h"
#include "common/npy.h"
#include "fuzz_check.h"

namespace {

using namespace tpu;

// A private folder for the input file and the round trip, removed at exit
// (the string is never destroyed, so the exit handler can still read it).
const std::string& scratch_dir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* templ = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") + "/fuzz_npy.XXXXXX");
    if (::mkdtemp(templ->data()) == nullptr) {
      std::perror("fuzz_npy: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return templ;
  }();
  return *dir;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string in_path = scratch_dir() + "/in.npy";
  const std::string out_path = scratch_dir() + "/out.npy";
  write_file_atomic(in_path, data, size);
  NpyArray a;
  try {
    a = read_npy(in_path);
  } catch (const FileError& e) {
    FUZZ_CHECK(fuzz::one_line(e.what()) && starts_with(e.what(), in_path + ": "), e.what());
    return 0;
  }
  FUZZ_CHECK(a.source == in_path, a.source);
  FUZZ_CHECK(a.element_count() * dtype_size(a.dtype) == a.data.size(), format_shape(a.shape));
  // What tpu-sim run and gemm do with it.
  for (std::size_t rank : {2, 3}) {
    try {
      const auto v = expect_int8(a, rank, "fuzz");
      FUZZ_CHECK(v.size() == a.element_count(), "expect_int8 size");
    } catch (const FileError& e) {
      FUZZ_CHECK(fuzz::one_line(e.what()), e.what());
    }
  }
  try {
    write_npy(out_path, a);
  } catch (const FileError& e) {  // a header too long for format 1.0
    FUZZ_CHECK(fuzz::one_line(e.what()) && starts_with(e.what(), out_path + ": "), e.what());
    return 0;
  }
  const NpyArray b = read_npy(out_path);
  FUZZ_CHECK(b.dtype == a.dtype && b.shape == a.shape && b.data == a.data,
             "write_npy then read_npy changed the array " + format_shape(a.shape));
  return 0;
}
