#include "bench/sweep.hpp"

#include <charconv>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace attn {

SweepSpec parse_sweep(std::string_view spec) {
  SweepSpec out;
  const auto fail = [&out](std::string why) {
    out.lengths.clear();
    out.error = std::move(why);
    return out;
  };
  constexpr std::string_view usage = "expected n=FIRST..LAST, such as n=512..16384";
  if (!spec.starts_with("n=")) return fail(std::string(usage));
  const std::string_view range = spec.substr(2);
  const std::size_t dots = range.find("..");
  if (dots == std::string_view::npos) return fail(std::string(usage));
  const auto whole = [](std::string_view text, std::size_t& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return !text.empty() && error == std::errc() && end == text.data() + text.size();
  };
  std::size_t first = 0, last = 0;
  if (!whole(range.substr(0, dots), first) || !whole(range.substr(dots + 2), last)) return fail(std::string(usage));
  if (first == 0) return fail("the lengths must be at least 1");
  if (last < first) return fail(fmt::format("the last length ({}) is less than the first ({})", last, first));
  out.lengths.push_back(first);
  constexpr std::size_t top = std::numeric_limits<std::size_t>::max() / 2 + 1;  // 2^63, the largest power of two
  std::size_t power = 1;
  while (power <= first && power < top) power *= 2;  // the first power of two above `first`, if there is one
  for (; power > first && power < last; power *= 2) {
    out.lengths.push_back(power);
    if (power == top) break;
  }
  if (last != first) out.lengths.push_back(last);
  return out;
}

}  // namespace attn
