#pragma once
// `attn-trace bench`: the explainer's "naive attention holds O(n²) memory, flash holds O(n)" measured on
// this machine. Both engines run unwatched, on the fast path (engine/fast.hpp) in float32 and float64 and
// on the traced engines with an observer that asks for nothing in the half types, on seeded
// random inputs or a given one; per run: the time of the attention and of the projections, the
// attention's GFLOP/s, the process's peak resident memory, the score bytes the engine held, and its
// error against a float64 reference on a few rows (bench/bench_records.hpp holds what comes out).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_records.hpp"
#include "model/problem.hpp"

namespace attn {

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
  bool backward = false;  // flash's forward and backward on the fast path (float32, float64), and the FMA peak
  std::optional<PeakMethod> peak_method;  // how to measure the peak; default: clear_refs where permitted, else fork
};

// The memory one engine run of `p` is estimated to need, plus `input_bytes`: the fast path's
// (engine/fast.hpp, fast_engine_bytes) on `threads` in float32 and float64, the traced engine's
// (engine/estimate.hpp) in the half types; with `backward`, flash's forward and backward on the fast
// path (engine/fast_backward.hpp, fast_backward_bytes).
std::uint64_t bench_estimate(const Problem& p, Engine engine, DType dtype, std::uint64_t input_bytes,
                             std::size_t threads = 1, bool backward = false);

// Runs the request: per n, per engine (naive, then flash), refused or measured. The random input of a
// size is made only when one of its runs fits the limit.
BenchResult run_bench(const BenchRequest& request, const ProgressFn& progress = {});

}  // namespace attn
