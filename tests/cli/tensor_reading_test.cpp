// Tensor files (.npy, .safetensors) are measured before they are read (src/io/read.hpp, check_size;
// src/formats/npy.hpp, read_npy): a regular file larger than --max-memory by its size, before a byte is
// read; a header whose values would pass it by their float64 size, before a byte of data is read; and
// what is read goes straight into the values, without a copy of the file. The files are sparse (made by
// resize_file), so a size of gigabytes costs nothing on disk; only reading them would cost memory,
// which each test measures through the child's peak resident memory (getrusage). Sizes are worked out
// by hand beside each file. Also the two messages for a file that holds nothing: empty and blank.

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A .npy preamble and header (version 1.0) for `descr` and `shape`, padded with spaces to 64 bytes
// and ended with '\n', as numpy writes it: the data follows.
std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

// A .npy of `descr` and `shape` whose data (zeros) is `data_bytes` long, sparse.
void sparse_npy(const std::string& path, const std::string& descr, const std::string& shape, std::size_t data_bytes) {
  const std::string header = npy_header(descr, shape);
  write_bytes(path, header);
  fs::resize_file(path, header.size() + data_bytes);
}

// Exit 0 and no complaint, for a command that writes its result to -o and prints nothing.
void check_quiet_success(const RunResult& r) {
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
}

constexpr std::size_t gib = std::size_t{1} << 30;
constexpr std::size_t mib = std::size_t{1} << 20;

}  // namespace

TEST_CASE("An 8 GiB q.npy among diff's dumps is refused by its size, before a byte of it is read",
          "[cli][input][limit][dumps]") {
  const TempDir dir;
  fs::create_directory(dir.path() / "dumps");
  const std::string q = dir / "dumps/q.npy";
  // A valid header, so that only the size can refuse it: 2^30 float64 values, 8 GiB of data.
  sparse_npy(q, "<f8", "(1073741824,)", 8 * gib);
  const RunResult r = run_binary({"diff", cat_sat, dir / "dumps"});
  // 8 GiB + the 64-byte header is 8.0 GiB; the limit is the default, 4G.
  check_usage_error(r, {"q.npy: the file is 8.0 GiB, over --max-memory 4G: it was not read"});
  // A reader that read up to the limit before refusing took a gigabyte and many seconds here.
  CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
  CHECK(r.took < 5s);
}

TEST_CASE("A 3 GiB .npy under --max-memory 4G is judged by its data, read from its header",
          "[cli][input][limit][dumps]") {
  const TempDir dir;
  fs::create_directory(dir.path() / "dumps");
  const std::string q = dir / "dumps/q.npy";
  SECTION("3 GiB of float32 is 6 GiB as float64: refused before its data is read") {
    // 3 GiB / 4 bytes = 805306368 values; · 8 bytes = 6 GiB.
    sparse_npy(q, "<f4", "(805306368,)", 3 * gib);
    const RunResult r = run_binary({"diff", cat_sat, dir / "dumps", "--max-memory", "4G"});
    check_usage_error(r, {"q.npy: its shape (805306368,) is 805306368 float32 values, 6.0 GiB as float64, over "
                          "--max-memory 4G: its data was not read"});
    CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
  }
  SECTION("a header of 2 float64 values before 3 GiB: refused for its trailing bytes, unread") {
    sparse_npy(q, "<f8", "(2,)", 3 * gib);
    const RunResult r = run_binary({"diff", cat_sat, dir / "dumps", "--max-memory", "4G"});
    // 3 GiB = 3221225472 bytes; the shape needs 16 of them.
    check_usage_error(r, {"q.npy: the file has 3221225472 bytes of data after the header, but the shape (2,) of "
                          "float64 needs 16: 3221225456 trailing bytes"});
    CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
  }
  SECTION("a dump that fits is read with the memory of its values, not of its file as well") {
    // (2, 3145728) float32: 24 MiB of data, 48 MiB as float64; under --max-memory 64M it is read (a
    // quarter of the limit, 16M, once refused it), then diff refuses its shape for the worked example.
    sparse_npy(q, "<f4", "(2, 3145728)", 24 * mib);
    const RunResult r = run_binary({"diff", cat_sat, dir / "dumps", "--max-memory", "64M"});
    check_usage_error(r, {"q.npy: shape (2, 3145728) does not fit step q"});
    // The values take 48 MiB; the whole file held beside them would be 24 MiB more.
    CHECK(r.max_rss_kib > baseline_rss_kib() + 40 * 1024);
    CHECK(r.max_rss_kib < baseline_rss_kib() + 56 * 1024);
  }
}

TEST_CASE("A .safetensors dump larger than --max-memory is refused by its size, unread", "[cli][input][limit][dumps]") {
  const TempDir dir;
  const std::string st = dir / "model.safetensors";
  write_bytes(st, std::string(8, '\0'));
  fs::resize_file(st, 5 * gib);
  const RunResult r = run_binary({"diff", cat_sat, st, "--max-memory", "4G"});
  check_usage_error(r, {"model.safetensors: the file is 5.0 GiB, over --max-memory 4G: it was not read"});
  CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
}

TEST_CASE("A file read after others is measured against what --max-memory leaves", "[cli][input][limit][dumps]") {
  const TempDir dir;
  fs::create_directory(dir.path() / "dumps");
  // k.npy is read first (file-name order): 2 MiB of float64, 2 MiB as values; q.npy is 3 MiB, which
  // --max-memory 4M (4 MiB) would hold alone but not after k's 2 MiB.
  sparse_npy(dir / "dumps/k.npy", "<f8", "(262144,)", 2 * mib);
  sparse_npy(dir / "dumps/q.npy", "<f8", "(393216,)", 3 * mib);
  const RunResult r = run_binary({"diff", cat_sat, dir / "dumps", "--max-memory", "4M"});
  check_usage_error(r, {"q.npy: the file is 3.0 MiB, over what --max-memory 4M leaves (2.0 MiB): it was not read"});
}

TEST_CASE("import --x reads a .npy from a FIFO as from a file, and refuses a header too large for the limit",
          "[cli][input][limit][import]") {
  const std::string models = source_path("tests/data/models/");
  const TempDir dir;
  const std::vector<std::string> args = {
      "import", models + "gpt2/model.safetensors", "--style", "gpt2", "--prefix", "transformer.h.0.attn."};
  std::vector<std::string> from_file = args;
  from_file.insert(from_file.end(), {"--x", models + "x_5x8.npy", "-o", dir / "file.json"});
  check_quiet_success(run_binary(from_file));

  const std::string fifo = dir / "x.npy";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto old_handler = std::signal(SIGPIPE, SIG_IGN);  // the writer sees EPIPE if the program stops
  const auto feed = [&](const std::string& bytes) {
    return std::thread([&fifo, bytes] {
      const auto give_up = std::chrono::steady_clock::now() + 20s;
      int fd = -1;
      while (fd < 0 && std::chrono::steady_clock::now() < give_up) {  // until the program opens it
        fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) std::this_thread::sleep_for(1ms);
      }
      if (fd < 0) return;
      ::fcntl(fd, F_SETFL, 0);  // blocking from now on
      for (std::size_t at = 0; at < bytes.size();) {
        const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::close(fd);
    });
  };
  SECTION("the same X through a FIFO makes the same input") {
    std::thread writer = feed(read_file(models + "x_5x8.npy"));
    std::vector<std::string> from_fifo = args;
    from_fifo.insert(from_fifo.end(), {"--x", fifo, "-o", dir / "fifo.json"});
    const RunResult r = run_binary(from_fifo, RunOptions().wait_at_most(30s));
    writer.join();
    check_quiet_success(r);
    // The same X, number for number (the description names the file X came from, so it differs).
    const auto x_of = [](const std::string& path) { return nlohmann::json::parse(read_file(path))["X"]; };
    CHECK(x_of(dir / "fifo.json") == x_of(dir / "file.json"));
  }
  SECTION("a header of 2^30 float64 values through a FIFO is refused before its data") {
    // 2^30 · 8 bytes = 8.0 GiB as float64; the stream's size is not known, so the header judges it.
    std::thread writer = feed(npy_header("<f8", "(1073741824, 1)") + std::string(4096, '\0'));
    std::vector<std::string> from_fifo = args;
    from_fifo.insert(from_fifo.end(), {"--x", fifo, "-o", dir / "fifo.json", "--max-memory", "1G"});
    const RunResult r = run_binary(from_fifo, RunOptions().wait_at_most(30s));
    writer.join();
    check_usage_error(r, {"x.npy: its shape (1073741824, 1) is 1073741824 float64 values, 8.0 GiB as float64, over "
                          "what --max-memory 1G leaves"});
    CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
  }
  std::signal(SIGPIPE, old_handler);
}

TEST_CASE("An empty file and a blank one are told apart", "[cli][input]") {
  const TempDir dir;
  write_bytes(dir / "empty.json", "");
  write_bytes(dir / "blank.json", std::string(2 * mib, ' ') + "\n\t\r");
  check_usage_error(run_binary({"run", dir / "empty.json"}),
                    {"empty.json: the file is empty (0 bytes): expected a JSON object"});
  // 2 MiB + 3 bytes is 2.0 MiB.
  check_usage_error(run_binary({"run", dir / "blank.json"}),
                    {"blank.json: the file is blank (2.0 MiB, all white space): expected a JSON object"});

  fs::create_directory(dir.path() / "dumps");
  write_bytes(dir / "dumps/q.json", "   \n");
  check_usage_error(run_binary({"diff", cat_sat, dir / "dumps"}),
                    {"q.json: the file is blank (4 bytes, all white space): expected nested lists of numbers"});
  fs::remove(dir / "dumps/q.json");
  write_bytes(dir / "dumps/q.npy", "");
  check_usage_error(run_binary({"diff", cat_sat, dir / "dumps"}),
                    {"q.npy: the file is empty (0 bytes): expected a .npy file"});
}
