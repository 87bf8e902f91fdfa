// Whole-file writes (common/file_io.h): the target appears whole or not at
// all, no temporary file is left after an error, and RemoveOnSignal removes a
// temporary file when the process is ended by a signal (Ctrl-C). Symbolic
// links are written through, and special files (devices, FIFOs, the
// process's own descriptors) are written into, never replaced.
//
// The special files are FIFOs in a test's own folder, links there to
// /dev/null and /dev/full, and /proc/self/fd entries: never the device nodes
// by their own names, which a broken write_file_atomic running as root would
// replace (issue 11). /dev/null and /dev/full are only opened and written.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using tpu::FileError;
using tpu::RemoveOnSignal;
using tpu::temp_path_for;
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

// Reads a FIFO on a thread of its own until the writer closes it, or until
// `limit` bytes have come (then it closes its end early), or until nothing
// has come for 5 s: a write that never reaches the FIFO fails the test
// instead of hanging it. The FIFO is opened at once, without waiting for a
// writer, so that the writer's open does not wait either.
class FifoReader {
 public:
  explicit FifoReader(const std::string& path, std::size_t limit = SIZE_MAX)
      : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK)) {
    REQUIRE(fd_ >= 0);
    thread_ = std::thread([this, limit] {
      std::vector<char> buf(1 << 16);
      while (data_.size() < limit) {
        // Linux reports no hang-up before a writer has come and gone.
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 5000) <= 0) break;
        const ssize_t n = ::read(fd_, buf.data(), std::min(buf.size(), limit - data_.size()));
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) break;
        data_.append(buf.data(), static_cast<std::size_t>(n));
      }
      ::close(fd_);
    });
  }
  ~FifoReader() {
    if (thread_.joinable()) thread_.join();
  }
  FifoReader(const FifoReader&) = delete;
  FifoReader& operator=(const FifoReader&) = delete;

  std::string bytes() {
    thread_.join();
    return data_;
  }

 private:
  int fd_;
  std::string data_;
  std::thread thread_;
};

// Bytes that show where a copy went wrong: 1 MiB of a repeating pattern
// whose period (251) is no power of two.
std::string pattern(std::size_t size = 1 << 20) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>(i % 251);
  return s;
}

std::string make_fifo(const TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

// A device node as lstat sees it, to show that it is still the same node.
struct Node {
  explicit Node(const std::string& path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    is_char_device = S_ISCHR(st.st_mode);
    device = st.st_rdev;
    inode = st.st_ino;
  }
  bool operator==(const Node& o) const {
    return is_char_device == o.is_char_device && device == o.device && inode == o.inode;
  }
  bool is_char_device;
  dev_t device;
  ino_t inode;
};

// The names in `folder`, hidden ones included, sorted.
std::vector<std::string> names_in(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(folder)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// What a symbolic link says, or "(no link)".
std::string link_text(const std::string& link) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(link, ec))) return "(no link)";
  return fs::read_symlink(link).string();
}

// The contents of a file written with PendingFile: `bytes` written to
// path() by a writer that, like the waveform libraries, opens it by name.
void write_pending(tpu::PendingFile& out, const std::string& bytes) {
  std::ofstream f(out.path(), std::ios::binary);
  f << bytes;
  f.close();
  REQUIRE(f);
}

// While it lives, SIGPIPE is ignored (as in the tools, sim/cli_common.h).
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_);
  }
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &old_, nullptr); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

 private:
  struct sigaction old_ {};
};

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

// ---- symbolic links: written through -------------------------------------------

TEST_CASE("file_io: a symbolic link is written through and stays a link", "[file_io][links]") {
  TempDir dir;
  const std::string data = dir.file("data.bin"), link = dir.file("link");
  std::ofstream(data) << "old contents";
  fs::create_symlink("data.bin", link);
  write_file_atomic(link, std::string("new"));
  CHECK(tpu::read_file_text(data) == "new");
  CHECK(link_text(link) == "data.bin");
  CHECK(dir.names() == std::vector<std::string>{"data.bin", "link"});
  // The same through an absolute link.
  const std::string abs_link = dir.file("abs");
  fs::create_symlink(data, abs_link);
  write_file_atomic(abs_link, std::string("newer"));
  CHECK(tpu::read_file_text(data) == "newer");
  CHECK(link_text(abs_link) == data);
}

TEST_CASE("file_io: relative links and chains of links end at the right file",
          "[file_io][links]") {
  TempDir dir;
  fs::create_directories(dir.file("a"));
  fs::create_directories(dir.file("b"));
  const std::string data = dir.file("b/data.bin");
  std::ofstream(data) << "old";
  // a/up -> ../b/data.bin: relative to the link's folder, not to the working one.
  fs::create_symlink("../b/data.bin", dir.file("a/up"));
  write_file_atomic(dir.file("a/up"), std::string("through ../"));
  CHECK(tpu::read_file_text(data) == "through ../");
  // first -> a/second -> ../b/data.bin: a chain of two.
  fs::create_symlink("a/second", dir.file("first"));
  fs::create_symlink("../b/data.bin", dir.file("a/second"));
  write_file_atomic(dir.file("first"), std::string("through a chain"));
  CHECK(tpu::read_file_text(data) == "through a chain");
  CHECK(link_text(dir.file("first")) == "a/second");
  CHECK(link_text(dir.file("a/second")) == "../b/data.bin");
  CHECK(link_text(dir.file("a/up")) == "../b/data.bin");
  CHECK(dir.names() == std::vector<std::string>{"a", "b", "first"});
  CHECK(names_in(dir.file("b")) == std::vector<std::string>{"data.bin"});
}

TEST_CASE("file_io: a dangling link creates the file it names", "[file_io][links]") {
  TempDir dir;
  const std::string link = dir.file("link");
  fs::create_symlink("new.bin", link);
  write_file_atomic(link, std::string("created"));
  CHECK(tpu::read_file_text(dir.file("new.bin")) == "created");
  CHECK(link_text(link) == "new.bin");
  CHECK(dir.names() == std::vector<std::string>{"link", "new.bin"});
}

TEST_CASE("file_io: a loop of links is an error and stays as it was", "[file_io][links]") {
  TempDir dir;
  const std::string a = dir.file("a"), b = dir.file("b");
  fs::create_symlink("b", a);
  fs::create_symlink("a", b);
  CHECK_THROWS_MATCHES(
      write_file_atomic(a, std::string("x")), FileError,
      Catch::Matchers::Message(a + ": cannot write: Too many levels of symbolic links"));
  CHECK(link_text(a) == "b");
  CHECK(link_text(b) == "a");
  CHECK(dir.names() == std::vector<std::string>{"a", "b"});
}

TEST_CASE("file_io: PendingFile writes through a link, its temporary beside the file",
          "[file_io][links]") {
  TempDir dir;
  fs::create_directories(dir.file("sub"));
  const std::string data = dir.file("sub/w.vcd"), link = dir.file("w.vcd");
  std::ofstream(data) << "old";
  fs::create_symlink("sub/w.vcd", link);
  tpu::PendingFile out(link, ".vcd");
  // Beside the file, so that the rename stays within its file system; the
  // suffix stays last, for a library that appends it itself.
  CHECK(out.path() == temp_path_for(dir.file("sub/w")) + ".vcd");
  CHECK_FALSE(out.special());
  write_pending(out, "new");
  out.commit();
  CHECK(tpu::read_file_text(data) == "new");
  CHECK(link_text(link) == "sub/w.vcd");
  CHECK(names_in(dir.file("sub")) == std::vector<std::string>{"w.vcd"});
  // A dangling link: the file appears at commit().
  const std::string dangling = dir.file("d.vcd");
  fs::create_symlink("sub/made.vcd", dangling);
  {
    tpu::PendingFile later(dangling);
    write_pending(later, "made");
    CHECK_FALSE(fs::exists(dir.file("sub/made.vcd")));
    later.commit();
  }
  CHECK(tpu::read_file_text(dir.file("sub/made.vcd")) == "made");
  CHECK(link_text(dangling) == "sub/made.vcd");
}

// ---- special files: written into, never replaced -----------------------------------

TEST_CASE("file_io: a FIFO receives the bytes and stays a FIFO", "[file_io][special]") {
  TempDir dir;
  const std::string fifo = make_fifo(dir, "fifo");
  const std::string bytes = pattern();
  FifoReader reader(fifo);
  write_file_atomic(fifo, bytes);
  CHECK(reader.bytes() == bytes);
  CHECK(is_fifo(fifo));
  CHECK(dir.names() == std::vector<std::string>{"fifo"});
}

// Issue 25: an input named as a FIFO that no process writes held open() and
// the tool forever. It now reads as empty (the loader then says what it
// lacks); a FIFO with a writer is read to its end.
TEST_CASE("file_io: an input FIFO without a writer reads as empty, with one as its bytes",
          "[file_io][special]") {
  TempDir dir;
  const std::string fifo = make_fifo(dir, "fifo");
  auto reading = std::async(std::launch::async, [&] { return tpu::read_file_bytes(fifo); });
  if (reading.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // Unblock the reader (a writer that closes at once), then fail.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL("read_file_bytes of a FIFO without a writer did not return");
  }
  CHECK(reading.get().empty());

  const std::string bytes = pattern(300000);  // more than a pipe holds
  ::signal(SIGPIPE, SIG_IGN);  // a reader that closed between its open and read: EPIPE, then again
  std::thread writer([&] {
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int fd = ::open(fifo.c_str(), O_WRONLY);  // waits for a reader
      if (fd < 0) return;
      std::size_t at = 0;
      while (at < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + at, std::min<std::size_t>(7000, bytes.size() - at));
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::close(fd);
      if (at == bytes.size()) return;
    }
  });
  // The writer may open after our open: retry until the bytes come (an
  // empty read means no writer was there yet).
  std::vector<std::uint8_t> got;
  for (int i = 0; i < 200 && got.empty(); ++i) {
    got = tpu::read_file_bytes(fifo);
    if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  writer.join();
  CHECK(std::string(got.begin(), got.end()) == bytes);
}

TEST_CASE("file_io: a link to a FIFO writes into the FIFO", "[file_io][special]") {
  TempDir dir;
  const std::string fifo = make_fifo(dir, "fifo"), link = dir.file("link");
  fs::create_symlink("fifo", link);
  CHECK(tpu::is_special_file(link));
  const std::string bytes = pattern(100000);
  FifoReader reader(fifo);
  write_file_atomic(link, bytes);
  CHECK(reader.bytes() == bytes);
  CHECK(is_fifo(fifo));
  CHECK(link_text(link) == "fifo");
  CHECK(dir.names() == std::vector<std::string>{"fifo", "link"});
}

TEST_CASE("file_io: a FIFO whose reader stops early ends the write quietly",
          "[file_io][special]") {
  // The reader of `| head -1` has what it wanted (file_io.h); SIGPIPE is
  // ignored as the tools ignore it.
  const IgnoreSigpipe ignore;
  TempDir dir;
  const std::string fifo = make_fifo(dir, "fifo");
  const std::string bytes = pattern(4 << 20);  // more than a pipe holds
  FifoReader reader(fifo, 10);
  CHECK_NOTHROW(write_file_atomic(fifo, bytes));
  CHECK(reader.bytes() == bytes.substr(0, 10));
  CHECK(is_fifo(fifo));
  CHECK(dir.names() == std::vector<std::string>{"fifo"});
}

TEST_CASE("file_io: /dev/full gives 'write failed' and stays the device", "[file_io][special]") {
  TempDir dir;
  const Node before("/dev/full");
  REQUIRE(before.is_char_device);
  // Through a link in the test's folder ...
  const std::string link = dir.file("full");
  fs::create_symlink("/dev/full", link);
  CHECK(tpu::is_special_file(link));
  CHECK_THROWS_MATCHES(write_file_atomic(link, std::string("x")), FileError,
                       Catch::Matchers::Message(link + ": write failed: No space left on device"));
  // ... and as an open descriptor of the process, by its /proc name.
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::string own = "/proc/self/fd/" + std::to_string(fd);
  CHECK_THROWS_MATCHES(write_file_atomic(own, std::string("x")), FileError,
                       Catch::Matchers::Message(own + ": write failed: No space left on device"));
  ::close(fd);
  CHECK(Node("/dev/full") == before);
  CHECK(link_text(link) == "/dev/full");
  CHECK(dir.names() == std::vector<std::string>{"full"});
}

TEST_CASE("file_io: /dev/null takes the bytes and stays the device", "[file_io][special]") {
  TempDir dir;
  const Node before("/dev/null");
  REQUIRE(before.is_char_device);
  const std::string link = dir.file("null");
  fs::create_symlink("/dev/null", link);
  CHECK_NOTHROW(write_file_atomic(link, pattern()));
  CHECK(Node("/dev/null") == before);
  CHECK(link_text(link) == "/dev/null");
  CHECK(dir.names() == std::vector<std::string>{"null"});
}

TEST_CASE("file_io: the process's own descriptors are written through, never replaced",
          "[file_io][special]") {
  TempDir dir;
  // A pipe, as /dev/stdout is under `| head`.
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  const std::string pipe_name = "/proc/self/fd/" + std::to_string(ends[1]);
  CHECK(tpu::is_special_file(pipe_name));
  write_file_atomic(pipe_name, std::string("through the pipe"));
  ::close(ends[1]);
  char buf[64];
  const ssize_t n = ::read(ends[0], buf, sizeof buf);
  ::close(ends[0]);
  CHECK(std::string(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0))) == "through the pipe");
  // A regular file the shell opened (`> out.txt`): the bytes follow what the
  // process wrote there before, and the file is the same file.
  const std::string out = dir.file("out.txt");
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "printed\n", 8) == 8);
  const ino_t inode = Node(out).inode;
  write_file_atomic("/dev/fd/" + std::to_string(fd), std::string("written\n"));
  REQUIRE(::write(fd, "printed again\n", 14) == 14);
  ::close(fd);
  CHECK(tpu::read_file_text(out) == "printed\nwritten\nprinted again\n");
  CHECK(Node(out).inode == inode);
  CHECK(dir.names() == std::vector<std::string>{"out.txt"});
}

TEST_CASE("file_io: PendingFile copies into a special file at commit()", "[file_io][special]") {
  TempDir dir;
  SECTION("a FIFO, through a link, with a suffix") {
    const std::string fifo = make_fifo(dir, "fifo"), link = dir.file("w.vcd");
    fs::create_symlink("fifo", link);
    const std::string bytes = pattern();
    FifoReader reader(fifo);
    std::string tmp;
    {
      tpu::PendingFile out(link, ".vcd");
      CHECK(out.special());
      tmp = out.path();
      // A regular file in the temporary folder, none beside the FIFO.
      CHECK(fs::path(tmp).parent_path() == fs::path(tpu::temp_folder()));
      CHECK(tmp.size() > 4);
      CHECK(tmp.compare(tmp.size() - 4, 4, ".vcd") == 0);
      write_pending(out, bytes);
      CHECK(dir.names() == std::vector<std::string>{"fifo", "w.vcd"});
      out.commit();
    }
    CHECK(reader.bytes() == bytes);
    CHECK(is_fifo(fifo));
    CHECK(link_text(link) == "fifo");
    CHECK_FALSE(fs::exists(tmp));
  }
  SECTION("a FIFO not committed gets nothing") {
    const std::string fifo = make_fifo(dir, "fifo");
    std::string tmp;
    {
      tpu::PendingFile out(fifo);
      tmp = out.path();
      write_pending(out, "discarded");
      CHECK(dir.names() == std::vector<std::string>{"fifo"});
    }
    CHECK_FALSE(fs::exists(tmp));
    CHECK(is_fifo(fifo));
    CHECK(dir.names() == std::vector<std::string>{"fifo"});
  }
  SECTION("/dev/null") {
    const Node before("/dev/null");
    const std::string link = dir.file("null");
    fs::create_symlink("/dev/null", link);
    std::string tmp;
    {
      tpu::PendingFile out(link);
      tmp = out.path();
      write_pending(out, pattern());
      out.commit();
    }
    CHECK_FALSE(fs::exists(tmp));
    CHECK(Node("/dev/null") == before);
    CHECK(link_text(link) == "/dev/null");
    CHECK(dir.names() == std::vector<std::string>{"null"});
  }
  SECTION("/dev/full") {
    const Node before("/dev/full");
    const std::string link = dir.file("full");
    fs::create_symlink("/dev/full", link);
    std::string tmp;
    {
      tpu::PendingFile out(link);
      tmp = out.path();
      write_pending(out, "x");
      CHECK_THROWS_MATCHES(
          out.commit(), FileError,
          Catch::Matchers::Message(link + ": write failed: No space left on device"));
    }
    CHECK_FALSE(fs::exists(tmp));
    CHECK(Node("/dev/full") == before);
    CHECK(link_text(link) == "/dev/full");
    CHECK(dir.names() == std::vector<std::string>{"full"});
  }
}

TEST_CASE("file_io: is_special_file", "[file_io][special]") {
  TempDir dir;
  std::ofstream(dir.file("regular")) << "x";
  fs::create_directories(dir.file("folder"));
  make_fifo(dir, "fifo");
  fs::create_symlink("regular", dir.file("to_regular"));
  fs::create_symlink("fifo", dir.file("to_fifo"));
  fs::create_symlink("missing", dir.file("dangling"));
  fs::create_symlink("/dev/null", dir.file("to_null"));
  CHECK_FALSE(tpu::is_special_file(dir.file("regular")));
  CHECK_FALSE(tpu::is_special_file(dir.file("folder")));
  CHECK_FALSE(tpu::is_special_file(dir.file("missing")));
  CHECK_FALSE(tpu::is_special_file(dir.file("to_regular")));
  CHECK_FALSE(tpu::is_special_file(dir.file("dangling")));
  CHECK(tpu::is_special_file(dir.file("fifo")));
  CHECK(tpu::is_special_file(dir.file("to_fifo")));
  CHECK(tpu::is_special_file(dir.file("to_null")));
  CHECK(tpu::is_special_file("/dev/stdout"));  // fd 1, whatever it is
}
