#include "trace/record.hpp"

#include <utility>

#include "engine/compare.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "trace/collector.hpp"

namespace attn {

namespace {

template <class T>
Trace flash_trace(const std::shared_ptr<const Problem>& problem, const RunRequest& r) {
  TraceCollector collector(problem, r.dtype, r.filter, r.tile_size);
  AttentionResult<T> result = run_flash<T>(*problem, collector, r.tile_size, r.dtype);
  return std::move(collector).finish(std::move(result.empty_rows));
}

template <class T>
Trace run_and_record(const std::shared_ptr<const Problem>& problem, const RunRequest& r) {
  if (r.engine == Engine::flash) return flash_trace<T>(problem, r);
  TraceCollector collector(problem, r.dtype, r.filter);
  AttentionResult<T> result = run_naive<T>(*problem, collector, r.dtype);
  Trace trace = std::move(collector).finish(std::move(result.empty_rows));
  if (r.engine == Engine::both) {
    trace.flash = flash_trace<T>(problem, r).flash;
    trace.engine = Engine::both;
  }
  return trace;
}

template <class T>
Trace compare_and_record(const std::shared_ptr<const Problem>& problem, const RunRequest& r) {
  TraceCollector naive(problem, r.dtype, r.filter);
  TraceCollector flash(problem, r.dtype, r.filter, r.tile_size);
  CompareRecord comparison = compare_engines<T>(*problem, r.tile_size, naive, flash, r.dtype);
  Trace trace = std::move(naive).finish(find_empty_rows(*problem));
  trace.flash = std::move(flash).finish({}).flash;
  trace.engine = Engine::both;
  trace.compare = std::move(comparison);
  return trace;
}

}  // namespace

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
