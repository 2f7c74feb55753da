#pragma once
// The clock of bench's runs, and how their repeats are summed up.

#include <chrono>
#include <vector>

#include "bench/bench_records.hpp"

namespace attn {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
inline double seconds_since(Clock::time_point start) { return seconds(Clock::now() - start); }

Timing summarize(std::vector<double> seconds);  // needs at least one

}  // namespace attn
