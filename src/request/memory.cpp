#include "request/memory.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <limits>

#include <fmt/format.h>

#include "engine/estimate.hpp"
#include "json/error.hpp"
#include "text/number.hpp"
#include "trace/trace.hpp"

namespace attn {

// "4G", "512M", "1.5GiB", "1000000": a size in bytes, held at `largest`. Where size_t is 32 bits (the
// explorer's WebAssembly core), 4G is one byte more than it holds: converted as it is, it would wrap to 0
// and every run would be refused, so a size past what the platform can address means "no limit" there.
std::size_t parse_size(const std::string& text, std::uint64_t largest) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  double factor = 0;
  if (unit.empty()) factor = 1;
  else if (unit == "K") factor = 1024.0;
  else if (unit == "M") factor = 1024.0 * 1024;
  else if (unit == "G") factor = 1024.0 * 1024 * 1024;
  else if (unit == "T") factor = 1024.0 * 1024 * 1024 * 1024;
  if (used == 0 || factor == 0 || !(value >= 0) || value * factor > 1e19)
    throw UsageError(fmt::format("--max-memory: expected a size such as 512M or 4G, found \"{}\"", text));
  largest = std::min<std::uint64_t>(largest, std::numeric_limits<std::size_t>::max());
  // Compared as doubles: 2^64 and 2^32 are exact there, and a double at or past them does not convert.
  const double bytes = value * factor;
  if (bytes >= static_cast<double>(largest)) return static_cast<std::size_t>(largest);
  return static_cast<std::size_t>(bytes);
}

MemoryLimit memory_limit(const TraceOptions& options) { return {parse_size(options.max_memory), options.max_memory}; }

MemoryVerdict memory_verdict(const TraceOptions& o, const RunRequest& r, const Problem& p, RunScope scope) {
  const std::size_t limit = memory_limit(o).bytes;
  const std::size_t runs = std::max<std::size_t>(scope.runs, 1);
  // pass 1: what the filter keeps of the problem's steps
  std::size_t score_steps = 0;  // of scores, scaled, bias, masked, weights
  bool shared = false;          // some of q … v_heads, head_outputs, concat, output
  for (const Step s : all_steps()) {
    if (!step_applies(s, p) || !r.filter.keeps(s)) continue;
    if (is_score_step(s)) ++score_steps;
    else shared = true;
  }
  std::size_t gradient_score_steps = 0;  // of d_weights … d_scores
  for (const Step s : gradient_steps())
    if (r.backward && step_applies(s, p) && r.filter.keeps(s) && is_score_step(s)) ++gradient_score_steps;
  // pass 2: the run as asked, the flash engine alone as asked, and the flash engine keeping the output
  RunShape asked;
  asked.naive = scope.naive;
  asked.flash = scope.flash;
  asked.scalar = scalar_bytes(r.dtype);
  asked.tile_size = r.tile_size;
  asked.score_steps_traced = scope.naive ? score_steps : 0;  // flash keeps its scores in the tiles
  asked.shared_traced = shared;
  asked.tiles_traced = scope.flash && r.filter.tiles;
  asked.json = !o.json_out.empty();
  asked.backward = r.backward;
  asked.gradient_score_steps_traced = scope.naive ? gradient_score_steps : 0;
  RunShape flash = asked;
  flash.naive = false;
  flash.flash = true;
  flash.score_steps_traced = 0;
  flash.gradient_score_steps_traced = 0;
  flash.tiles_traced = r.filter.tiles;
  RunShape lean = flash;
  lean.shared_traced = true;  // the output
  lean.tiles_traced = false;
  if (scope.reference) asked.reference_scalar = r.dtype == DType::float64 ? sizeof(long double) : 8;
  // pass 3: the estimates, and the verdict
  const Count need = estimate_memory(p, asked).total();  // of one run
  const Count flash_need = estimate_memory(p, flash).total(), lean_need = estimate_memory(p, lean).total();
  if (need <= limit / runs) return {};
  if (runs > 1) {
    const Count all = checked_mul(need, runs);
    return {fmt::format("this comparison holds {} runs of the input with every step, about {}, over --max-memory {}",
                        runs, describe_bytes(all), o.max_memory)};
  }
  // Would the flash engine alone fit, as asked or keeping only the output?
  std::string hint;
  if (scope.naive && !scope.reference && flash_need <= limit)
    hint = fmt::format("; --engine flash would need about {}", describe_bytes(flash_need));
  else if (!scope.reference && lean_need <= limit)
    hint = fmt::format("; --engine flash --steps output (no score tiles kept) would need about {}",
                       describe_bytes(lean_need));
  return {fmt::format("this run needs about {}, over --max-memory {}{}", describe_bytes(need), o.max_memory, hint)};
}

void enforce(const MemoryVerdict& verdict, const TraceOptions& o) {
  if (!verdict.fits()) throw InputError(display_name(o.file), "", verdict.refusal);
}

void check_memory(const TraceOptions& o, const RunRequest& r, const Problem& p, RunScope scope) {
  enforce(memory_verdict(o, r, p, scope), o);
}

}  // namespace attn
