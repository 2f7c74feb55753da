#pragma once
// `attn-trace bench`'s results as plain records: what was asked of one random input, and what one
// engine at one size measured. They hold no engine, so that io (bench_json.hpp) and render (the bench
// page) show them without one.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/mask.hpp"
#include "model/run.hpp"

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

// The median, fastest and slowest of a run's repeats, in seconds.
struct Timing {
  double median = 0;
  double min = 0;
  double max = 0;
};

// How the peak resident memory of one engine's runs is measured: the process's high-water mark (VmHWM of
// /proc/self/status) reset before the runs by writing 5 to /proc/self/clear_refs, or, where that is not
// permitted, the ru_maxrss of a forked child that makes one more run; none when neither works (no /proc).
// bench/resident_memory.hpp measures it.
enum class PeakMethod { clear_refs, fork, none };
std::string_view name_of(PeakMethod method);

// One engine at one size: measured, or refused because its estimate passes the memory limit.
struct BenchRun {
  Engine engine = Engine::naive;  // naive or flash
  std::size_t n = 0, m = 0, d_model = 0, heads = 0, kv_heads = 0;
  std::string mask;  // "none", "causal", … (the problem's mask kind)
  DType dtype = DType::float32;
  std::size_t threads = 1;            // the threads that did the work: as asked on the fast path, 1 on the traced one
  std::string kernels;                // the fast kernels' instruction set ("avx512", "avx2", "baseline"), or "traced"
  TileSize tiles;                     // flash's tile (the default for n, m)
  std::uint64_t estimated_bytes = 0;  // the engine's memory estimate (engine/estimate.hpp) and the float64 input
  bool refused = false;               // over the limit: not run, nothing below measured

  std::size_t repeats = 0;
  Timing total_s;       // the engine's whole call
  Timing projection_s;  // the projections: inputs in the run's dtype, q/k/v, heads, merge, output
  Timing attention_s;   // fast path: the attention stage as timed; traced: total − projections (clamped at 0)
  double attention_flops = 0;
  double attention_gflops = 0;       // attention_flops / attention_s.median / 1e9; 0 when that is 0
  double projection_flops = 0;       // bench/flops.hpp
  double projection_gflops = 0;      // projection_flops / projection_s.median / 1e9; 0 when that is 0
  std::size_t rss_before_bytes = 0;  // resident memory when the runs started (after the reset)
  std::size_t peak_rss_bytes = 0;    // the process's peak during the runs (PeakMethod)
  std::size_t score_bytes = 0;       // AttentionResult::peak_score_bytes
  double max_error = 0;              // against the float64 reference on the sampled rows

  // bench --backward: flash's forward keeping what its backward reads, then FlashAttention-2's backward
  // (engine/fast_backward.hpp); attention_s is the forward's attention, backward_s the backward's, from
  // dO to dQ, dK and dV; projection_s all the products around them, forward and backward.
  bool backward = false;
  TileSize backward_tiles;
  Timing backward_s;
  double backward_flops = 0;   // 2.5 × attention_flops: FlashAttention's count of the backward's work
  double backward_gflops = 0;  // backward_flops / backward_s.median / 1e9
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
  std::string cpu;        // the processor's model name (/proc/cpuinfo), or ""
  std::size_t cores = 0;  // std::thread::hardware_concurrency
  bool backward = false;  // bench --backward
  // The FP32 FMA peak measured in this run (bench/machine.hpp), on the runs' threads, in the instruction set
  // the fast kernels use: what every GFLOP/s is also given as a share of.
  double fma_peak_gflops = 0;
  std::size_t fma_peak_threads = 0;
  std::string fma_peak_kernels;
  std::string products;        // what computes the matrix products (kernel::products_name)
  std::vector<BenchRun> runs;  // by n, then naive before flash
};

}  // namespace attn
