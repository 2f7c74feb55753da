#include "bench/timing.hpp"

#include <algorithm>
#include <stdexcept>

namespace attn {

Timing summarize(std::vector<double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("summarize: no times");
  std::sort(seconds.begin(), seconds.end());
  const std::size_t k = seconds.size();
  const double median = k % 2 == 1 ? seconds[k / 2] : (seconds[k / 2 - 1] + seconds[k / 2]) / 2;
  return {median, seconds.front(), seconds.back()};
}

}  // namespace attn
