#pragma once
// `attn-trace bench --decode`: one new token's attention against a KV cache, timed on the fast path
// (engine/fast_decode.hpp) as the cache grows, on 1 thread and on every thread asked, unsplit and split into
// chunks (flash-decoding); the bytes of cache each token reads over its time, beside the machine's memory
// bandwidth measured by a copy loop, and its FLOP per byte beside the FP32 FMA peak's: decoding is bound by
// memory, not arithmetic, and the figures show it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_records.hpp"
#include "model/run.hpp"

namespace attn {

struct DecodeBenchRequest {
  std::vector<std::size_t> lengths;  // the cache's lengths
  BenchShape shape;                  // d_model, heads, kv_heads, seed (n and the mask are not used)
  DType dtype = DType::float32;      // float32 or float64
  std::size_t repeats = 3;           // timed samples of each row
  std::size_t threads = 1;           // the most threads: rows run on 1 and on this many
  std::size_t split = 4;             // --split-kv: chunks of the cache in the split rows
  std::size_t max_memory = 0;        // a cache estimated over it is refused, not made
};

// The memory bandwidth a copy loop reaches: `threads` threads each std::memcpy its share of one 64 MiB buffer
// into another, the fastest of five rounds; a copy reads and writes every byte, counted twice (as STREAM's
// copy counts it).
struct CopyBandwidth {
  std::size_t threads = 0;
  std::uint64_t bytes = 0;  // of one buffer
  double gbytes_per_s = 0;  // (read + written) / s / 1e9
};
CopyBandwidth measure_copy_bandwidth(std::size_t threads);

struct DecodeBenchRow {
  std::size_t length = 0;  // the cache's tokens
  std::size_t threads = 1;
  std::size_t split = 1;
  std::uint64_t cache_bytes = 0;  // read by one decode step: every key and value (as stored, padded)
  double flops = 0;               // of one step: 2·h·L·(d_k + d_v)
  Timing seconds;                 // of one step (each sample times a batch of steps of at least 10 ms)
  bool refused = false;
  std::string refusal;
  double gbytes_per_s() const {
    return seconds.median > 0 ? static_cast<double>(cache_bytes) / seconds.median / 1e9 : 0;
  }
};

struct DecodeBenchResult {
  std::string cpu;      // bench/machine.hpp
  std::string kernels;  // the instruction set of the tile kernel
  DType dtype = DType::float32;
  std::size_t h = 0, g = 0, d_k = 0, d_v = 0;
  std::size_t split = 4;
  std::vector<CopyBandwidth> bandwidth;  // on 1 thread, and on the most threads when more than 1
  double fma_peak_gflops = 0;            // FP32, one thread (bench/machine.hpp)
  std::vector<DecodeBenchRow> rows;
};

DecodeBenchResult run_decode_bench(const DecodeBenchRequest& request);

}  // namespace attn
