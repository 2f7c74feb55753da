#include "check/readings.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/compare_backward.hpp"
#include "engine/rows.hpp"
#include "lessons/mistaken_backward.hpp"
#include "lessons/mistaken_forward.hpp"
#include "observe/observer.hpp"
#include "ops/attention.hpp"
#include "ops/bounds.hpp"
#include "tensor/half.hpp"
#include "text/number.hpp"
#include "trace/trace.hpp"

namespace attn {

Shape canonical_shape(Step step, const Problem& p) { return step_shape(step, p, true); }

namespace {

// A step of one head's tokens and features, (B, h, n, d): the dump may hold it tokens first.
bool is_head_step(Step s) {
  const Dim first = step_info(s).dims.front();
  return (first == Dim::head || first == Dim::kv_head) && !is_score_step(s);
}

}  // namespace

std::vector<DumpLayout> layouts_that_fit(Step step, const Problem& p, const Shape& shape) {
  const Shape canonical = canonical_shape(step, p);
  const std::vector<std::string> names = dim_names(step, true, p.layout);
  // A parameter's gradient has no batch axis to leave out: its shape is the parameter's, in the input's layout.
  if (step_info(step).parameter) {
    if (shape == canonical) return {DumpLayout{false, HeadOrder::heads_first, names}};
    return {};
  }
  // The head axis (axis 1 of the 4-axis steps) may be left out when it has extent 1: one head.
  const bool has_heads = canonical.size() == 4;
  std::vector<DumpLayout> fits;
  for (const HeadOrder order : {HeadOrder::heads_first, HeadOrder::tokens_first}) {
    if (order == HeadOrder::tokens_first && !is_head_step(step)) break;
    Shape s = canonical;
    std::vector<std::string> dims = names;
    if (order == HeadOrder::tokens_first) {
      std::swap(s[1], s[2]);
      std::swap(dims[1], dims[2]);
    }
    const std::size_t head_axis = order == HeadOrder::tokens_first ? 2 : 1;
    for (const bool batch : {true, false}) {
      if (!batch && p.B != 1) continue;
      for (const bool heads : {true, false}) {
        if (!heads && (!has_heads || canonical[1] != 1 || order == HeadOrder::tokens_first)) continue;
        Shape fit;
        std::vector<std::string> fit_dims;
        for (std::size_t a = 0; a < s.size(); ++a) {
          if ((a == 0 && !batch) || (a == head_axis && !heads)) continue;
          fit.push_back(s[a]);
          fit_dims.push_back(dims[a]);
        }
        if (fit == shape) fits.push_back({batch, order, std::move(fit_dims)});
      }
    }
  }
  return fits;
}

namespace {

// The ops a line of code folds into the step before without computing anything new of its own.
bool folds_in(Op op) {
  return op == Op::relayout || op == Op::rotation || op == Op::scale || op == Op::add_bias || op == Op::mask;
}

}  // namespace

std::vector<Step> fused_steps(Step named, const Problem& p, std::span<const Step> dumped) {
  // The step graph (observe/steps.cpp) read forward from `named`: the next step that uses the last one
  // taken must use it alone and fold in; the walk stops at any other use.
  std::vector<Step> chain;
  Step last = named;
  for (const Step s : all_steps()) {
    if (slot(s) <= slot(last) || !step_applies(s, p)) continue;
    const std::vector<Step> in = inputs_of(s, p);
    if (std::find(in.begin(), in.end(), last) == in.end()) continue;
    if (in.size() != 1 || !folds_in(step_info(s).op) || std::find(dumped.begin(), dumped.end(), s) != dumped.end())
      break;
    chain.push_back(s);
    last = s;
  }
  return chain;
}

bool fits_some_reading(Step named, const Problem& p, const Shape& shape, std::span<const Step> dumped) {
  if (!layouts_that_fit(named, p, shape).empty()) return true;
  const std::vector<Step> fused = fused_steps(named, p, dumped);
  return std::any_of(fused.begin(), fused.end(), [&](Step s) { return !layouts_that_fit(s, p, shape).empty(); });
}

std::string shape_mismatch(Step step, const Problem& p, const std::string& source, const Shape& shape) {
  const Shape c = canonical_shape(step, p);
  const std::vector<std::string> names = dim_names(step, true, p.layout);
  std::vector<std::string> parts;
  for (std::size_t a = 0; a < c.size(); ++a) parts.push_back(fmt::format("{} {}", names[a], c[a]));
  return fmt::format("{}: shape ({:n}) does not fit step {} of this input: ({}){}{}{}", source, shape,
                     step_info(step).name, fmt::join(parts, ", "),
                     p.B == 1 && !step_info(step).parameter ? ", or without the batch axis" : "",
                     c.size() == 4 && c[1] == 1 ? ", or without the head axis" : "",
                     is_head_step(step) ? ", with the head and token axes in either order" : "");
}

Tensor<double> to_canonical(Step step, const Problem& p, const DumpLayout& layout, std::span<const double> values) {
  const Shape canonical = canonical_shape(step, p);
  Tensor<double> out(canonical, std::vector<double>(values.begin(), values.end()));
  if (layout.order == HeadOrder::heads_first) return out;
  // (B, n, h, d) -> (B, h, n, d)
  const std::size_t B = canonical[0], H = canonical[1], N = canonical[2], D = canonical[3];
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < N; ++t)
      for (std::size_t hd = 0; hd < H; ++hd)
        for (std::size_t d = 0; d < D; ++d) out(b, hd, t, d) = values[((b * N + t) * H + hd) * D + d];
  return out;
}

}  // namespace attn

namespace attn::check {

namespace {

// Of two readings that both fit (h == n), the one nearer our trace.
std::size_t nearest_reading(const Problem& p, Step s, std::span<const double> values,
                            const std::vector<DumpLayout>& fits, const Tensor<double>& ours) {
  std::size_t best = 0;
  double best_error = inf;
  for (std::size_t f = 0; f < fits.size() && fits.size() > 1; ++f) {
    const Tensor<double> t = to_canonical(s, p, fits[f], values);
    double e = 0;
    for (std::size_t k = 0; k < t.size(); ++k) {
      const double diff = std::fabs(t.values()[k] - ours.values()[k]);
      e = std::max(e, std::isnan(diff) ? 0.0 : diff);
    }
    if (e < best_error) {
      best_error = e;
      best = f;
    }
  }
  return best;
}

// A large negative where the mask forbids, read as -inf from here on. S (B, h, n, m)
void read_large_negatives_as_masked(const Problem& p, Tensor<double>& S) {
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t hd = 0; hd < p.h; ++hd)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t j = 0; j < p.m; ++j) {
          double& x = S(b, hd, i, j);
          if (!p.mask.allows(b, i, j) && std::isfinite(x) && x <= masked_threshold) x = -inf;
        }
}

// One way to read a dump: as step `holds`, in `layout`, its values in the canonical shape as dumped.
struct Reading {
  Step holds;
  Fusion fusion = Fusion::none;
  DumpLayout layout;
  Tensor<double> value;
};

// `d` read as step `s` in the layout nearest ours; nothing when its shape fits no layout of `s`.
std::optional<Reading> read_as(const Problem& p, const DumpedStep& d, Step s, const Ours& full) {
  const std::vector<DumpLayout> fits = layouts_that_fit(s, p, d.shape);
  if (fits.empty()) return std::nullopt;
  const std::size_t best = nearest_reading(p, s, d.values, fits, full.exact[slot(s)]);
  return Reading{s, s == d.step ? Fusion::none : Fusion::later_step, fits[best],
                 to_canonical(s, p, fits[best], d.values)};
}

// Weights before the division, A·l = exp(S'' − max) row by row, divided by each row's sum l. Such a row
// is never negative and its largest value is exp(0) = 1 in any dtype; a row of zeros (one the mask
// empties) stays zero. Nothing when some row is not so. W (…, m)
std::optional<Tensor<double>> rows_divided_by_sums(Tensor<double> W, DType dtype) {
  const std::size_t m = W.shape().back();
  if (m == 0) return std::nullopt;
  const double slack = 4 * unit_roundoff(dtype);  // a max reduced in another order, rounded
  const std::span<double> w = W.values();
  for (std::size_t first = 0; first < w.size(); first += m) {
    const std::span<double> row = w.subspan(first, m);
    double top = 0, l = 0;
    for (const double x : row) {
      if (!(x >= 0) || !std::isfinite(x)) return std::nullopt;
      top = std::max(top, x);
      l += x;
    }
    if (l == 0) continue;
    if (std::fabs(top - 1) > slack) return std::nullopt;
    for (double& x : row) x /= l;
  }
  return W;
}

// Every reading of `d`: its named step, the steps it may hold (fused_steps), and for weights, the
// weights before the division.
std::vector<Reading> readings_of(const Problem& p, const DumpedStep& d, std::span<const Step> dumped,
                                 const Ours& full) {
  std::vector<Reading> readings;
  if (std::optional<Reading> r = read_as(p, d, d.step, full)) readings.push_back(std::move(*r));
  if (d.step == Step::weights && !readings.empty())
    if (std::optional<Tensor<double>> w = rows_divided_by_sums(readings.front().value, d.dtype))
      readings.push_back({Step::weights, Fusion::unnormalised, readings.front().layout, std::move(*w)});
  for (const Step s : fused_steps(d.step, p, dumped))
    if (std::optional<Reading> r = read_as(p, d, s, full)) readings.push_back(std::move(*r));
  return readings;
}

// How `d` is read: the first of its readings that agrees with ours from the dump's earlier steps
// (`earlier`), its named step first; when none agrees, the first its shape fits (the walk then finds
// where it differs). A shape that fits no reading is an std::invalid_argument.
Reading choose_reading(const Problem& p, const DumpedStep& d, std::span<const Step> dumped, const Ours& full,
                       const Given& earlier, DType dtype) {
  std::vector<Reading> readings = readings_of(p, d, dumped, full);
  if (readings.empty()) throw std::invalid_argument(shape_mismatch(d.step, p, d.source, d.shape));
  if (readings.size() > 1) {
    const Ours resumed = reference(p, earlier, Mistake::none, dtype);
    for (Reading& r : readings)
      if (judge_against(p, resumed, r.holds, r.value.values(), dtype).ok()) return std::move(r);
  }
  return std::move(readings.front());
}

// What a step folds into the one before it, as a fusion note names it: "1/√d_k", "the mask".
std::string folded(Step s, const Problem& p) {
  switch (step_info(s).op) {
    case Op::relayout: return is_head_step(s) ? "the split into heads" : "the merge of the heads";
    case Op::rotation: return "RoPE's rotation";
    case Op::scale: return p.scale_given ? fmt::format("the scale {}", significant_value(p.scale, 6)) : "1/√d_k";
    case Op::add_bias: return "ALiBi's bias";
    case Op::mask: return "the mask";
    case Op::projection:
    case Op::dot_products:
    case Op::softcap:
    case Op::softmax:
    case Op::weighted_sum:
    case Op::dropout:
    case Op::softmax_backward:
    case Op::input_gradient:
    case Op::weight_gradient:
    case Op::bias_gradient: break;
  }
  return std::string(step_info(s).name);
}

// The one line that says how a dump holding more than its name says was read: "scores.npy: your
// scores already include 1/√d_k: read as our `scaled`".
std::string fusion_note(const Problem& p, const DumpedStep& d, const Reading& r, std::span<const Step> dumped) {
  if (r.fusion == Fusion::unnormalised)
    return fmt::format(
        "{}: your weights are exp(S'' − max) before the division by each row's sum: read as our "
        "`weights` once each row is divided by its sum",
        d.source);
  std::vector<std::string> parts;
  for (const Step s : fused_steps(d.step, p, dumped)) {
    parts.push_back(folded(s, p));
    if (s == r.holds) break;
  }
  std::string what = parts.back();
  if (parts.size() > 1) what = fmt::format("{} and {}", fmt::join(parts.begin(), parts.end() - 1, ", "), parts.back());
  const std::string_view name = step_info(d.step).name;
  return fmt::format("{}: your {} already include{} {}: read as our `{}`", d.source, name,
                     name.ends_with('s') ? "" : "s", what, step_info(r.holds).name);
}

}  // namespace

ReadDump read_dump(const Problem& p, const std::vector<DumpedStep>& dumped, const Ours& full, DType dtype) {
  std::vector<Step> named;
  std::vector<const DumpedStep*> in_order;
  for (const DumpedStep& d : dumped) {
    named.push_back(d.step);
    in_order.push_back(&d);
  }
  // In pipeline order, so that each dump is read against ours from the dump's earlier steps.
  std::stable_sort(in_order.begin(), in_order.end(),
                   [](const DumpedStep* a, const DumpedStep* b) { return slot(a->step) < slot(b->step); });
  ReadDump r;
  for (const DumpedStep* d : in_order) {
    Reading reading = choose_reading(p, *d, named, full, r.given, dtype);
    const Step s = reading.holds;
    if (reading.fusion != Fusion::none) r.notes.push_back(fusion_note(p, *d, reading, named));
    r.as_given[slot(s)] = reading.value;
    if (s == Step::masked) read_large_negatives_as_masked(p, reading.value);
    r.given[slot(s)] = std::move(reading.value);
    r.source[slot(s)] = d;
    r.layouts[slot(s)] = reading.layout;
    r.fusion[slot(s)] = reading.fusion;
  }
  return r;
}

void add_reading_notes(const StepJudgement& j, const DumpLayout& layout, std::vector<std::string>& notes) {
  if (j.large_negatives > 0)
    notes.push_back(fmt::format("{}: {} finite value{} of -1e4 or less where the mask forbids, read as -∞", j.source,
                                j.large_negatives, j.large_negatives == 1 ? "" : "s"));
  if (layout.order == HeadOrder::tokens_first)
    notes.push_back(
        fmt::format("{}: read as ({}), the tokens before the heads", j.source, fmt::join(layout.dims, ", ")));
}

}  // namespace attn::check
