// The input's values against the range of the run's dtype (io/load.hpp's check_range): a value the run
// would hold as ±inf is refused where the file holds it.

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "io/features.hpp"
#include "io/load.hpp"
#include "json/error.hpp"
#include "json/pointer.hpp"
#include "model/run.hpp"
#include "tensor/half.hpp"

namespace attn {

void check_range(const Problem& p, const std::string& file, DType dtype) {
  if (dtype == DType::float64) return;
  const double float32_max = std::numeric_limits<float>::max();
  // A value the run would hold as ±inf: past float32's largest, or rounded to inf by the half type.
  const auto beyond = [&](double x) {
    return std::fabs(x) > float32_max || (is_half(dtype) && std::isinf(stored_input<float>(dtype, x)));
  };
  const auto fail_in = [&](const std::string& pointer, double x, DType in) {
    const std::string_view advice =
        in == DType::float16 ? "(±65504): use --dtype bfloat16, float32 or float64" : "(±3.4e38): use --dtype float64";
    throw InputError(file, pointer, fmt::format("{} is beyond {}'s range {}", x, name_of(in), advice));
  };
  const auto fail = [&](const std::string& pointer, double x) { fail_in(pointer, x, dtype); };
  // A sequence (B, rows, cols), pointed at without the batch index for a 2-D input.
  const auto sequence = [&](const Tensor<double>& t, const std::string& at) {
    for (std::size_t b = 0; b < t.dim(0); ++b)
      for (std::size_t i = 0; i < t.dim(1); ++i)
        for (std::size_t c = 0; c < t.dim(2); ++c)
          if (beyond(t(b, i, c))) {
            const std::string item = p.batched ? pointer_index(at, b) : at;
            fail(pointer_index(pointer_index(item, i), c), t(b, i, c));
          }
  };
  // A weight held as in_out, pointed at as the file stores it.
  const auto weight = [&](const Tensor<double>& w, const char* key) {
    if (w.empty()) return;
    for (std::size_t r = 0; r < w.dim(0); ++r)
      for (std::size_t c = 0; c < w.dim(1); ++c)
        if (beyond(w(r, c))) {
          const auto [row, col] = p.layout == Layout::in_out ? std::pair(r, c) : std::pair(c, r);
          fail(pointer_index(pointer_index(pointer_key("", key), row), col), w(r, c));
        }
  };
  const auto bias = [&](const std::vector<double>& b, const char* key) {
    for (std::size_t i = 0; i < b.size(); ++i)
      if (beyond(b[i])) fail(pointer_index(pointer_key("", key), i), b[i]);
  };
  sequence(p.X, "/X");
  if (p.cross) sequence(p.C, "/context/X");
  if (!p.dY.empty()) sequence(p.dY, "/dY");
  weight(p.W_q, "W_q");
  weight(p.W_k, "W_k");
  weight(p.W_v, "W_v");
  weight(p.W_o, "W_o");
  bias(p.b_q, "b_q");
  bias(p.b_k, "b_k");
  bias(p.b_v, "b_v");
  bias(p.b_o, "b_o");
  // The scale stays a float32 number in a half run, as the features' numbers do (the cap).
  if (std::fabs(p.scale) > float32_max) fail_in("/scale", p.scale, DType::float32);
  check_feature_values(p, {[&](const std::string& at, double x) {
                             if (beyond(x)) fail(at, x);
                           },
                           [&](const std::string& at, double x) {
                             if (std::fabs(x) > float32_max) fail_in(at, x, DType::float32);
                           }});
}

}  // namespace attn
