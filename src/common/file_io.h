// Whole-file I/O. Writes are atomic: the data goes to a temporary file in the
// target's folder that is renamed over the target only when complete, so a
// failure never leaves a truncated output behind.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {

// An error in a file the user named; what() is one line that starts with the path.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<std::uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);
void write_file_atomic(const std::string& path, const void* data, std::size_t size);
inline void write_file_atomic(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}
inline void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}

}  // namespace tpu
