#include "trace/record.hpp"

#include <utility>

#include "engine/backward.hpp"
#include "engine/compare.hpp"
#include "engine/compare_backward.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "ops/random.hpp"
#include "trace/collector.hpp"

namespace attn {

namespace {

template <class T>
Trace flash_trace(const std::shared_ptr<const Problem>& problem, const RunRequest& r) {
  TraceCollector collector(problem, r.dtype, r.filter, r.tile_size);
  if (r.backward) collector.expect_backward(r.tile_size);
  AttentionResult<T> result = r.backward ? run_flash_backward<T>(*problem, collector, r.tile_size, r.dtype)
                                         : run_flash<T>(*problem, collector, r.tile_size, r.dtype);
  return std::move(collector).finish(std::move(result.empty_rows));
}

template <class T>
Trace run_and_record(const std::shared_ptr<const Problem>& problem, const RunRequest& r) {
  if (r.engine == Engine::flash) return flash_trace<T>(problem, r);
  TraceCollector collector(problem, r.dtype, r.filter);
  if (r.backward) collector.expect_backward(std::nullopt);
  AttentionResult<T> result =
      r.backward ? run_naive_backward<T>(*problem, collector, r.dtype) : run_naive<T>(*problem, collector, r.dtype);
  Trace trace = std::move(collector).finish(std::move(result.empty_rows));
  if (r.engine == Engine::both) {
    Trace flash = flash_trace<T>(problem, r);
    trace.flash = std::move(flash.flash);
    trace.flash_backward = std::move(flash.flash_backward);
    trace.engine = Engine::both;
  }
  return trace;
}

template <class T>
Trace compare_and_record(const std::shared_ptr<const Problem>& problem, const RunRequest& r) {
  TraceCollector naive(problem, r.dtype, r.filter);
  TraceCollector flash(problem, r.dtype, r.filter, r.tile_size);
  if (r.backward) {
    naive.expect_backward(std::nullopt);
    flash.expect_backward(r.tile_size);
  }
  CompareRecord comparison = r.backward ? compare_backward<T>(*problem, r.tile_size, naive, flash, r.dtype)
                                        : compare_engines<T>(*problem, r.tile_size, naive, flash, r.dtype);
  Trace trace = std::move(naive).finish(find_empty_rows(*problem));
  Trace flash_part = std::move(flash).finish({});
  trace.flash = std::move(flash_part.flash);
  trace.flash_backward = std::move(flash_part.flash_backward);
  trace.engine = Engine::both;
  trace.compare = std::move(comparison);
  return trace;
}

}  // namespace

Problem with_grad_seed(Problem problem, std::uint64_t seed) {
  SplitMix64 random(seed);
  Tensor<double> dY({problem.B, problem.n, problem.d_out});
  for (double& x : dY.values()) x = random.standard_normal();
  problem.dY = std::move(dY);
  problem.upstream = Upstream::seeded;
  problem.grad_seed = seed;
  return problem;
}

// A half dtype runs with T = float, storing in the half type (engine/common.hpp).
Trace record_run(const std::shared_ptr<const Problem>& problem, const RunRequest& request) {
  return request.dtype == DType::float64 ? run_and_record<double>(problem, request)
                                         : run_and_record<float>(problem, request);
}

Trace record_compare(const std::shared_ptr<const Problem>& problem, const RunRequest& request) {
  return request.dtype == DType::float64 ? compare_and_record<double>(problem, request)
                                         : compare_and_record<float>(problem, request);
}

}  // namespace attn
