// Whole-file writes (common/file_io.h): the target appears whole or not at
// all, no temporary file is left after an error, and RemoveOnSignal removes a
// temporary file when the process is ended by a signal (Ctrl-C).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using tpu::FileError;
using tpu::RemoveOnSignal;
using tpu::write_file_atomic;

// A fresh folder per test (tests/support/temp_dir.h).
struct TempDir : tpu::test::TempDir {
  TempDir() : tpu::test::TempDir("tpu-file-io-test") {}
};

void make_file(const std::string& path) { std::ofstream(path) << "partial"; }

// Runs `body` in a child process with SIGINT, SIGTERM and SIGHUP at their
// default actions (Catch2 handles some of them in this process); returns the
// child's wait status. The child ends with _exit(0) if `body` returns.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
    body();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("write_file_atomic writes the bytes and leaves only the target", "[file_io]") {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  write_file_atomic(path, std::string("first, longer contents"));
  write_file_atomic(path, std::string("second"));
  CHECK(tpu::read_file_text(path) == "second");
  write_file_atomic(path, std::vector<std::uint8_t>{0, 255, 10});
  CHECK(tpu::read_file_bytes(path) == std::vector<std::uint8_t>{0, 255, 10});
  CHECK(dir.names() == std::vector<std::string>{"out.bin"});
}

TEST_CASE("the temporary name is hidden, in the target's folder, and names the process",
          "[file_io]") {
  const std::string pid = std::to_string(::getpid());
  CHECK(tpu::temp_path_for("some/dir/out.npy") == "some/dir/.out.npy." + pid + ".tmp");
  CHECK(tpu::temp_path_for("out.npy") == ".out.npy." + pid + ".tmp");
}

TEST_CASE("a write that fails throws one line naming the target and leaves nothing",
          "[file_io]") {
  TempDir dir;
  const std::string missing = dir.file("no/such/folder/out.bin");
  CHECK_THROWS_MATCHES(write_file_atomic(missing, std::string("x")), FileError,
                       Catch::Matchers::Message(missing + ": cannot write: No such file or directory"));
  // A folder where the file should go: the rename fails; the folder stays as it was.
  const std::string folder = dir.file("taken");
  fs::create_directory(folder);
  CHECK_THROWS_WITH(write_file_atomic(folder, std::string("x")),
                    Catch::Matchers::StartsWith(folder + ": cannot rename into place: "));
  CHECK(fs::is_directory(folder));
  CHECK(fs::is_empty(folder));
  CHECK(dir.names() == std::vector<std::string>{"taken"});
}

TEST_CASE("a failed write leaves an existing target as it was", "[file_io]") {
  TempDir dir;
  // A name of 250 bytes is a valid file name (NAME_MAX is 255), but the
  // temporary name (".NAME.PID.tmp") is too long: the write fails before the
  // target is touched, whatever the permissions (tests may run as root).
  const std::string path = dir.file(std::string(250, 'k'));
  std::ofstream(path) << "old";
  CHECK_THROWS_MATCHES(write_file_atomic(path, std::string("new")), FileError,
                       Catch::Matchers::Message(path + ": cannot write: File name too long"));
  CHECK(tpu::read_file_text(path) == "old");
  CHECK(dir.names() == std::vector<std::string>{std::string(250, 'k')});
}

TEST_CASE("RemoveOnSignal removes its file when SIGINT or SIGTERM ends the process",
          "[file_io][signal]") {
  TempDir dir;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    INFO("signal " << sig);
    const std::string path = dir.file(".out.tmp");
    make_file(path);
    const int status = in_child([&] {
      const RemoveOnSignal guard(path);
      ::raise(sig);
    });
    // The child still dies of the signal (a shell shows 128 + signal) ...
    CHECK(WIFSIGNALED(status));
    if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == sig);
    // ... and the file is gone.
    CHECK_FALSE(fs::exists(path));
  }
}

TEST_CASE("RemoveOnSignal guards only while it lives and only its own files",
          "[file_io][signal]") {
  TempDir dir;
  const std::string done = dir.file("done.tmp"), live = dir.file("live.tmp");
  const std::string other = dir.file("other.txt");
  make_file(done);
  make_file(live);
  make_file(other);
  const int status = in_child([&] {
    { const RemoveOnSignal finished(done); }
    const RemoveOnSignal guard(live);
    ::raise(SIGINT);
  });
  CHECK(WIFSIGNALED(status));
  CHECK(fs::exists(done));  // its guard had ended before the signal
  CHECK_FALSE(fs::exists(live));
  CHECK(fs::exists(other));
}

TEST_CASE("RemoveOnSignal leaves an ignored signal ignored", "[file_io][signal]") {
  // nohup and background jobs ignore SIGINT/SIGHUP: the guard must not make
  // them deadly.
  TempDir dir;
  const std::string path = dir.file("kept.tmp");
  make_file(path);
  const int status = in_child([&] {
    ::signal(SIGINT, SIG_IGN);
    const RemoveOnSignal guard(path);
    ::raise(SIGINT);
  });
  CHECK(WIFEXITED(status));
  if (WIFEXITED(status)) CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::exists(path));
}
