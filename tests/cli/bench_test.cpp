// attn-trace bench (docs/cli.md, "bench"): the table, the sweep's growth and charts, the JSON and its keys,
// a run refused under --max-memory, and every option it cannot use refused in one line, exit 2. The
// inputs are tiny and nothing here checks how long anything took.

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "render/draw/text.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::vector<std::string> tiny = {"bench", "--n", "64", "--d-model", "32", "--heads", "2", "--repeat", "1"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("bench prints what it measured and one table row per engine", "[cli][bench]") {
  const RunResult r = run_binary(tiny);
  check_success(r);
  CHECK(contains(r.out, "input: random (seed 0); d_model 32, 2 heads of d_k 16, mask none, float32."));
  CHECK(contains(r.out, "path: the fast kernels ("));
  CHECK(contains(r.out, "machine: "));
  const std::vector<std::string> lines = split_lines(r.out);
  const auto header =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return starts_with(l, "engine"); });
  REQUIRE(header != lines.end());
  // at 80 columns: the projections' GFLOP/s and the max error are left out (--json keeps them)
  for (const char* column : {"n", "attention", "projections", "GFLOP/s", "% peak", "peak RSS", "scores held"}) {
    INFO(column);
    CHECK(contains(*header, column));
  }
  REQUIRE(header + 2 < lines.end());
  CHECK(words_of(*(header + 1)).at(0) == "naive");
  CHECK(words_of(*(header + 1)).at(1) == "64");
  CHECK(words_of(*(header + 2)).at(0) == "flash");
  CHECK_FALSE(contains(r.out, "log scale"));  // the charts are the sweep's
}

TEST_CASE("bench --json writes every run with the documented keys, and --json - only the JSON", "[cli][bench][json]") {
  const TempDir dir;
  const std::string file = dir / "bench.json";
  const RunResult r = run_binary(with(tiny, {"--threads", "4", "--mask", "causal", "--json", file}));
  check_success(r);
  CHECK(contains(r.out, "GFLOP/s"));
  const auto j = nlohmann::json::parse(read_file(file));
  CHECK(j.at("format") == "attn-trace.bench");
  CHECK(j.at("version") == 1);
  REQUIRE(j.at("runs").size() == 2);
  for (const auto& run : j.at("runs")) {
    for (const char* key :
         {"engine", "n", "m", "d_model", "heads", "kv_heads", "mask", "dtype", "threads", "attention_s", "projection_s",
          "attention_gflops", "peak_rss_bytes", "score_bytes", "max_error"}) {
      INFO(key);
      CHECK(run.contains(key));
    }
    for (const char* key : {"median", "min", "max"}) {
      CHECK(run.at("attention_s").contains(key));
      CHECK(run.at("projection_s").contains(key));
    }
    CHECK(run.at("n") == 64);
    CHECK(run.at("m") == 64);
    CHECK(run.at("heads") == 2);
    CHECK(run.at("kv_heads") == 2);
    CHECK(run.at("mask") == "causal");
    CHECK(run.at("threads") == 4);
    const std::string kernels = run.at("kernels");
    CHECK((kernels == "avx512" || kernels == "avx2" || kernels == "baseline"));
    CHECK(run.at("refused") == false);
    CHECK(run.at("max_error").get<double>() < 1e-5);
    CHECK(run.at("peak_rss_bytes").get<double>() > 0);
  }
  // every GFLOP/s also as a share of the FMA peak measured in the run, on the runs' 4 threads, in the kernels' set
  const auto& peak = j.at("machine").at("fma_peak");
  CHECK(peak.at("threads") == 4);
  CHECK(peak.at("kernels") == j.at("runs").at(0).at("kernels"));
  const double gflops = peak.at("gflops").get<double>();
  CHECK(gflops > 0);
  for (const auto& run : j.at("runs")) {
    CHECK(run.at("attention_peak_share").get<double>() == Approx(run.at("attention_gflops").get<double>() / gflops));
    // by hand: q, k, v 64 × 32 · 32 × 32 each (2 heads of 16), and the output projection 64 × 32 · 32 × 32, two
    // FLOP a multiply-add
    CHECK(run.at("projection_flops") == 2.0 * 4 * 64 * 32 * 32);
    CHECK(run.at("projection_gflops").get<double>() ==
          Approx(run.at("projection_flops").get<double>() / run.at("projection_s").at("median").get<double>() / 1e9));
    CHECK(run.at("projection_peak_share").get<double>() == Approx(run.at("projection_gflops").get<double>() / gflops));
  }
  CHECK(j.at("runs").at(0).at("engine") == "naive");
  CHECK(j.at("runs").at(0).at("score_bytes") == 2 * 64 * 64 * 4);  // one (h, n, m) float32 buffer
  CHECK(j.at("runs").at(1).at("engine") == "flash");

  // the peak is the kernels' own: ATTN_KERNELS=baseline measures the baseline's
  const RunResult narrow =
      run_binary(with(tiny, {"--engine", "flash", "--json", "-"}), RunOptions().set_env("ATTN_KERNELS", "baseline"));
  check_success(narrow);
  const auto n = nlohmann::json::parse(narrow.out);
  CHECK(n.at("runs").at(0).at("kernels") == "baseline");
  CHECK(n.at("machine").at("fma_peak").at("kernels") == "baseline");

  const RunResult only = run_binary(with(tiny, {"--engine", "flash", "--json", "-"}));
  check_success(only);
  const auto k = nlohmann::json::parse(only.out);
  REQUIRE(k.at("runs").size() == 1);
  CHECK(k.at("runs").at(0).at("engine") == "flash");
}

TEST_CASE("bench runs the half types on the traced engines on one thread, and says so", "[cli][bench][dtype]") {
  const TempDir dir;
  const std::string file = dir / "half.json";
  const RunResult r = run_binary(with(tiny, {"--dtype", "bfloat16", "--threads", "2", "--json", file}));
  check_success(r);
  CHECK(contains(r.out, "path: the traced engines, unwatched, on one thread"));
  const auto j = nlohmann::json::parse(read_file(file));
  for (const auto& run : j.at("runs")) {
    CHECK(run.at("kernels") == "traced");
    CHECK(run.at("threads") == 1);
    CHECK(run.at("score_bytes").get<std::size_t>() > 0);
  }
  CHECK(j.at("runs").at(0).at("score_bytes") == 2 * 2 * 64 * 64 * 4);  // traced naive: two (h, n, m) buffers
}

TEST_CASE("bench --sweep measures every length, with growth columns and log-scale charts", "[cli][bench][sweep]") {
  const TempDir dir;
  const std::string file = dir / "sweep.json";
  const RunResult r =
      run_binary({"bench", "--sweep", "n=32..64", "--d-model", "32", "--heads", "2", "--repeat", "1", "--json", file});
  check_success(r);
  CHECK(contains(r.out, "time ×"));
  CHECK(contains(r.out, "attention time, log scale"));
  CHECK(contains(r.out, "peak resident memory, log scale"));
  CHECK(contains(r.out, "naive: from n = 32 to 64"));
  CHECK(contains(r.out, "flash: from n = 32 to 64"));
  const auto j = nlohmann::json::parse(read_file(file));
  REQUIRE(j.at("runs").size() == 4);
  const std::vector<std::pair<std::string, int>> expected = {
      {"naive", 32}, {"flash", 32}, {"naive", 64}, {"flash", 64}};
  for (std::size_t k = 0; k < expected.size(); ++k) {
    CHECK(j.at("runs").at(k).at("engine") == expected[k].first);
    CHECK(j.at("runs").at(k).at("n") == expected[k].second);
    // the fast path times the attention itself: even this short, it is never 0 and has GFLOP/s
    CHECK(j.at("runs").at(k).at("attention_s").at("median").get<double>() > 0);
    CHECK(j.at("runs").at(k).at("attention_gflops").get<double>() > 0);
  }
}

TEST_CASE("bench lists a run over --max-memory as refused, with what it would have needed, and runs the rest",
          "[cli][bench][memory]") {
  const TempDir dir;
  const std::string file = dir / "bench.json";
  // n = 512: naive's one (2, 512, 512) float32 score buffer alone takes 2 MiB; flash needs about 1 MiB
  // with the random input.
  const RunResult r = run_binary({"bench", "--n", "512", "--d-model", "32", "--heads", "2", "--repeat", "1",
                                  "--threads", "1", "--max-memory", "1536K", "--json", file});
  check_success(r);
  CHECK(contains(r.out, "refused: needs about"));
  CHECK(contains(r.out, "over --max-memory 1.5 MiB"));
  const auto j = nlohmann::json::parse(read_file(file));
  REQUIRE(j.at("runs").size() == 2);
  const auto& naive = j.at("runs").at(0);
  CHECK(naive.at("engine") == "naive");
  CHECK(naive.at("refused") == true);
  CHECK(naive.at("estimated_bytes").get<double>() > 1536 * 1024);
  CHECK_FALSE(naive.contains("attention_s"));
  const auto& flash = j.at("runs").at(1);
  CHECK(flash.at("refused") == false);
  CHECK(flash.at("estimated_bytes").get<double>() <= 1536 * 1024);
  CHECK(flash.contains("attention_s"));
}

TEST_CASE("bench measures a given input instead of the random one", "[cli][bench]") {
  const RunResult r = run_binary({"bench", source_path("data/gqa.json"), "--repeat", "1"});
  check_success(r);
  CHECK(contains(r.out, "data/gqa.json"));
  CHECK(contains(r.out, "sharing"));
}

TEST_CASE("bench's text fits 40 columns in ASCII, leaving columns out and saying so", "[cli][bench][terminal]") {
  const RunResult r = run_binary({"bench", "--sweep", "n=16..32", "--d-model", "16", "--heads", "2", "--repeat", "1"},
                                 RunOptions().set_env("LC_ALL", "C").set_env("COLUMNS", "40"));
  check_success(r);
  for (const std::string& line : split_lines(r.out)) {
    INFO(line);
    CHECK(line.size() <= 40);
  }
  CHECK(std::all_of(r.out.begin(), r.out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
  CHECK(contains(r.out, "left out to fit 40 columns"));
}

TEST_CASE("bench refuses options it cannot use in one line, exit 2, writing nothing", "[cli][bench][errors]") {
  const TempDir dir;
  const std::string file = dir / "bench.json";
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{"--sweep", "n=5..2"}, "--sweep n=5..2: the last length (2) is less than the first (5)"},
      {{"--sweep", "n=0..8"}, "--sweep n=0..8: the lengths must be at least 1"},
      {{"--sweep", "512..1024"}, "--sweep 512..1024: expected n=FIRST..LAST"},
      {{"--sweep", "n=8..16", "--n", "8"}, "--n: --sweep gives the lengths"},
      {{"--n", "0"}, "--n 0: a bench needs at least one query"},
      {{"--n", "-4"}, "--n"},
      {{"--m", "0"}, "--m 0: a bench needs at least one key"},
      {{"--heads", "3"}, "--heads 3: the heads must split --d-model 512 evenly"},
      {{"--kv-heads", "3"}, "--kv-heads 3: must divide --heads 8"},
      {{"--repeat", "0"}, "--repeat 0"},
      {{"--mask", "sliding_window"}, "--mask"},
      {{"--engine", "fast"}, "--engine"},
      {{"--dtype", "int8"}, "--dtype"},
      {{"--max-memory", "lots"}, "--max-memory: expected a size"},
      {{source_path("data/gqa.json"), "--n", "8"}, "--n: FILE gives the input"},
      {{"--backward", "--engine", "naive"}, "--backward: the fast path's backward is flash's"},
      {{"--backward", "--dtype", "float16"}, "--backward: the fast backward runs float32 and float64, not float16"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"bench", "--json", file};
    args.insert(args.end(), c.args.begin(), c.args.end());
    check_usage_error(run_binary(args), {c.fragment});
    CHECK_FALSE(std::filesystem::exists(file));
  }
}

TEST_CASE("bench --help says what --threads spreads and shows examples", "[cli][bench]") {
  const RunResult help = run_binary({"bench", "--help"});
  check_success(help);
  CHECK(contains(help.out, "0 is every core"));
  CHECK(contains(help.out, "--sweep"));
  CHECK(contains(help.out, "Examples:"));
  CHECK(contains(help.out, "--backward"));
}

TEST_CASE(
    "bench --backward times flash's forward and backward apart, with their ratio and the share of the FMA peak "
    "measured in the run, in the text and the JSON",
    "[cli][bench][backward]") {
  const TempDir dir;
  const std::string file = dir / "backward.json";
  const RunResult r =
      run_binary(with(tiny, {"--backward", "--threads", "1", "--json", file}), RunOptions().set_env("COLUMNS", "200"));
  check_success(r);
  CHECK(contains(r.out, "FP32 FMA peak, measured in this run by a loop of"));
  const std::vector<std::string> lines = split_lines(r.out);
  const auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    const std::vector<std::string> words = words_of(l);
    return !words.empty() && words.front() == "n";
  });
  REQUIRE(header != lines.end());
  for (const char* column : {"forward", "backward", "bwd", "GFLOP/s", "% of peak", "beyond start"}) {
    INFO(column);
    CHECK(contains(*header, column));
  }
  const auto j = nlohmann::json::parse(read_file(file));
  CHECK(j.at("backward") == true);
  CHECK(j.at("machine").at("fma_peak").at("gflops").get<double>() > 0);
  CHECK(j.at("machine").at("fma_peak").at("threads") == 1);
  REQUIRE(j.at("runs").size() == 1);  // flash alone: the fast path's backward is flash's
  const auto& run = j.at("runs").at(0);
  CHECK(run.at("engine") == "flash");
  CHECK(run.at("backward") == true);
  CHECK(run.at("backward_flops").get<double>() == 2.5 * run.at("attention_flops").get<double>());
  CHECK(run.at("backward_s").at("median").get<double>() > 0);
  CHECK(run.at("backward_gflops").get<double>() > 0);
  CHECK(run.at("backward_over_forward").get<double>() ==
        Approx(run.at("backward_s").at("median").get<double>() / run.at("attention_s").at("median").get<double>()));
  CHECK(run.at("backward_peak_share").get<double>() > 0);
  CHECK(run.at("max_error").get<double>() < 1e-5);
}

TEST_CASE("bench --decode times a token against caches of each length, 1 and 2 threads, unsplit and split",
          "[cli][bench][decode]") {
  const std::vector<std::string> decode = {"bench",     "--decode", "--sweep",    "n=64..256", "--d-model", "32",
                                           "--heads",   "4",        "--kv-heads", "2",         "--repeat",  "1",
                                           "--threads", "2",        "--split-kv", "3"};
  const RunResult j = run_binary(with(decode, {"--json", "-"}));
  check_success(j);
  const nlohmann::json b = nlohmann::json::parse(j.out);
  CHECK(b["format"] == "attn-trace.bench-decode");
  CHECK(b["heads"] == 4);
  CHECK(b["kv_heads"] == 2);
  CHECK(b["d_k"] == 8);
  CHECK(b["split"] == 3);
  REQUIRE(b["machine"]["copy_bandwidth"].size() == 2);
  CHECK(b["machine"]["copy_bandwidth"][0]["threads"] == 1);
  CHECK(b["machine"]["copy_bandwidth"][1]["threads"] == 2);
  CHECK(b["machine"]["copy_bandwidth"][0]["gbytes_per_s"].get<double>() > 0);
  // 64, 128, 256 keys × (1, 2 threads) × (unsplit, split 3)
  REQUIRE(b["runs"].size() == 12);
  for (std::size_t k = 0; k < 12; ++k) {
    const nlohmann::json& run = b["runs"][k];
    const std::size_t L = std::size_t{64} << (k / 4);
    INFO(run.dump());
    CHECK(run["cache_length"] == L);
    CHECK(run["threads"] == (k % 4 < 2 ? 1 : 2));
    CHECK(run["split"] == (k % 2 == 0 ? 1 : 3));
    // every key and value of 2 heads, d_k = 8 and d_v = 8 padded to whole vectors of float32 (4 to 16 lanes)
    const std::size_t per_token = run["cache_bytes"].get<std::size_t>() / L;
    CHECK(per_token >= 2 * (8 + 8) * 4);
    CHECK(per_token <= 2 * (8 + 16) * 4);
    CHECK(run["flops"].get<double>() == 2.0 * 4 * static_cast<double>(L) * 16);
    CHECK(run["seconds"]["median"].get<double>() > 0);
    CHECK(run["gbytes_per_s"].get<double>() ==
          Approx(run["cache_bytes"].get<double>() / run["seconds"]["median"].get<double>() / 1e9));
  }
  const RunResult text = run_binary(decode, RunOptions().set_env("COLUMNS", "80"));
  check_success(text);
  CHECK(contains(text.out, "bench --decode · fast path ("));
  CHECK(contains(text.out, "memory bandwidth, 2 threads:"));
  CHECK(contains(text.out, "cache L"));
  // The verdict follows the figures the page prints (measured, so either may come): memory-bound only when a decode
  // step's FLOP per byte are under half the machine's FMA peak over its bandwidth.
  std::string joined;
  for (const std::string& line : split_lines(text.out)) joined += line + " ";
  const std::smatch m = [&] {
    std::smatch found;
    std::regex_search(joined, found,
                      std::regex(R"(does ([0-9.]+) FLOP per byte .* against [0-9.]+ GB/s: ([0-9.]+) FLOP a byte)"));
    return found;
  }();
  REQUIRE(m.size() == 3);
  const double per_byte = std::stod(m[1].str());
  const double balance = std::stod(m[2].str());
  CHECK(per_byte == 1.0);  // 2·h / (g · 4 bytes) with h = 4, g = 2
  // The balance is printed to a whole number: within half a unit of the threshold either verdict is right.
  const bool memory = contains(joined, "decoding is bound by memory, not arithmetic");
  const bool arithmetic = contains(joined, "arithmetic starts to count");
  CHECK(memory != arithmetic);
  if (per_byte < (balance - 0.5) / 2) CHECK(memory);
  if (per_byte >= (balance + 0.5) / 2) CHECK(arithmetic);
  for (const std::string& line : split_lines(text.out)) CHECK(attn::display_width(line) <= 80);

  check_usage_error(run_binary({"bench", "--decode", "--mask", "causal"}), {"--mask: bench --decode times one"});
  check_usage_error(run_binary({"bench", "--decode", "--dtype", "float16"}), {"the fast decode path runs float32"});
  check_usage_error(run_binary({"bench", "--split-kv", "2"}), {"--split-kv", "add --decode"});
  check_usage_error(run_binary({"bench", "--decode", "--split-kv", "0"}), {"--split-kv 0"});
  check_usage_error(run_binary({"bench", source_path("data/gpt_causal.json"), "--decode"}),
                    {"bench --decode times random caches"});
}

TEST_CASE("bench's float64 reference agrees with every bundled example to within 1e-5 in float32",
          "[cli][bench][reference]") {
  // The reference applies the score chain (softcap, ALiBi, sinks, dropout among it) on a few sampled rows;
  // a stage it left out shows as an error of the order of the output itself (0.95 on softcap.json, 1.04 on
  // sinks.json, 1.5 on explainer_dropout.json when it had none of them), where float32 rounding alone
  // stays near 1e-7.
  for (const std::string& file : all_data_files()) {
    INFO(file);
    const RunResult r = run_binary({"bench", file, "--repeat", "1", "--json", "-"});
    check_success(r);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(!j.at("runs").empty());
    for (const auto& run : j.at("runs")) {
      INFO(run.at("engine").get<std::string>());
      CHECK(run.at("max_error").get<double>() < 1e-5);
    }
  }
}
