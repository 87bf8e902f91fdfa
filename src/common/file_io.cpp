#include "common/file_io.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include <unistd.h>

namespace tpu {
namespace {

template <typename Container>
Container read_whole(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw FileError(fmt::format("{}: is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  Container data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw FileError(fmt::format("{}: read error", path));
  return data;
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  return read_whole<std::vector<std::uint8_t>>(path);
}

std::string read_file_text(const std::string& path) { return read_whole<std::string>(path); }

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path tmp = target.parent_path() / ("." + target.filename().string() + "." + std::to_string(::getpid()) + ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw FileError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  const bool ok = std::fwrite(data, 1, size, f) == size;
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!ok || !closed) {
    fs::remove(tmp, ec);
    throw FileError(fmt::format("{}: write failed", path));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw FileError(fmt::format("{}: cannot rename into place: {}", path, ec.message()));
  }
}

}  // namespace tpu
