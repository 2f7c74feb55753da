// What the tool reads may not harm the machine it runs on, nor may anything from an input reach the
// terminal (docs/reliability.md, "Reading"): input is read only up to --max-memory, a trace's shapes are
// checked before anything is allocated for them, and control characters from an input, a trace or the
// command line are shown made visible. What the tool writes is tested in output_safety_test.cpp.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");

// No byte that a terminal acts on: C0 controls but the newline, DEL, and the C1 controls (UTF-8
// C2 80 to C2 9F). Returns the offset of the first one, or npos.
std::size_t first_control_byte(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7F) return i;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9F)
      return i;
  }
  return std::string::npos;
}

std::string show_bytes_near(const std::string& text, std::size_t at) {
  std::string out;
  for (std::size_t i = at > 20 ? at - 20 : 0; i < std::min(text.size(), at + 20); ++i)
    out += fmt::format("{:02x} ", static_cast<unsigned char>(text[i]));
  return out;
}

void check_no_control_bytes(const std::string& text) {
  const std::size_t at = first_control_byte(text);
  INFO("a control byte at offset " << at << ": " << (at == std::string::npos ? "" : show_bytes_near(text, at)));
  CHECK(at == std::string::npos);
}

// The controls a hostile token may carry: ESC with a colour, an OSC 52 clipboard write and a title
// change, BEL, CR, backspace, DEL, C1 CSI (U+009B) and NEL (U+0085), and a right-to-left override.
const std::vector<std::string> hostile = {"\x1b[31mRED\x1b[0m",
                                          "\x1b]52;c;ZWNobyBwd25lZA==\x07",
                                          "\x1b]0;owned\x07",
                                          "bell\a",
                                          "cr\rhide",
                                          "back\bspace",
                                          "del\x7f",
                                          "csi\xc2\x9b"
                                          "2J",
                                          "nel\xc2\x85",
                                          "rtl\xe2\x80\xae"
                                          "txt"};

std::string hostile_input() {
  nlohmann::json input = nlohmann::json::parse(read_file(source_path("data/cross_attention.json")));
  const std::size_t n = input["X"].size(), m = input["context"]["X"].size();
  input["tokens"] = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i) input["tokens"].push_back(hostile[i % hostile.size()]);
  input["context"]["tokens"] = nlohmann::json::array();
  for (std::size_t j = 0; j < m; ++j) input["context"]["tokens"].push_back(hostile[(j + n) % hostile.size()]);
  std::string description = "every one of them:";
  for (const std::string& h : hostile) description += " " + h;
  input["description"] = description;
  return input.dump();
}

}  // namespace

// --- reading within --max-memory ----------------------------------------------------------------

TEST_CASE("run - --max-memory 64M < /dev/zero stops at the first byte with exit 2 in little memory",
          "[cli][input][limit]") {
  const RunResult r = run_binary({"run", "-", "--max-memory", "64M"}, RunOptions().input_from("/dev/zero"));
  check_usage_error(r, {"<stdin>", "line 1, column 1", "0x00"});
  CHECK(r.took < 5s);
  CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
}

TEST_CASE("A stream of white space is read only up to --max-memory, then refused", "[cli][input][limit]") {
  const TempDir dir;
  const std::string fifo = dir / "spaces";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto old_handler = std::signal(SIGPIPE, SIG_IGN);  // the writer sees EPIPE when the program stops
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    int fd = -1;
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (fd < 0 && !stop && std::chrono::steady_clock::now() < give_up) {  // until the program opens it
      fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) std::this_thread::sleep_for(1ms);
    }
    if (fd < 0) return;
    const std::string spaces(1 << 16, ' ');
    while (!stop) {
      const ssize_t n = ::write(fd, spaces.data(), spaces.size());
      if (n < 0 && errno == EAGAIN) std::this_thread::sleep_for(100us);
      else if (n < 0) break;  // EPIPE: the program stopped reading
    }
    ::close(fd);
  });
  const RunResult r = run_binary({"run", fifo, "--max-memory", "16M"}, RunOptions().wait_at_most(30s));
  stop = true;
  writer.join();
  std::signal(SIGPIPE, old_handler);
  check_usage_error(r, {fifo, "--max-memory 16M", "reading stopped at"});
  // The limit holds the text and its growth (src/io/read.cpp); beside them the reader has its 64 KiB
  // chunk, and the allocator its bookkeeping: 1 MiB for both. In a release build this run measures
  // about 8 MiB above the baseline. Under ASan the allocator is the sanitizer's, which pads every block
  // and keeps freed ones in quarantine: GCC 12's measured 16.0 to 16.2 MiB above the baseline, clang
  // 14's 16.0 to 17.1, so there it has 4 MiB. A reader that kept a second copy of the text would be
  // 32 MiB above the baseline, beyond either bound.
  const long allocator_kib = sanitized_program() ? 4 * 1024 : 1024;
  CHECK(r.max_rss_kib < baseline_rss_kib() + 16 * 1024 + allocator_kib);
}

TEST_CASE("A regular file larger than --max-memory is refused before it is read", "[cli][input][limit]") {
  const TempDir dir;
  // A sparse file of 100 MiB whose start is a valid beginning: only its size can refuse it.
  const std::string big = dir / "big.json";
  write_file(big, "{\"X\": [");
  fs::resize_file(big, std::size_t{100} << 20);
  for (const std::string command : {"run", "show", "compare"}) {
    const RunResult r = run_binary({command, big, "--max-memory", "64M"});
    check_usage_error(r, {big, "100.0 MiB", "--max-memory 64M", "not read"});
    CHECK(r.max_rss_kib < baseline_rss_kib() + 8 * 1024);
  }
}

TEST_CASE("An input whose parse would pass --max-memory is refused while it is read, naming the point reached",
          "[cli][input][limit]") {
  const TempDir dir;
  // 2 million one-number rows: 8 MiB of text, over 500 MiB once parsed.
  std::string text = "{\"X\": [[0]";
  for (int i = 1; i < 2'000'000; ++i) text += ",[0]";
  text += "], \"W_q\": [[1]], \"W_k\": [[1]], \"W_v\": [[1]]}";
  write_file(dir / "rows.json", text);
  const RunResult r = run_binary({"run", dir / "rows.json", "--max-memory", "100M"});
  check_usage_error(r, {"rows.json", "--max-memory 100M", "reading stopped at"});
  CHECK(r.max_rss_kib < baseline_rss_kib() + 100 * 1024);
  // Within a generous limit the same file loads: the next check, --head, is what refuses it. (Loading
  // 2 million rows takes half a minute under the sanitizers, which check the refusal above; the release
  // run checks this.)
  if (sanitized_program()) return;
  const RunResult fits =
      run_binary({"run", dir / "rows.json", "--max-memory", "2G", "--head", "1"}, RunOptions().wait_at_most(60s));
  check_usage_error(fits, {"--head 1: the input has one head"});
}

TEST_CASE("show refuses a step whose shape claims more numbers than its data holds, before allocating",
          "[cli][input][show]") {
  const TempDir dir;
  nlohmann::ordered_json trace = nlohmann::ordered_json::parse(cat_sat_trace());
  std::size_t q = 0;
  while (trace["steps"][q]["name"] != "q") ++q;
  trace["steps"][q]["shape"] = {100000, 100000};
  write_file(dir / "claim.json", trace.dump());
  const RunResult r = run_binary({"show", dir / "claim.json"});
  check_usage_error(r, {"/steps/" + std::to_string(q) + "/shape", "\"q\"", "[100000, 100000]", "10000000000 numbers",
                        "holds 6 numbers"});
  CHECK(r.max_rss_kib < baseline_rss_kib() + 16 * 1024);
}

TEST_CASE("show refuses a step or a flash result whose shape does not fit the trace's input", "[cli][input][show]") {
  // The printer labels rows by the input's tokens: a q step of 6 rows over 3 tokens once crashed it.
  const TempDir dir;
  nlohmann::ordered_json trace = nlohmann::ordered_json::parse(cat_sat_trace());
  std::size_t q = 0;
  while (trace["steps"][q]["name"] != "q") ++q;
  SECTION("a step") {
    trace["steps"][q]["shape"] = {6, 1};
    trace["steps"][q]["data"] = {{1}, {2}, {3}, {4}, {5}, {6}};
    write_file(dir / "rows.json", trace.dump());
    check_usage_error(run_binary({"show", dir / "rows.json"}),
                      {"/steps/" + std::to_string(q) + "/shape", "\"q\"", "[3, 2]", "found [6, 1]"});
  }
  SECTION("the flash pass's lse and output") {
    const RunResult both = run_binary({"run", source_path("data/gqa.json"), "--engine", "both", "--json", "-"});
    REQUIRE(both.exit_code == 0);
    trace = nlohmann::ordered_json::parse(both.out);
    nlohmann::ordered_json wrong = trace;
    wrong["flash"]["lse"] = nlohmann::json::array({nlohmann::json::array({1.0, 2.0})});
    write_file(dir / "lse.json", wrong.dump());
    check_usage_error(run_binary({"show", dir / "lse.json"}), {"/flash/lse", "[4, 4]", "found [1, 2]"});
    wrong = trace;
    wrong["flash"]["output"] = nlohmann::json::array({nlohmann::json::array({1.0})});
    write_file(dir / "output.json", wrong.dump());
    check_usage_error(run_binary({"show", dir / "output.json"}), {"/flash/output", "found [1, 1]"});
  }
}

// --- nothing from the input drives the terminal -------------------------------------------------

TEST_CASE("Tokens, context tokens and a description full of control characters print no control byte",
          "[cli][output][controls]") {
  const TempDir dir;
  write_file(dir / "hostile.json", hostile_input());
  for (const std::string engine : {"naive", "flash", "both"}) {
    const RunResult r = run_binary({"run", dir / "hostile.json", "--engine", engine, "--color", "never"});
    check_success(r);
    check_no_control_bytes(r.out);
    CHECK(contains(r.out, "\\x1b[31m"));  // shown, not played
    CHECK(contains(r.out, "\\x1b]52;c;ZWNobyBwd25lZA==\\a"));
    CHECK(contains(r.out, "\\a"));
    CHECK(contains(r.out, "\\u009b"));
    CHECK(contains(r.out, "\\u202e"));
  }
  // With colour, the only escapes are the tool's own colour codes: ESC [ digits ; m.
  const RunResult coloured = run_binary({"run", dir / "hostile.json", "--color", "always"});
  check_success(coloured);
  std::string without_colours = coloured.out;
  const std::regex sgr("\x1b\\[[0-9;]*m");
  without_colours = std::regex_replace(without_colours, sgr, "");
  check_no_control_bytes(without_colours);
  // compare prints the tokens too.
  const RunResult compared = run_binary({"compare", dir / "hostile.json", "--color", "never"});
  CHECK(compared.exit_code == 0);
  check_no_control_bytes(compared.out);
}

TEST_CASE("The JSON trace keeps control characters in tokens exactly, and show prints them made visible",
          "[cli][output][controls]") {
  const TempDir dir;
  write_file(dir / "hostile.json", hostile_input());
  check_success(run_binary({"run", dir / "hostile.json", "--json", dir / "trace.json", "--color", "never"}));
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir / "trace.json"));
  const nlohmann::json input = nlohmann::json::parse(hostile_input());
  CHECK(trace["input"]["tokens"] == input["tokens"]);
  CHECK(trace["input"]["context"]["tokens"] == input["context"]["tokens"]);
  CHECK(trace["input"]["description"] == input["description"]);
  const RunResult shown = run_binary({"show", dir / "trace.json", "--color", "never"});
  check_success(shown);
  check_no_control_bytes(shown.out);
}

TEST_CASE("A trace whose formulas, descriptions and warnings carry control characters shows none of them",
          "[cli][output][controls]") {
  const TempDir dir;
  nlohmann::ordered_json trace = nlohmann::ordered_json::parse(cat_sat_trace());
  for (auto& step : trace["steps"]) {
    step["formula"] = "\x1b]0;title\x07" + step["formula"].get<std::string>();
    step["description"] = "\x1b[2J\x1b[H" + step["description"].get<std::string>();
  }
  trace["warnings"] = {"\x1b[8mhidden\x1b[0m\r"};
  write_file(dir / "trace.json", trace.dump());
  const RunResult r = run_binary({"show", dir / "trace.json", "--color", "never"});
  check_success(r);
  check_no_control_bytes(r.out);
  // An engine name that is none of the three is refused, and named without its controls.
  trace["config"]["engine"] = "naive\x1b[5m";
  write_file(dir / "engine.json", trace.dump());
  const RunResult engine = run_binary({"show", dir / "engine.json"});
  check_usage_error(engine, {"/config/engine", "naive\\x1b[5m"});
  check_no_control_bytes(engine.err);
}

TEST_CASE("Error lines show control characters from the input and the command line made visible",
          "[cli][output][controls]") {
  const TempDir dir;
  SECTION("an unknown key") {
    write_file(dir / "key.json",
               R"({"X": [[1]], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]], "\u001b[31mevil\u0007": 1})");
    const RunResult r = run_binary({"run", dir / "key.json"});
    check_usage_error(r, {"unknown key", "\\x1b[31mevil\\a"});
    check_no_control_bytes(r.err);
  }
  SECTION("a token of the wrong type next to hostile ones") {
    write_file(dir / "tokens.json",
               R"({"X": [[1], [2]], "tokens": ["\u001b]0;x\u0007", 5], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]]})");
    const RunResult r = run_binary({"run", dir / "tokens.json"});
    check_usage_error(r, {"/tokens/1"});
    check_no_control_bytes(r.err);
  }
  SECTION("a file name") {
    const RunResult r = run_binary({"run", dir / "no\x1b[2Jsuch\x07.json"});
    check_usage_error(r, {"no\\x1b[2Jsuch\\a.json"});
    check_no_control_bytes(r.err);
  }
  SECTION("an option value") {
    const RunResult r = run_binary({"run", cat_sat, "--steps", "q\x1b]52;c;AAAA\x07"});
    check_usage_error(r, {"--steps"});
    check_no_control_bytes(r.err);
  }
}
