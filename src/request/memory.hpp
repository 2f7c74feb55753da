#pragma once
// --max-memory: the limit, and the verdict on a run, from the sizes alone, before anything is allocated.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "io/read.hpp"
#include "model/problem.hpp"
#include "request/trace_options.hpp"
#include "trace/record.hpp"

namespace attn {

// A size as --max-memory takes it ("4G", "512M", "1.5GiB", "1000000") in bytes, or a UsageError when it
// is not one. A size past `largest` (by default, what size_t holds) is `largest`.
std::size_t parse_size(const std::string& text, std::uint64_t largest = std::numeric_limits<std::size_t>::max());

// --max-memory as a limit, or a UsageError when it is not a size.
MemoryLimit memory_limit(const TraceOptions& options);

// What runs besides the request's engines, as far as memory goes.
struct RunScope {
  bool naive = true;       // the naive engine runs
  bool flash = false;      // the flash engine runs
  bool reference = false;  // compare's wider naive reference runs too
  std::size_t runs = 1;    // that many such runs are held at once (run --mistake: intended and mistaken)
};

// --max-memory's verdict on a run: empty when it fits, else the refusal, which says whether the flash
// engine would fit.
struct MemoryVerdict {
  std::string refusal;
  bool fits() const { return refusal.empty(); }
};

MemoryVerdict memory_verdict(const TraceOptions& options, const RunRequest& request, const Problem& problem,
                             RunScope scope);

// The verdict's refusal as an InputError naming FILE (exit 2); nothing when the run fits.
void enforce(const MemoryVerdict& verdict, const TraceOptions& options);

// memory_verdict, enforced.
void check_memory(const TraceOptions& options, const RunRequest& request, const Problem& problem, RunScope scope);

}  // namespace attn
