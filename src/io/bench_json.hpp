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

namespace attn {

std::string bench_to_json(const BenchResult& result);

}  // namespace attn
