#include "lessons/bench.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <span>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <fmt/format.h>

#include "engine/estimate.hpp"
#include "engine/fast.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "observe/observer.hpp"
#include "ops/attention.hpp"
#include "ops/random.hpp"
#include "kernel/kernels.hpp"

namespace attn {

namespace {

// A uniform number in [-1, 1] from the top 53 bits of one draw.
double uniform_pm1(SplitMix64& rng) { return static_cast<double>(rng.next() >> 11) * 0x1p-52 - 1.0; }

Tensor<double> random_matrix(Shape shape, double scale, SplitMix64& rng) {
  Tensor<double> t(std::move(shape));
  for (double& x : t.values()) x = uniform_pm1(rng) * scale;
  return t;
}

// The sizes of bench_problem(shape) without its values: enough for the memory estimate.
Problem bench_sizes(const BenchShape& s) {
  if (s.n == 0 || s.m == 0 || s.heads == 0 || s.kv_heads == 0 || s.d_model % s.heads != 0 || s.heads % s.kv_heads != 0)
    throw std::invalid_argument(fmt::format("bench_problem: n {}, m {}, d_model {}, {} heads, {} kv heads do not fit",
                                            s.n, s.m, s.d_model, s.heads, s.kv_heads));
  Problem p;
  p.description = fmt::format("attn-trace bench: random input, seed {}", s.seed);
  p.cross = s.m != s.n;
  p.n = s.n;
  p.m = s.m;
  p.d_model = p.d_context = s.d_model;
  p.h = s.heads;
  p.g = s.kv_heads;
  p.d_k = p.d_v = s.d_model / s.heads;
  p.d_out = s.d_model;
  p.scale = 1.0 / std::sqrt(static_cast<double>(p.d_k));
  p.mask.kind = s.mask;
  p.mask.n = s.n;
  p.mask.m = s.m;
  return p;
}

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double seconds_since(Clock::time_point start) { return seconds(Clock::now() - start); }

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
  const Heads<T> heads = project_heads(p, in, nobody, dtype);
  const Tensor<T> O_h({p.B, p.h, p.n, p.d_v});
  const Tensor<T> Y = merge_and_project(p, in, O_h, nobody, dtype);
  sink = sink + static_cast<double>(Y.values()[0]) + static_cast<double>(heads.V.values()[0]);
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

// A field of /proc/self/status in bytes ("VmHWM:", "VmRSS:"), or 0 when it cannot be read.
std::size_t status_bytes(std::string_view key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(key)) continue;
    std::size_t at = key.size();
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    std::size_t kib = 0;
    std::from_chars(line.data() + at, line.data() + line.size(), kib);
    return kib * 1024;
  }
  return 0;
}

// Hands memory that malloc keeps after a free back to the system, so an earlier run's buffers do not
// count as resident in the next one.
void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// Resets the process's peak resident memory to what it holds now ("5" to clear_refs, Linux 4.0 on).
bool reset_peak() {
  release_free_memory();
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok && status_bytes("VmHWM:") > 0;
}

// The peak resident memory of a forked child that does `work`: its ru_maxrss, or 0 when it failed.
template <class Work>
std::size_t peak_of_child(const Work& work) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int code = 0;
    try {
      work();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0)
    if (errno != EINTR) return 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

PeakMethod find_peak_method() {
  if (reset_peak()) return PeakMethod::clear_refs;
  return status_bytes("VmRSS:") > 0 || ::access("/proc", F_OK) == 0 ? PeakMethod::fork : PeakMethod::none;
}

// One engine's runs on `p`, `repeats` times, each timed by timed_run; the error and
// the score bytes of the last run; the peak resident memory by `method`.
template <class T>
void measure(const Problem& p, BenchRun& run, const RowReference& reference, const BenchRequest& r, PeakMethod method,
             Clock::time_point start, const ProgressFn& progress) {
  std::vector<double> totals, projections, attentions;
  if (method == PeakMethod::clear_refs) {
    reset_peak();
    run.rss_before_bytes = status_bytes("VmRSS:");
  }
  for (std::size_t k = 0; k < r.repeats; ++k) {
    if (progress) progress({run.engine, p.n, k + 1, r.repeats, seconds_since(start)});
    const TimedRun<T> t = timed_run<T>(p, run.engine, run.tiles, r.dtype, r.threads);
    totals.push_back(t.total);
    projections.push_back(t.projections);
    attentions.push_back(t.attention);
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
    run.peak_rss_bytes = peak_of_child([&] { call_engine<T>(p, run.engine, run.tiles, r.dtype, r.threads); });
  }
  run.repeats = r.repeats;
  run.total_s = summarize(totals);
  run.projection_s = summarize(projections);
  run.attention_s = summarize(attentions);
  run.attention_flops = attention_flops(p);
  run.attention_gflops = run.attention_s.median > 0 ? run.attention_flops / run.attention_s.median / 1e9 : 0;
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
  return run;
}

std::vector<Engine> engines_of(const BenchRequest& r) {
  std::vector<Engine> engines;
  if (r.naive) engines.push_back(Engine::naive);
  if (r.flash) engines.push_back(Engine::flash);
  return engines;
}

}  // namespace

std::string_view name_of(PeakMethod method) {
  switch (method) {
    case PeakMethod::clear_refs: return "clear_refs";
    case PeakMethod::fork: return "fork";
    case PeakMethod::none: return "none";
  }
  return "?";
}

Problem bench_problem(const BenchShape& shape) {
  Problem p = bench_sizes(shape);
  SplitMix64 rng(shape.seed);
  const double shrink = 1.0 / std::sqrt(static_cast<double>(shape.d_model));
  p.X = random_matrix({1, p.n, p.d_model}, 1.0, rng);
  p.C = p.cross ? random_matrix({1, p.m, p.d_model}, 1.0, rng) : p.X;
  p.W_q = random_matrix({p.d_model, p.h * p.d_k}, shrink, rng);
  p.W_k = random_matrix({p.d_model, p.g * p.d_k}, shrink, rng);
  p.W_v = random_matrix({p.d_model, p.g * p.d_v}, shrink, rng);
  p.W_o = random_matrix({p.h * p.d_v, p.d_out}, shrink, rng);
  return p;
}

std::size_t bench_problem_bytes(const BenchShape& s) {
  const std::size_t kv = checked_mul(s.kv_heads, s.heads == 0 ? 0 : s.d_model / s.heads);
  std::size_t values = product(checked_add(s.n, s.m), s.d_model);  // X and the context
  values = checked_add(values, product(2, s.d_model, s.d_model));  // W_q, W_o
  values = checked_add(values, product(2, s.d_model, kv));         // W_k, W_v
  return checked_mul(values, sizeof(double));
}

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

std::size_t allowed_pairs(const Problem& p) {
  std::size_t pairs = 0;
  const bool banded =
      p.mask.kind == MaskKind::none || p.mask.kind == MaskKind::causal || p.mask.kind == MaskKind::sliding_window;
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t i = 0; i < p.n; ++i) {
      const auto [first, last] = p.mask.band(i);
      if (banded) {
        pairs += last - first;  // every key in the band is allowed
        continue;
      }
      for (std::size_t j = first; j < last; ++j) pairs += p.mask.allows(b, i, j) ? 1 : 0;
    }
  return pairs;
}

double attention_flops(const Problem& p) {
  // per head and allowed pair: q·k is d_k multiply-adds, p·v is d_v
  return static_cast<double>(p.h) * static_cast<double>(allowed_pairs(p)) * 2.0 * static_cast<double>(p.d_k + p.d_v);
}

std::vector<std::size_t> sample_rows(std::size_t n, std::size_t count) {
  std::vector<std::size_t> rows;
  if (n <= count) {
    for (std::size_t i = 0; i < n; ++i) rows.push_back(i);
    return rows;
  }
  if (count == 1) return {0};
  // row k = round(k·(n − 1)/(count − 1)): distinct, since n > count
  for (std::size_t k = 0; k < count; ++k) rows.push_back((k * (n - 1) + (count - 1) / 2) / (count - 1));
  return rows;
}

RowReference reference_rows(const Problem& p, std::size_t count) {
  RowReference ref;
  ref.rows = sample_rows(p.n, count);
  const std::size_t R = ref.rows.size(), B = p.B, h = p.h, g = p.g, m = p.m, d_k = p.d_k, d_v = p.d_v;
  // Every key and value once, in double: K = C·W_k + b_k, V = C·W_v + b_v, split into heads.
  Tensor<double> K = split_heads(project(p.C, p.W_k, std::span<const double>(p.b_k)), g);        // (B, g, m, d_k)
  const Tensor<double> V = split_heads(project(p.C, p.W_v, std::span<const double>(p.b_v)), g);  // (B, g, m, d_v)
  // The sampled queries alone.
  Tensor<double> X_rows({B, R, p.d_model});  // (B, R, d_model)
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < p.d_model; ++c) X_rows(b, r, c) = p.X(b, ref.rows[r], c);
  Tensor<double> Q = split_heads(project(X_rows, p.W_q, std::span<const double>(p.b_q)), h);  // (B, h, R, d_k)
  if (p.rope) {
    const std::size_t P = p.rope->cos_q.dim(1);
    Tensor<double> cos_rows({R, P}), sin_rows({R, P});  // the sampled queries' angles
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t e = 0; e < P; ++e) {
        cos_rows(r, e) = p.rope->cos_q(ref.rows[r], e);
        sin_rows(r, e) = p.rope->sin_q(ref.rows[r], e);
      }
    Q = rotate(Q, cos_rows, sin_rows, p.rope->style);
    K = rotate(K, p.rope->cos_k, p.rope->sin_k, p.rope->style);
  }

  // O[b][hd][r] = Σ_j softmax_j(scale · q·k_j + bias_j, masked) · v_j, one row at a time
  Tensor<double> O({B, h, R, d_v});  // (B, h, R, d_v)
  std::vector<double> s(m);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hd = 0; hd < h; ++hd) {
      const std::size_t kv = kv_head_of(hd, h, g);
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t i = ref.rows[r];
        double max = -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < m; ++j) {
          s[j] = -std::numeric_limits<double>::infinity();
          if (!p.mask.allows(b, i, j)) continue;
          double dot = 0;
          for (std::size_t e = 0; e < d_k; ++e) dot += Q(b, hd, r, e) * K(b, kv, j, e);
          s[j] = dot * p.scale;
          if (p.alibi) s[j] += alibi_term(p.alibi->slopes[hd], p.alibi->query_positions[i], p.alibi->key_positions[j]);
          max = std::max(max, s[j]);
        }
        if (max == -std::numeric_limits<double>::infinity()) continue;  // nothing to attend: zeros
        double sum = 0;
        for (std::size_t j = 0; j < m; ++j) {
          if (s[j] == -std::numeric_limits<double>::infinity()) continue;
          const double w = std::exp(s[j] - max);  // less the max, so exp never overflows
          sum += w;
          for (std::size_t e = 0; e < d_v; ++e) O(b, hd, r, e) += w * V(b, kv, j, e);
        }
        for (std::size_t e = 0; e < d_v; ++e) O(b, hd, r, e) /= sum;
      }
    }
  Tensor<double> Y = merge_heads(O);  // (B, R, h·d_v)
  ref.Y = p.has_output_projection() ? project(Y, p.W_o, std::span<const double>(p.b_o)) : std::move(Y);
  return ref;
}

namespace {

template <class T>
double error_of(const RowReference& ref, const Tensor<T>& Y) {
  const std::size_t R = ref.rows.size();
  if (Y.rank() != 3 || ref.Y.rank() != 3 || Y.dim(0) != ref.Y.dim(0) || Y.dim(2) != ref.Y.dim(2) ||
      (R > 0 && ref.rows.back() >= Y.dim(1)))
    throw std::invalid_argument(
        fmt::format("max_error: output {} against reference rows {}", Y.shape(), ref.Y.shape()));
  double worst = 0;
  for (std::size_t b = 0; b < Y.dim(0); ++b)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < Y.dim(2); ++c) {
        const double e = std::abs(static_cast<double>(Y(b, ref.rows[r], c)) - ref.Y(b, r, c));
        if (std::isnan(e)) return std::numeric_limits<double>::quiet_NaN();
        worst = std::max(worst, e);
      }
  return worst;
}

}  // namespace

double max_error(const RowReference& reference, const Tensor<float>& output) { return error_of(reference, output); }
double max_error(const RowReference& reference, const Tensor<double>& output) { return error_of(reference, output); }

Timing summarize(std::vector<double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("summarize: no times");
  std::sort(seconds.begin(), seconds.end());
  const std::size_t k = seconds.size();
  const double median = k % 2 == 1 ? seconds[k / 2] : (seconds[k / 2 - 1] + seconds[k / 2]) / 2;
  return {median, seconds.front(), seconds.back()};
}

std::size_t bench_estimate(const Problem& p, Engine engine, DType dtype, std::size_t input_bytes, std::size_t threads) {
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
  const Clock::time_point start = Clock::now();

  // Every engine on one problem; `make` builds its values when a run fits (the sizes alone are in `sizes`).
  const auto bench_one = [&](const Problem& sizes, std::size_t input_bytes, const auto& make) {
    std::vector<BenchRun> runs;
    bool any = false;
    for (const Engine engine : engines_of(r)) {
      BenchRun run = describe_run(sizes, engine, r);
      run.estimated_bytes = bench_estimate(sizes, engine, r.dtype, input_bytes, r.threads);
      run.refused = run.estimated_bytes > r.max_memory;
      any = any || !run.refused;
      runs.push_back(std::move(run));
    }
    if (any) {
      const Problem& p = make();
      const RowReference reference = reference_rows(p, out.sample_rows);
      for (BenchRun& run : runs) {
        if (run.refused) continue;
        if (r.dtype == DType::float64) measure<double>(p, run, reference, r, out.peak_method, start, progress);
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

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    return name;
  }
  return "";
}

}  // namespace attn
