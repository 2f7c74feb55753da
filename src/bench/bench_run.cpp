#include "bench/bench_run.hpp"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "bench/flops.hpp"
#include "bench/machine.hpp"
#include "bench/resident_memory.hpp"
#include "bench/random_input.hpp"
#include "bench/reference.hpp"
#include "bench/timing.hpp"
#include "engine/estimate.hpp"
#include "engine/fast.hpp"
#include "engine/fast_backward.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "kernel/kernels.hpp"
#include "observe/observer.hpp"

namespace attn {

namespace {

// Keeps a result alive, so the compiler cannot drop the work that made it.
volatile double sink = 0;

// float32 and float64 run on the fast path (engine/fast.hpp) on `threads`; the half types, which round
// every stored step, on the traced engines with an observer that asks for nothing, on one thread.
template <class T>
AttentionResult<T> call_engine(const Problem& p, Engine engine, TileSize tiles, DType dtype, std::size_t threads) {
  if (fast_supports(dtype)) return run_fast<T>(p, engine, {tiles, threads});
  NullObserver nobody;
  return engine == Engine::flash ? run_flash<T>(p, nobody, tiles, dtype) : run_naive<T>(p, nobody, dtype);
}

// The traced engines' work around the attention, alone and with the same code: the inputs in the
// run's dtype, q, k and v projected and split into heads (turned, with RoPE), and head outputs of the
// right shape merged and projected out. What bench takes away from a traced engine's time.
template <class T>
void traced_projections(const Problem& p, DType dtype) {
  NullObserver nobody;
  const Inputs<T> in(p, dtype);
  const ForwardValues<T> x = walk_around_attention(p, in, Keeper<T>(nobody, dtype), [&p](const ForwardValues<T>&) {
    return AttentionOut<T>{Tensor<T>({p.B, p.h, p.n, p.d_v}), Tensor<T>()};
  });
  sink = sink + static_cast<double>(x[slot(Step::output)].values()[0]) +
         static_cast<double>(x[slot(Step::v_heads)].values()[0]);
}

// One timed run: the engine's whole call, the projections around the attention, and the attention.
template <class T>
struct TimedRun {
  AttentionResult<T> result;
  double total = 0, projections = 0, attention = 0;
};

// On the fast path each stage is timed as it runs (engine/fast.hpp: fast_project, fast_attend,
// fast_finish). The traced engines run whole; their projections are run again alone and taken away,
// which leaves the attention up to the noise of the two timings (clamped at 0).
template <class T>
TimedRun<T> timed_run(const Problem& p, Engine engine, TileSize tiles, DType dtype, std::size_t threads) {
  TimedRun<T> t;
  if (fast_supports(dtype)) {
    const FastOptions o{tiles, threads};
    const Clock::time_point t0 = Clock::now();
    fast::Projected<T> x = fast_project<T>(p, o);
    const Clock::time_point t1 = Clock::now();
    fast::Attended<T> a = fast_attend<T>(p, engine, std::move(x), o);
    const Clock::time_point t2 = Clock::now();
    t.result = fast_finish<T>(p, std::move(a), o);
    const Clock::time_point t3 = Clock::now();
    t.total = seconds(t3 - t0);
    t.attention = seconds(t2 - t1);
    t.projections = seconds(t1 - t0) + seconds(t3 - t2);
    return t;
  }
  const Clock::time_point t0 = Clock::now();
  traced_projections<T>(p, dtype);
  t.projections = seconds_since(t0);
  const Clock::time_point t1 = Clock::now();
  t.result = call_engine<T>(p, engine, tiles, dtype, threads);
  t.total = seconds_since(t1);
  t.attention = std::max(0.0, t.total - t.projections);
  return t;
}

// The runs of one engine on `p`, `repeats` times, each timed by `timed` (which sets the backward's
// seconds where there is one); the error and the score bytes of the last run; the peak resident memory
// by `method` (`once` runs in the measured child for PeakMethod::fork); the medians and the rates.
template <class T, class Timed, class Once>
void measure_runs(const Problem& p, BenchRun& run, const RowReference& reference, const BenchRequest& r,
                  PeakMethod method, Clock::time_point start, const ProgressFn& progress, const Timed& timed,
                  const Once& once) {
  std::vector<double> totals, projections, attentions, backwards;
  if (method == PeakMethod::clear_refs) {
    reset_peak();
    run.rss_before_bytes = status_bytes("VmRSS:");
  }
  for (std::size_t k = 0; k < r.repeats; ++k) {
    if (progress) progress({run.engine, p.n, k + 1, r.repeats, seconds_since(start)});
    double backward = 0;
    const TimedRun<T> t = timed(backward);
    totals.push_back(t.total);
    projections.push_back(t.projections);
    attentions.push_back(t.attention);
    backwards.push_back(backward);
    if (k + 1 == r.repeats) {
      run.score_bytes = t.result.peak_score_bytes;
      run.max_error = max_error(reference, t.result.output);
    }
  }
  if (method == PeakMethod::clear_refs) {
    run.peak_rss_bytes = status_bytes("VmHWM:");
  } else if (method == PeakMethod::fork) {
    release_free_memory();
    run.rss_before_bytes = status_bytes("VmRSS:");
    run.peak_rss_bytes = peak_of_child(once);
  }
  run.repeats = r.repeats;
  run.total_s = summarize(totals);
  run.projection_s = summarize(projections);
  run.attention_s = summarize(attentions);
  run.attention_flops = attention_flops(p);
  run.attention_gflops = run.attention_s.median > 0 ? run.attention_flops / run.attention_s.median / 1e9 : 0;
  run.projection_flops = projection_flops(p);
  run.projection_gflops = run.projection_s.median > 0 ? run.projection_flops / run.projection_s.median / 1e9 : 0;
  if (!run.backward) return;
  run.backward_s = summarize(backwards);
  run.backward_flops = 2.5 * run.attention_flops;
  run.backward_gflops = run.backward_s.median > 0 ? run.backward_flops / run.backward_s.median / 1e9 : 0;
}

// One engine's forward runs (timed_run), measured by measure_runs.
template <class T>
void measure(const Problem& p, BenchRun& run, const RowReference& reference, const BenchRequest& r, PeakMethod method,
             Clock::time_point start, const ProgressFn& progress) {
  measure_runs<T>(
      p, run, reference, r, method, start, progress,
      [&](double&) { return timed_run<T>(p, run.engine, run.tiles, r.dtype, r.threads); },
      [&] { call_engine<T>(p, run.engine, run.tiles, r.dtype, r.threads); });
}

// bench --backward, one timed run: the projections, flash's forward attention keeping Q, K, V, O and
// lse, dO from dY, the backward's attention (passes 6 to 8 of engine/fast_backward.hpp), the
// projections' gradients, the output. The two attentions are timed apart; everything else is the
// projections' time.
template <class T>
TimedRun<T> timed_backward_run(const Problem& p, const FastOptions& o, double& backward_s) {
  TimedRun<T> t;
  const Clock::time_point t0 = Clock::now();
  FastForwardKept<T> f{fast_project<T>(p, o), {}};
  const Clock::time_point t1 = Clock::now();
  f.attended = fast::attend_flash_keeping<T>(p, f.x, o);
  const Clock::time_point t2 = Clock::now();
  const Tensor<T> dY = upstream_gradient<T>(p, std::is_same_v<T, float> ? DType::float32 : DType::float64);
  const std::vector<T> dO = fast::d_head_outputs(p, dY, o);
  const Clock::time_point t3 = Clock::now();
  fast::HeadGradientRows<T> g = fast_attend_backward<T>(p, f, dO, o);
  const Clock::time_point t4 = Clock::now();
  f.x = fast::Projected<T>();  // Q, K and V are read no more
  FastBackward<T> grads;
  fast_backward_projections<T>(p, std::move(g), f.attended.concat, dY, o, grads);
  sink = sink + static_cast<double>(grads.gradients.front().second.values()[0]);
  t.result = fast_finish<T>(p, std::move(f.attended), o);
  const Clock::time_point t5 = Clock::now();
  t.total = seconds(t5 - t0);
  t.attention = seconds(t2 - t1);
  backward_s = seconds(t4 - t3);
  t.projections = seconds(t1 - t0) + seconds(t3 - t2) + seconds(t5 - t4);
  return t;
}

// bench --backward: flash's forward and backward (timed_backward_run), measured by measure_runs.
template <class T>
void measure_backward(const Problem& p, BenchRun& run, const RowReference& reference, const BenchRequest& r,
                      PeakMethod method, Clock::time_point start, const ProgressFn& progress) {
  FastOptions o{fast_tiles(), r.threads};
  o.backward_tiles = run.backward_tiles;
  measure_runs<T>(
      p, run, reference, r, method, start, progress,
      [&](double& backward) { return timed_backward_run<T>(p, o, backward); }, [&] { run_fast_backward<T>(p, o); });
}

BenchRun describe_run(const Problem& p, Engine engine, const BenchRequest& r) {
  BenchRun run;
  run.engine = engine;
  run.n = p.n;
  run.m = p.m;
  run.d_model = p.d_model;
  run.heads = p.h;
  run.kv_heads = p.g;
  run.mask = std::string(to_string(p.mask.kind));
  run.dtype = r.dtype;
  run.threads = fast_supports(r.dtype) ? r.threads : 1;
  run.tiles = fast_supports(r.dtype) ? fast_tiles() : default_tiles(p.n, p.m);
  run.kernels = fast_supports(r.dtype) ? std::string(kernel::name_of(kernel::isa())) : "traced";
  run.backward = r.backward;
  if (r.backward) run.backward_tiles = fast_backward_tiles();
  return run;
}

std::vector<Engine> engines_of(const BenchRequest& r) {
  if (r.backward) return {Engine::flash};  // the fast path's backward is flash's
  std::vector<Engine> engines;
  if (r.naive) engines.push_back(Engine::naive);
  if (r.flash) engines.push_back(Engine::flash);
  return engines;
}

}  // namespace

std::uint64_t bench_estimate(const Problem& p, Engine engine, DType dtype, std::uint64_t input_bytes,
                             std::size_t threads, bool backward) {
  if (backward) return checked_add(fast_backward_bytes(p, scalar_bytes(dtype), threads), input_bytes);
  if (fast_supports(dtype)) return checked_add(fast_engine_bytes(p, engine, scalar_bytes(dtype), threads), input_bytes);
  RunShape shape;
  shape.naive = engine == Engine::naive;
  shape.flash = engine == Engine::flash;
  shape.scalar = scalar_bytes(dtype);
  shape.tile_size = default_tiles(p.n, p.m);
  return checked_add(estimate_memory(p, shape).engine, input_bytes);
}

BenchResult run_bench(const BenchRequest& r, const ProgressFn& progress) {
  BenchResult out;
  out.random = r.file == nullptr;
  out.seed = r.shape.seed;
  out.input = out.random ? fmt::format("random (seed {})", r.shape.seed) : r.file_name;
  out.repeats = r.repeats;
  out.threads = r.threads;
  out.dtype = r.dtype;
  out.sweep = r.sweep;
  out.max_memory = r.max_memory;
  out.cpu = cpu_model();
  out.cores = std::thread::hardware_concurrency();
  out.peak_method = r.peak_method.value_or(find_peak_method());
  out.backward = r.backward;
  out.products = kernel::products_name();
  {  // the peak every GFLOP/s is a share of, on as many threads as the runs, in this run
    const FmaPeak peak = measure_fma_peak(fast_supports(r.dtype) ? r.threads : 1);
    out.fma_peak_gflops = peak.gflops;
    out.fma_peak_threads = peak.threads;
    out.fma_peak_kernels = peak.kernels;
  }
  const Clock::time_point start = Clock::now();

  // Every engine on one problem; `make` builds its values when a run fits (the sizes alone are in `sizes`).
  const auto bench_one = [&](const Problem& sizes, std::uint64_t input_bytes, const auto& make) {
    std::vector<BenchRun> runs;
    bool any = false;
    for (const Engine engine : engines_of(r)) {
      BenchRun run = describe_run(sizes, engine, r);
      run.estimated_bytes = bench_estimate(sizes, engine, r.dtype, input_bytes, r.threads, r.backward);
      run.refused = run.estimated_bytes > r.max_memory;
      any = any || !run.refused;
      runs.push_back(std::move(run));
    }
    if (any) {
      const Problem& p = make();
      const RowReference reference = reference_rows(p, out.sample_rows);
      for (BenchRun& run : runs) {
        if (run.refused) continue;
        if (r.backward && r.dtype == DType::float64)
          measure_backward<double>(p, run, reference, r, out.peak_method, start, progress);
        else if (r.backward) measure_backward<float>(p, run, reference, r, out.peak_method, start, progress);
        else if (r.dtype == DType::float64) measure<double>(p, run, reference, r, out.peak_method, start, progress);
        else measure<float>(p, run, reference, r, out.peak_method, start, progress);
      }
    }
    out.runs.insert(out.runs.end(), runs.begin(), runs.end());
  };

  if (r.file != nullptr) {
    bench_one(*r.file, 0, [&]() -> const Problem& { return *r.file; });  // already held: counted when it was read
    return out;
  }
  for (const std::size_t n : r.lengths) {
    BenchShape shape = r.shape;
    shape.n = n;
    shape.m = r.m.value_or(n);
    Problem values;
    bench_one(bench_sizes(shape), bench_problem_bytes(shape), [&]() -> const Problem& {
      values = bench_problem(shape);
      return values;
    });
  }
  return out;
}

}  // namespace attn
