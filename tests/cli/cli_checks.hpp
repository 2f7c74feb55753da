#pragma once
// Checks that several CLI tests share: the error contract of docs/cli.md, a reader for the terminal
// trace (step headings and labelled table rows), the worked example's trace and its peak memory.

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "run_binary.hpp"

namespace attn::test {

inline bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// `pattern` is text with "..." standing for anything: its pieces must occur in `text` in order.
// So one fragment can name both sides of a mismatch ("/W_k: expected 4 rows...found 3") without
// pinning the wording in between.
inline bool contains_in_order(const std::string& text, const std::string& pattern) {
  std::size_t at = 0, from = 0;
  for (;;) {
    const std::size_t gap = pattern.find("...", from);
    const std::string piece = pattern.substr(from, gap == std::string::npos ? std::string::npos : gap - from);
    at = text.find(piece, at);
    if (at == std::string::npos) return false;
    at += piece.size();
    if (gap == std::string::npos) return true;
    from = gap + 3;
  }
}

// docs/cli.md, "Exit codes" and "Errors": exit 2, nothing on stdout, one stderr line that starts
// `prefix` (at least "attn-trace: error: ") and contains every one of `fragments` (each may use
// "...", see contains_in_order).
inline void check_error(const RunResult& r, const std::string& prefix, const std::vector<std::string>& fragments = {}) {
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK((!r.err.empty() && r.err.back() == '\n'));
  CHECK(starts_with(r.err, prefix));
  for (const std::string& fragment : fragments) {
    INFO("expected in stderr: " << fragment);
    CHECK(contains_in_order(r.err, fragment));
  }
}

inline void check_usage_error(const RunResult& r, const std::vector<std::string>& fragments = {}) {
  check_error(r, "attn-trace: error: ", fragments);
}

// docs/reliability.md, "Exit codes": an output that could not be written is one line
// "attn-trace: error: FILE: write failed: REASON" and exit code 3. Nothing else may be printed
// before it when `quiet_stdout` (the --json file is written before the text).
inline void check_write_error(const RunResult& r, const std::string& file,
                              const std::vector<std::string>& fragments = {}, bool quiet_stdout = true) {
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 3);
  if (quiet_stdout) CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(starts_with(r.err, "attn-trace: error: " + file + ": write failed: "));
  for (const std::string& fragment : fragments) {
    INFO("expected in stderr: " << fragment);
    CHECK(contains_in_order(r.err, fragment));
  }
}

// Exit 0 and no complaint.
inline void check_success(const RunResult& r) {
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK_FALSE(r.out.empty());
}

// `run ARGS --json OUT`, then `show OUT` must print what `run ARGS` alone printed, byte for byte.
inline void check_round_trip(const std::vector<std::string>& run_args, const std::string& out) {
  const RunResult plain = run_binary(run_args);
  std::vector<std::string> with_json = run_args;
  with_json.insert(with_json.end(), {"--json", out});
  const RunResult written = run_binary(with_json);
  const RunResult shown = run_binary({"show", out});
  INFO(plain.describe());
  INFO(written.describe());
  INFO(shown.describe());
  check_success(plain);
  check_success(written);
  check_success(shown);
  CHECK(written.out == plain.out);  // --json FILE writes the file and still prints the text
  CHECK(shown.out == plain.out);
}

// A step starts with a heading line "━━ NAME ━━━…" (the step names of docs/trace-format.md).
inline const std::string step_rule = "━━ ";

inline std::vector<std::string> step_headings(const std::string& trace) {
  std::vector<std::string> names;
  for (const std::string& line : split_lines(trace)) {
    if (!starts_with(line, step_rule)) continue;
    std::istringstream words(line.substr(step_rule.size()));
    std::string name;
    words >> name;
    names.push_back(name);
  }
  return names;
}

// The lines of one step, from its heading to the next heading.
inline std::vector<std::string> step_section(const std::string& trace, const std::string& step) {
  std::vector<std::string> section;
  bool inside = false;
  for (const std::string& line : split_lines(trace)) {
    if (starts_with(line, step_rule)) inside = starts_with(line, step_rule + step + " ");
    else if (inside) section.push_back(line);
  }
  return section;
}

inline std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Every row of a step's tables whose label (first word) is `label`, split into words.
inline std::vector<std::vector<std::string>> rows_labelled(const std::string& trace, const std::string& step,
                                                           const std::string& label) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : step_section(trace, step)) {
    std::vector<std::string> words = words_of(line);
    if (!words.empty() && words[0] == label) rows.push_back(std::move(words));
  }
  return rows;
}

// What `run --json -` writes for the worked example: the reference a written trace is compared with.
inline std::string cat_sat_trace() {
  static const std::string trace = [] {
    const RunResult r = run_binary({"run", source_path("data/the_cat_sat.json"), "--json", "-"});
    if (r.exit_code != 0 || r.out.empty()) throw std::runtime_error("run --json - failed:\n" + r.describe());
    return r.out;
  }();
  return trace;
}

// The peak resident memory of the worked example's run, in KiB: what the program takes before any
// input of size (about 4 MiB in a release build, 60 under the sanitizers). Memory bounds sit above it.
inline long baseline_rss_kib() {
  static const long rss = run_binary({"run", source_path("data/the_cat_sat.json")}).max_rss_kib;
  return rss;
}

// The commands, as `attn-trace --help` lists them under "Subcommands:" (so a new one is tested too).
inline std::vector<std::string> tool_commands() {
  const RunResult help = run_binary({"--help"}, RunOptions().set_env("COLUMNS", "1000"));
  REQUIRE(help.exit_code == 0);
  std::vector<std::string> names;
  bool in_list = false;
  for (const std::string& line : split_lines(help.out)) {
    if (line == "Subcommands:") {
      in_list = true;
      continue;
    }
    if (in_list && (line.empty() || !starts_with(line, "  "))) break;
    if (in_list) names.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  REQUIRE(names.size() >= 14);
  return names;
}

}  // namespace attn::test
