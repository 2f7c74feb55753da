// The measuring of `attn-trace bench` (src/bench/) without a clock: the work it counts, the
// sweep it parses, the float64 reference on sampled rows and the errors it finds, and its JSON
// (src/io/bench_json.hpp). No test here depends on how fast anything runs.

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "bench/flops.hpp"
#include "bench/random_input.hpp"
#include "bench/reference.hpp"
#include "bench/bench_run.hpp"
#include "bench/sweep.hpp"
#include "bench/timing.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "io/bench_json.hpp"
#include "io/load.hpp"
#include "kernel/kernels.hpp"
#include "render/pages/bench.hpp"

using namespace attn;

namespace {

BenchShape tiny(std::size_t n, std::size_t m, MaskKind mask) {
  BenchShape s;
  s.n = n;
  s.m = m;
  s.d_model = 8;
  s.heads = 2;
  s.kv_heads = 2;
  s.mask = mask;
  s.seed = 7;
  return s;
}

template <class T>
Tensor<T> naive_output(const Problem& p, DType dtype = DType::float32) {
  NullObserver nobody;
  return run_naive<T>(p, nobody, dtype).output;
}

}  // namespace

TEST_CASE("The attention's work is 4·n·m·d per head unmasked and counts only the pairs a causal mask leaves",
          "[bench][flops]") {
  // n = m = 4, two heads of d_k = d_v = 4: each allowed pair costs 2·4 for q·k and 2·4 for p·v.
  const Problem none = bench_problem(tiny(4, 4, MaskKind::none));
  CHECK(allowed_pairs(none) == 16);
  CHECK(attention_flops(none) == 512.0);  // 4 · n·m·d · h = 4 · 4·4·4 · 2

  // Causal: row i sees keys 0 … i, so 1 + 2 + 3 + 4 = 10 pairs, n(n+1)/2.
  const Problem causal = bench_problem(tiny(4, 4, MaskKind::causal));
  CHECK(allowed_pairs(causal) == 10);
  CHECK(attention_flops(causal) == 320.0);  // 2 heads · 10 pairs · (8 + 8)

  // Cross-attention, 3 queries and 5 keys, causal from the top left: 1 + 2 + 3 pairs.
  const Problem cross = bench_problem(tiny(3, 5, MaskKind::causal));
  CHECK(cross.cross);
  CHECK(allowed_pairs(cross) == 6);
  CHECK(attention_flops(cross) == 192.0);
}

TEST_CASE("A padding mask's pairs are counted key by key in every batch item", "[bench][flops]") {
  const Problem p = load_problem_file(std::string(ATTN_SOURCE_DIR) + "/data/padded_batch.json");
  std::size_t pairs = 0;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t j = 0; j < p.m; ++j) pairs += p.mask.allows(b, i, j) ? 1 : 0;
  CHECK(pairs < p.B * p.n * p.m);  // the example does pad something
  CHECK(allowed_pairs(p) == pairs);
}

TEST_CASE("A sweep runs from its first length through the powers of two between to its last", "[bench][sweep]") {
  CHECK(parse_sweep("n=512..16384").lengths == std::vector<std::size_t>{512, 1024, 2048, 4096, 8192, 16384});
  CHECK(parse_sweep("n=500..2000").lengths == std::vector<std::size_t>{500, 512, 1024, 2000});
  CHECK(parse_sweep("n=32..64").lengths == std::vector<std::size_t>{32, 64});
  CHECK(parse_sweep("n=3..4").lengths == std::vector<std::size_t>{3, 4});
  CHECK(parse_sweep("n=64..64").lengths == std::vector<std::size_t>{64});
  CHECK(parse_sweep("n=1..3").lengths == std::vector<std::size_t>{1, 2, 3});
  const SweepSpec widest = parse_sweep("n=1..18446744073709551615");
  REQUIRE(widest.error.empty());
  CHECK(widest.lengths.size() == 65);  // 1, 2, 4, …, 2^63, 2^64 − 1: no power of two overflows
  CHECK(widest.lengths.back() == std::numeric_limits<std::size_t>::max());
}

TEST_CASE("A sweep that runs backwards, starts at 0 or is not n=A..B is an error that says why", "[bench][sweep]") {
  const SweepSpec backwards = parse_sweep("n=5..2");
  CHECK(backwards.lengths.empty());
  CHECK(backwards.error == "the last length (2) is less than the first (5)");
  CHECK(parse_sweep("n=0..4").error == "the lengths must be at least 1");
  for (const char* bad : {"m=1..4", "n=1-4", "n=..4", "n=1..", "n=a..4", "n=1..4x", "512..1024", "", "n=-1..4"}) {
    INFO(bad);
    CHECK(parse_sweep(bad).error == "expected n=FIRST..LAST, such as n=512..16384");
    CHECK(parse_sweep(bad).lengths.empty());
  }
}

TEST_CASE("The sampled rows spread from the first query to the last", "[bench][error]") {
  CHECK(sample_rows(100) == std::vector<std::size_t>{0, 14, 28, 42, 57, 71, 85, 99});
  CHECK(sample_rows(9) == std::vector<std::size_t>{0, 1, 2, 3, 5, 6, 7, 8});
  CHECK(sample_rows(5) == std::vector<std::size_t>{0, 1, 2, 3, 4});
  CHECK(sample_rows(5, 1) == std::vector<std::size_t>{0});
}

TEST_CASE("The float64 reference of the sampled rows is naive's float64 output on those rows", "[bench][error]") {
  // Random inputs (causal and cross), and inputs with RoPE and ALiBi, a KV cache, padding, GQA.
  std::vector<Problem> problems = {bench_problem(tiny(40, 40, MaskKind::causal)),
                                   bench_problem(tiny(20, 33, MaskKind::none))};
  for (const char* file : {"/tests/data/positions/rope_alibi_cache.json", "/data/llama_layer.json",
                           "/data/padded_batch.json", "/data/gqa.json", "/data/kv_cache.json"})
    problems.push_back(load_problem_file(std::string(ATTN_SOURCE_DIR) + file));
  for (const Problem& p : problems) {
    INFO(p.description);
    const RowReference ref = reference_rows(p);
    CHECK(ref.Y.dim(1) == std::min<std::size_t>(p.n, 8));
    CHECK(max_error(ref, naive_output<double>(p, DType::float64)) < 1e-12);
    const double float32 = max_error(ref, naive_output<float>(p));
    CHECK(float32 < 1e-4);
    NullObserver nobody;
    CHECK(max_error(ref, run_flash<float>(p, nobody, default_tiles(p.n, p.m)).output) < 1e-4);
  }
}

TEST_CASE("An error planted in a sampled row is found, whole, and a NaN there is reported as NaN", "[bench][error]") {
  const Problem p = bench_problem(tiny(50, 50, MaskKind::causal));
  const RowReference ref = reference_rows(p);
  Tensor<float> Y = naive_output<float>(p);
  const double clean = max_error(ref, Y);
  CHECK(clean < 1e-5);

  Tensor<float> planted = Y;
  planted(0, ref.rows[5], 3) += 0.25F;
  CHECK(max_error(ref, planted) == Approx(0.25).margin(1e-5));

  // A row between the samples is not looked at: the check is a sample, as the docs say.
  Tensor<float> between = Y;
  between(0, ref.rows[1] + 1, 3) += 0.25F;
  CHECK(max_error(ref, between) == clean);

  Tensor<float> nan = Y;
  nan(0, ref.rows[7], 0) = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(max_error(ref, nan)));
}

TEST_CASE("The median of the repeats is the middle one, or the mean of the middle two", "[bench]") {
  const Timing odd = summarize({0.3, 0.1, 0.2});
  CHECK(odd.median == 0.2);
  CHECK(odd.min == 0.1);
  CHECK(odd.max == 0.3);
  CHECK(summarize({4, 1, 3, 2}).median == 2.5);
  CHECK(summarize({5}).median == 5);
}

TEST_CASE("A bench of a tiny input measures both engines, and refuses the one over the memory limit", "[bench][run]") {
  BenchRequest r;
  r.lengths = {16, 32};
  r.shape = tiny(16, 16, MaskKind::causal);
  r.repeats = 2;
  r.max_memory = std::size_t{1} << 30;
  const BenchResult result = run_bench(r);
  REQUIRE(result.runs.size() == 4);
  CHECK(result.runs[0].engine == Engine::naive);
  CHECK(result.runs[1].engine == Engine::flash);
  CHECK(result.runs[2].n == 32);
  for (const BenchRun& run : result.runs) {
    CHECK_FALSE(run.refused);
    CHECK(run.repeats == 2);
    CHECK(run.mask == "causal");
    CHECK(run.max_error < 1e-5);
    CHECK(run.attention_flops == 2.0 * static_cast<double>(run.n * (run.n + 1) / 2) * 16);
    CHECK(run.attention_s.min <= run.attention_s.median);
    CHECK(run.attention_s.median <= run.attention_s.max);
    // the fast path times the attention as it runs: never the 0 that total − projections can leave
    // at a size this small
    CHECK(run.attention_s.min > 0);
    CHECK(run.projection_s.min > 0);
    CHECK(run.attention_s.min + run.projection_s.min <= run.total_s.max);
  }
  // the fast path: naive holds one (h, n, m) float buffer, turned into weights in place; flash one tile
  // per thread, S and then P in it, its rows and columns padded to the kernels' blocks
  CHECK(result.runs[2].score_bytes == 2 * 32 * 32 * sizeof(float));
  const kernel::Layout layout = kernel::layout_of(kernel::isa(), float{});
  const std::size_t rows = (32 + layout.row_block - 1) / layout.row_block * layout.row_block;
  const std::size_t cols = (32 + layout.lanes - 1) / layout.lanes * layout.lanes;
  CHECK(result.runs[3].score_bytes == rows * cols * sizeof(float));

  // Between the two engines' estimates: naive is refused, flash runs (n = 128: naive's (2, 128, 128)
  // scores outweigh flash's one tile).
  const Problem sizes = bench_problem(tiny(128, 128, MaskKind::causal));
  const std::size_t input = bench_problem_bytes(tiny(128, 128, MaskKind::causal));
  const std::size_t naive = bench_estimate(sizes, Engine::naive, DType::float32, input);
  const std::size_t flash = bench_estimate(sizes, Engine::flash, DType::float32, input);
  REQUIRE(flash < naive);
  r.lengths = {128};
  r.max_memory = flash;
  const BenchResult limited = run_bench(r);
  REQUIRE(limited.runs.size() == 2);
  CHECK(limited.runs[0].refused);
  CHECK(limited.runs[0].estimated_bytes == naive);
  CHECK(limited.runs[0].repeats == 0);
  CHECK_FALSE(limited.runs[1].refused);
}

TEST_CASE("Where clear_refs is not permitted, a forked child's ru_maxrss gives the peak", "[bench][run]") {
  BenchRequest r;
  r.lengths = {64};
  r.shape = tiny(64, 64, MaskKind::none);
  r.repeats = 1;
  r.max_memory = std::size_t{1} << 30;
  r.peak_method = PeakMethod::fork;
  const BenchResult result = run_bench(r);
  CHECK(result.peak_method == PeakMethod::fork);
  REQUIRE(result.runs.size() == 2);
  for (const BenchRun& run : result.runs) {
    CHECK(run.rss_before_bytes > 0);
    CHECK(run.peak_rss_bytes >= run.score_bytes);  // the child held at least the scores
    CHECK(run.peak_rss_bytes > 0);
  }
}

TEST_CASE("The bench JSON has the documented keys, and a refused run stops at its estimate", "[bench][json]") {
  BenchResult result;
  result.input = "random (seed 3)";
  result.seed = 3;
  result.repeats = 3;
  result.threads = 4;
  result.peak_method = PeakMethod::clear_refs;
  result.cpu = "a processor";
  result.cores = 2;
  BenchRun run;
  run.engine = Engine::flash;
  run.n = run.m = 64;
  run.d_model = 32;
  run.heads = run.kv_heads = 2;
  run.mask = "none";
  run.threads = 4;
  run.tiles = {8, 8};
  run.estimated_bytes = 1000;
  run.repeats = 3;
  run.attention_s = {0.5, 0.25, 1.0};
  run.projection_s = {0.125, 0.0625, 0.25};
  run.attention_gflops = 1.5;
  run.peak_rss_bytes = 4096;
  run.score_bytes = 512;
  run.max_error = std::numeric_limits<double>::quiet_NaN();
  BenchRun refused = run;
  refused.engine = Engine::naive;
  refused.refused = true;
  refused.estimated_bytes = 123456789;
  result.runs = {refused, run};

  const auto j = nlohmann::json::parse(bench_to_json(result));
  CHECK(j.at("format") == "attn-trace.bench");
  CHECK(j.at("version") == 1);
  CHECK(j.at("threads") == 4);
  CHECK(j.at("memory_method") == "clear_refs");
  CHECK(j.at("machine").at("cores") == 2);
  const auto& runs = j.at("runs");
  REQUIRE(runs.size() == 2);
  const auto& r0 = runs.at(0);
  CHECK(r0.at("engine") == "naive");
  CHECK(r0.at("refused") == true);
  CHECK(r0.at("estimated_bytes") == 123456789);
  CHECK_FALSE(r0.contains("attention_s"));
  const auto& r1 = runs.at(1);
  for (const char* key :
       {"engine", "n", "m", "d_model", "heads", "kv_heads", "mask", "dtype", "threads", "attention_s", "projection_s",
        "attention_gflops", "peak_rss_bytes", "score_bytes", "max_error", "refused", "estimated_bytes"}) {
    INFO(key);
    CHECK(r1.contains(key));
  }
  CHECK(r1.at("refused") == false);
  CHECK(r1.at("dtype") == "float32");
  CHECK(r1.at("block_q") == 8);
  CHECK(r1.at("attention_s").at("median") == 0.5);
  CHECK(r1.at("attention_s").at("min") == 0.25);
  CHECK(r1.at("attention_s").at("max") == 1.0);
  CHECK(r1.at("projection_s").at("median") == 0.125);
  CHECK(r1.at("attention_gflops") == 1.5);
  CHECK(r1.at("peak_rss_bytes") == 4096);
  CHECK(r1.at("score_bytes") == 512);
  CHECK(r1.at("max_error") == "nan");  // NaN is not JSON: written as a trace writes it
}

TEST_CASE("A duration keeps three figures at most and never rounds a small one to 0", "[bench][render]") {
  CHECK(bench_seconds(123.4, true) == "123 s");
  CHECK(bench_seconds(2.314, true) == "2.31 s");
  CHECK(bench_seconds(0.0412, true) == "41.2 ms");
  CHECK(bench_seconds(87.4e-6, true) == "87 µs");
  CHECK(bench_seconds(87.4e-6, false) == "87 us");
  CHECK(bench_seconds(4.2e-7, true) == "0.42 µs");
  CHECK(bench_seconds(3.25e-6, false) == "3.25 us");
}
