#pragma once
// The terminal page of `attn-trace bench`: what was measured and how, one table row per engine and
// size, and for a sweep how each figure grew from one size to the next and log-scale charts of the
// attention's time and the peak memory against n.

#include <string>

#include "bench/bench_records.hpp"
#include "bench/decode_bench.hpp"
#include "render/draw/options.hpp"

namespace attn {

// Every line at most options.width columns; columns are left out of the table, and said so, when
// it does not fit; plain ASCII when !options.unicode.
std::string render_bench(const BenchResult& result, const RenderOptions& options);

// bench --decode: the machine's copy bandwidth and FMA peak, then one row per cache length, thread count and
// split: the time of a decode step, the cache bytes it read per second, their share of the bandwidth, and
// GFLOP/s; and what the FLOP per byte say (render/pages/bench_decode.cpp).
std::string render_decode_bench(const DecodeBenchResult& result, const RenderOptions& options);

// "1.5 GiB", "340.0 MiB", "12.0 KiB", "512 B".
std::string bench_bytes(double bytes);

// A duration with a unit that keeps it short: "2.31 s", "41.2 ms", "87 µs" ("us" without `unicode`).
std::string bench_seconds(double seconds, bool unicode);

}  // namespace attn
