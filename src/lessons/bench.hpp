#pragma once
// `attn-trace bench`: the explainer's "naive attention holds O(n²) memory, flash holds O(n)" measured on
// this machine. Both engines run unwatched, on the fast path (engine/fast.hpp) in float32 and float64 and
// on the traced engines with an observer that asks for nothing in the half types, on seeded
// random inputs or a given one; per run: the time of the attention and of the projections, the
// attention's GFLOP/s, the process's peak resident memory, the score bytes the engine held, and its
// error against a float64 reference on a few rows. The results are plain records, so that io and
// render show them without an engine.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/mask.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"
#include "tensor/tensor.hpp"

namespace attn {

// The sizes of one random input: X (n, d_model), the context (m, d_model) when m != n, and W_q, W_k,
// W_v, W_o, with heads of d_model / heads features.
struct BenchShape {
  std::size_t n = 1024;
  std::size_t m = 1024;
  std::size_t d_model = 512;
  std::size_t heads = 8;
  std::size_t kv_heads = 8;        // divides heads
  MaskKind mask = MaskKind::none;  // none or causal
  std::uint64_t seed = 0;
};

// The random input of `shape`: X and the context uniform in [-1, 1], the weights uniform in
// [-1, 1]/√d_model (so a projection's outputs stay about as large as X), no biases, one SplitMix64 stream
// drawn in the order X, context, W_q, W_k, W_v, W_o. Self-attention when m == n, cross-attention else.
// Needs n, m >= 1, heads dividing d_model and kv_heads dividing heads.
Problem bench_problem(const BenchShape& shape);

// The bytes bench_problem's float64 values take: X, the context and the four weights.
std::size_t bench_problem_bytes(const BenchShape& shape);

// The lengths of a sweep "n=A..B": A, the powers of two strictly between A and B, and B (A alone when
// A == B). `error` says what is wrong with the text instead, and `lengths` is then empty.
struct SweepSpec {
  std::vector<std::size_t> lengths;
  std::string error;
};
SweepSpec parse_sweep(std::string_view spec);

// The query-key pairs the mask leaves, over every batch item: Σ_b Σ_i #{ j : allows(b, i, j) }.
std::size_t allowed_pairs(const Problem& p);

// The attention's floating-point work for what the mask leaves, counting a multiply-add as two:
// per head and allowed pair, q·k takes 2·d_k and p·v takes 2·d_v, so 4·n·m·d per head unmasked (d_k = d_v
// = d) and 4·d·n(n+1)/2 per head causal. The softmax's exp, max and divisions are not counted.
double attention_flops(const Problem& p);

// The float64 reference on sampled rows: for every batch item, `rows` (evenly spread from the first to
// the last query), the output computed in double from the problem's own values, independent of n²
// (keys and values are projected once, each sampled row attends every key its mask leaves).
struct RowReference {
  std::vector<std::size_t> rows;  // the sampled queries, ascending
  Tensor<double> Y;               // (B, rows, d_out) the reference outputs of those rows
};

// `count` query indices spread evenly over [0, n), first and last included (all of them when n <= count).
std::vector<std::size_t> sample_rows(std::size_t n, std::size_t count = 8);
RowReference reference_rows(const Problem& p, std::size_t count = 8);

// The largest |output - reference| over the sampled rows and every output feature; NaN when an
// output there is NaN. output (B, n, d_out).
double max_error(const RowReference& reference, const Tensor<float>& output);
double max_error(const RowReference& reference, const Tensor<double>& output);

// The median, fastest and slowest of a run's repeats, in seconds.
struct Timing {
  double median = 0;
  double min = 0;
  double max = 0;
};
Timing summarize(std::vector<double> seconds);  // needs at least one

// How the peak resident memory of one engine's runs is measured: the process's high-water mark (VmHWM of
// /proc/self/status) reset before the runs by writing 5 to /proc/self/clear_refs, or, where that is not
// permitted, the ru_maxrss of a forked child that makes one more run; none when neither works (no /proc).
enum class PeakMethod { clear_refs, fork, none };
std::string_view name_of(PeakMethod method);

// One engine at one size: measured, or refused because its estimate passes the memory limit.
struct BenchRun {
  Engine engine = Engine::naive;  // naive or flash
  std::size_t n = 0, m = 0, d_model = 0, heads = 0, kv_heads = 0;
  std::string mask;  // "none", "causal", … (the problem's mask kind)
  DType dtype = DType::float32;
  std::size_t threads = 1;          // the threads that did the work: as asked on the fast path, 1 on the traced one
  std::string kernels;              // the fast kernels' instruction set ("avx512", "avx2", "baseline"), or "traced"
  TileSize tiles;                   // flash's tile (the default for n, m)
  std::size_t estimated_bytes = 0;  // the engine's memory estimate (engine/estimate.hpp) and the float64 input
  bool refused = false;             // over the limit: not run, nothing below measured

  std::size_t repeats = 0;
  Timing total_s;       // the engine's whole call
  Timing projection_s;  // the projections: inputs in the run's dtype, q/k/v, heads, merge, output
  Timing attention_s;   // fast path: the attention stage as timed; traced: total − projections (clamped at 0)
  double attention_flops = 0;
  double attention_gflops = 0;       // attention_flops / attention_s.median / 1e9; 0 when that is 0
  std::size_t rss_before_bytes = 0;  // resident memory when the runs started (after the reset)
  std::size_t peak_rss_bytes = 0;    // the process's peak during the runs (PeakMethod)
  std::size_t score_bytes = 0;       // AttentionResult::peak_score_bytes
  double max_error = 0;              // against the float64 reference on the sampled rows
};

struct BenchResult {
  std::string input;  // "random (seed S)" or the file's name
  std::uint64_t seed = 0;
  bool random = true;
  std::size_t repeats = 3;
  std::size_t threads = 1;
  DType dtype = DType::float32;
  PeakMethod peak_method = PeakMethod::none;
  std::size_t sample_rows = 8;  // rows per batch item in the reference
  std::size_t max_memory = 0;   // the limit the runs were held to
  bool sweep = false;
  std::string cpu;             // the processor's model name (/proc/cpuinfo), or ""
  std::size_t cores = 0;       // std::thread::hardware_concurrency
  std::vector<BenchRun> runs;  // by n, then naive before flash
};

// What the measuring is doing, for a progress line: engine, n, which repeat (1-based) of how many,
// and the seconds since the bench started.
struct BenchProgress {
  Engine engine = Engine::naive;
  std::size_t n = 0;
  std::size_t repeat = 0;
  std::size_t repeats = 0;
  double elapsed_s = 0;
};
using ProgressFn = std::function<void(const BenchProgress&)>;

struct BenchRequest {
  std::vector<std::size_t> lengths;  // random inputs: one size per n (a sweep, or --n alone)
  std::optional<std::size_t> m;      // fixed key count; none: m = n
  BenchShape shape;                  // d_model, heads, kv_heads, mask, seed (n and m from above)
  const Problem* file = nullptr;     // a given input instead: `lengths` is ignored
  std::string file_name;
  bool naive = true;
  bool flash = true;
  DType dtype = DType::float32;
  std::size_t repeats = 3;
  std::size_t threads = 1;
  std::size_t max_memory = 0;  // refuse a run whose estimated_bytes is over it
  bool sweep = false;
  std::optional<PeakMethod> peak_method;  // how to measure the peak; default: clear_refs where permitted, else fork
};

// The memory one engine run of `p` is estimated to need, plus `input_bytes`: the fast path's
// (engine/fast.hpp, fast_engine_bytes) on `threads` in float32 and float64, the traced engine's
// (engine/estimate.hpp) in the half types.
std::size_t bench_estimate(const Problem& p, Engine engine, DType dtype, std::size_t input_bytes,
                           std::size_t threads = 1);

// Runs the request: per n, per engine (naive, then flash), refused or measured. The random input of a
// size is made only when one of its runs fits the limit.
BenchResult run_bench(const BenchRequest& request, const ProgressFn& progress = {});

// The processor's model name from /proc/cpuinfo ("model name"), or "" when there is none.
std::string cpu_model();

}  // namespace attn
