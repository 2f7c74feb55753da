// Decode and record: the collector that keeps what engine/decoder.hpp reports, and the check of its rows.

#include "trace/decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "engine/compare.hpp"
#include "engine/decoder.hpp"
#include "engine/naive.hpp"
#include "tensor/bits.hpp"
#include "trace/collector.hpp"

namespace attn {

CacheCost cache_cost(const Problem& p, DType dtype) {
  CacheCost c;
  c.value_bytes = is_half(dtype) ? 2 : dtype == DType::float64 ? 8 : 4;
  c.per_token = p.g * (p.d_k + p.d_v) * c.value_bytes;
  c.per_token_mha = p.h * (p.d_k + p.d_v) * c.value_bytes;
  return c;
}

namespace {

// `value` without its leading batch axis when the input has none, as every step of a trace is kept.
Tensor<double> traced(const Tensor<double>& value, bool batched) {
  if (batched) return value;
  Shape shape(value.shape().begin() + 1, value.shape().end());
  return Tensor<double>(std::move(shape), std::vector<double>(value.values().begin(), value.values().end()));
}

// Sends q … k_rot to the new token's collector, the rest to its row's.
class StepRouter final : public Observer {
 public:
  void route(TraceCollector* token, TraceCollector* attend) {
    token_ = token;
    attend_ = attend;
  }
  bool wants(Step step) const override { return to(step).wants(step); }
  void on(Step step, const Tensor<float>& value) override { to(step).on(step, value); }
  void on(Step step, const Tensor<double>& value) override { to(step).on(step, value); }

 private:
  TraceCollector& to(Step step) const { return is_decode_token_step(step) ? *token_ : *attend_; }
  TraceCollector* token_ = nullptr;
  TraceCollector* attend_ = nullptr;
};

class DecodeCollector final : public DecodeObserver {
 public:
  DecodeCollector(const Problem& p, DType dtype, DecodeRecord& record) : p_(p), dtype_(dtype), record_(record) {}

  Observer& prefill(const Problem& prompt) override {
    prefill_.emplace(std::make_shared<const Problem>(prompt), dtype_);
    return *prefill_;
  }
  Observer& step(std::size_t position, const Problem& token, const Problem& attend) override {
    position_ = position;
    token_.emplace(std::make_shared<const Problem>(token), dtype_);
    attend_.emplace(std::make_shared<const Problem>(attend), dtype_);
    router_.route(&*token_, &*attend_);
    return router_;
  }
  void on_step(const DecodeStepEvent<float>& e) override { keep(e); }
  void on_step(const DecodeStepEvent<double>& e) override { keep(e); }

  std::optional<Trace> finish_prefill() {
    if (!prefill_) return std::nullopt;
    return std::move(*prefill_).finish({});
  }

 private:
  template <class T>
  void keep(const DecodeStepEvent<T>& e) {
    DecodeStepRecord r;
    r.position = position_;
    r.cache_length = e.k_cache.dim(2);
    r.token = std::move(*token_).finish({});
    r.attend = std::move(*attend_).finish({});
    token_.reset();
    attend_.reset();
    r.k_cache = traced(cast<double>(e.k_cache), p_.batched);
    r.v_cache = traced(cast<double>(e.v_cache), p_.batched);
    if (e.split) {
      const SplitState<T>& s = *e.split;
      r.split = SplitRecord{s.chunks, traced(cast<double>(s.o), p_.batched), traced(cast<double>(s.lse), p_.batched),
                            traced(cast<double>(s.share), p_.batched), traced(cast<double>(s.merged_lse), p_.batched)};
    }
    if (e.cache.paged()) {
      PageRecord pages{e.cache.page_size(), e.cache.pool_pages(), e.cache.pages_in_use(), {}};
      for (std::size_t b = 0; b < p_.B; ++b) pages.tables.push_back(e.cache.table(b));
      r.pages = std::move(pages);
    }
    record_.steps.push_back(std::move(r));
  }

  const Problem& p_;
  DType dtype_;
  DecodeRecord& record_;
  std::optional<TraceCollector> prefill_, token_, attend_;
  StepRouter router_;
  std::size_t position_ = 0;
};

// The tiles the noise floor of compare's rule assumes for a decode: one per chunk, and one more for a sink,
// over the longest row; unsplit, the whole row is one.
TileSize check_tiles(const Problem& p, const DecodePlan& plan) {
  const std::size_t parts = std::max<std::size_t>(1, plan.split) + (p.sinks.empty() ? 0 : 1);
  return {1, std::max<std::size_t>(1, p.n / parts)};
}

bool same_bits(double a, double b) { return bit_cast<std::uint64_t>(a) == bit_cast<std::uint64_t>(b); }

template <class T>
Trace decode_and_record(const std::shared_ptr<const Problem>& problem, DType dtype, const DecodePlan& plan,
                        std::optional<std::size_t> layers) {
  const Problem& p = *problem;
  auto record = std::make_shared<DecodeRecord>();
  record->plan = plan;
  record->layers = layers ? layers : p.model.layers;
  record->context_length = p.model.context_length;
  DecodeCollector collector(p, dtype, *record);
  const DecodeResult<T> decoded = run_decode<T>(p, plan, collector, dtype);
  record->prefill = collector.finish_prefill();

  // `run`'s causal pass over the whole input, the rows each decode step must give
  NullObserver none;
  const AttentionResult<T> plain = run_naive<T>(p, none, dtype);
  for (DecodeStepRecord& s : record->steps) {
    s.bit_exact = true;
    for (std::size_t b = 0; b < p.B; ++b)
      for (std::size_t c = 0; c < p.d_out; ++c) {
        const auto ours = static_cast<double>(decoded.output(b, s.position, c));
        const auto theirs = static_cast<double>(plain.output(b, s.position, c));
        s.bit_exact = s.bit_exact && same_bits(ours, theirs);
        s.max_abs = std::max(s.max_abs, std::abs(ours - theirs));
      }
  }
  const AttentionResult<T> as_candidate{decoded.output, plain.empty_rows, 0, Tensor<T>()};
  record->check = judge_flash<T>(p, check_tiles(p, plan), plain, as_candidate, dtype);

  Trace trace;
  trace.problem = problem;
  trace.dtype = dtype;
  trace.engine = Engine::naive;
  trace.empty_rows = plain.empty_rows;
  trace.steps.push_back({Step::output, step_formula(Step::output, p), step_description(Step::output, p),
                         traced(cast<double>(decoded.output), p.batched)});
  trace.decode = std::move(record);
  return trace;
}

}  // namespace

Trace record_decode(const std::shared_ptr<const Problem>& problem, DType dtype, const DecodePlan& plan,
                    std::optional<std::size_t> layers) {
  return dtype == DType::float64 ? decode_and_record<double>(problem, dtype, plan, layers)
                                 : decode_and_record<float>(problem, dtype, plan, layers);
}

}  // namespace attn
