#pragma once
// The process's resident memory, as bench measures it (PeakMethod, bench/bench_records.hpp): Linux's
// /proc/self/status and /proc/self/clear_refs, malloc_trim, and a forked child's ru_maxrss. The only
// place attn-trace reads /proc for memory or forks.

#include <cstddef>
#include <functional>
#include <string_view>

#include "bench/bench_records.hpp"

namespace attn {

// A field of /proc/self/status in bytes ("VmHWM:", "VmRSS:"), or 0 when it cannot be read.
std::size_t status_bytes(std::string_view key);

// Hands memory that malloc keeps after a free back to the system, so an earlier run's buffers do not
// count as resident in the next one.
void release_free_memory();

// Resets the process's peak resident memory to what it holds now ("5" to clear_refs, Linux 4.0 on);
// false where that is not permitted.
bool reset_peak();

// The peak resident memory of a forked child that does `work`: its ru_maxrss, or 0 when it failed.
std::size_t peak_of_child(const std::function<void()>& work);

// clear_refs where it works, else fork where there is a /proc, else none.
PeakMethod find_peak_method();

}  // namespace attn
