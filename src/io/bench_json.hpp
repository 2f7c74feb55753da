#pragma once
// `attn-trace bench --json`: the measurements as
// {"format": "attn-trace.bench", "version": 1, "input", "seed", "repeat", "threads", "dtype", "memory_method",
//  "sample_rows",
//  "machine": {"cpu", "cores"},
//  "runs": [{"engine", "n", "m", "d_model", "heads", "kv_heads", "mask", "dtype", "threads", "block_q",
//            "block_k", "refused", "estimated_bytes", "repeat", "attention_s": {"median", "min", "max"},
//            "projection_s": {…}, "total_s": {…}, "attention_flops", "attention_gflops", "rss_before_bytes",
//            "peak_rss_bytes", "score_bytes", "max_error"}, …]}
// A refused run stops at "estimated_bytes": nothing after it was measured. A number that is not finite
// (a NaN error) is written as a trace writes it: "nan", "inf" or "-inf" (json/json_number.hpp).

#include <string>

#include "bench/bench_records.hpp"
#include "bench/decode_bench.hpp"

namespace attn {

std::string bench_to_json(const BenchResult& result);

// `attn-trace bench --decode --json`:
// {"format": "attn-trace.bench-decode", "version": 1, "dtype", "heads", "kv_heads", "d_k", "d_v", "split",
//  "machine": {"cpu", "kernels", "fma_peak_gflops", "copy_bandwidth": [{"threads", "bytes", "gbytes_per_s"}]},
//  "runs": [{"cache_length", "threads", "split", "refused", "cache_bytes", "flops", "seconds": {"median", "min",
//            "max"}, "gbytes_per_s", "bandwidth_share", "gflops", "flops_per_byte"}]}
// bandwidth_share is gbytes_per_s over the copy bandwidth of as many threads.
std::string decode_bench_to_json(const DecodeBenchResult& result);

}  // namespace attn
