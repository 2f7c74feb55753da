#include "bench/decode_bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "bench/machine.hpp"
#include "bench/timing.hpp"
#include "engine/fast_decode.hpp"
#include "ops/random.hpp"
#include "text/number.hpp"

namespace attn {

CopyBandwidth measure_copy_bandwidth(std::size_t threads) {
  constexpr std::size_t bytes = std::size_t{64} << 20;  // well past any last-level cache of today
  std::vector<unsigned char> from(bytes, 1), to(bytes, 0);
  const std::size_t share = (bytes / threads + 63) / 64 * 64;
  double best = 1e30;
  for (int round = 0; round < 6; ++round) {  // the first round only wakes the cores and maps the pages
    const Clock::time_point start = Clock::now();
    kernel::parallel_for(threads, threads, [&](std::size_t item, std::size_t) {
      const std::size_t begin = std::min(bytes, item * share), end = std::min(bytes, begin + share);
      std::memcpy(to.data() + begin, from.data() + begin, end - begin);
    });
    const double s = seconds_since(start);
    if (round > 0) best = std::min(best, s);
  }
  return {threads, bytes, 2.0 * static_cast<double>(bytes) / best / 1e9};
}

namespace {

// The problem a decode step needs: its heads and widths, the default scale, a causal mask.
Problem decode_shape(const BenchShape& s) {
  Problem p;
  p.h = s.heads;
  p.g = s.kv_heads;
  p.d_k = p.d_v = s.d_model / s.heads;
  p.d_model = s.d_model;
  p.d_out = p.h * p.d_v;
  p.scale = 1.0 / std::sqrt(static_cast<double>(p.d_k));
  p.mask.kind = MaskKind::causal;
  return p;
}

template <class T>
std::vector<T> uniform(SplitMix64& rng, std::size_t count) {
  std::vector<T> v(count);
  for (T& x : v) x = static_cast<T>(2 * rng.uniform() - 1);
  return v;
}

// One row: the median, fastest and slowest of `repeats` samples, each a batch of steps of at least 10 ms.
template <class T>
Timing time_steps(const Problem& p, const FastKvCache<T>& cache, const std::vector<T>& q, std::size_t repeats,
                  const FastDecodeOptions& o) {
  std::vector<T> out(p.h * p.d_v);
  const auto step = [&] { fast_decode_step(p, cache.length() - 1, cache, q.data(), out.data(), o); };
  step();  // warm: the cache into whatever level holds it, the threads started once
  std::size_t batch = 1;
  for (;;) {
    const Clock::time_point start = Clock::now();
    for (std::size_t k = 0; k < batch; ++k) step();
    if (seconds_since(start) >= 0.01 || batch >= (1U << 20)) break;
    batch *= 2;
  }
  std::vector<double> samples;
  for (std::size_t r = 0; r < repeats; ++r) {
    const Clock::time_point start = Clock::now();
    for (std::size_t k = 0; k < batch; ++k) step();
    samples.push_back(seconds_since(start) / static_cast<double>(batch));
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back()};
}

template <class T>
void measure(const DecodeBenchRequest& r, const Problem& p, DecodeBenchResult& result) {
  const kernel::Isa isa = kernel::isa();
  std::vector<std::size_t> thread_counts = {1};
  if (r.threads > 1) thread_counts.push_back(r.threads);
  for (const std::size_t L : r.lengths) {
    const std::uint64_t estimate =
        static_cast<std::uint64_t>(L + 128) * p.g * (p.d_k + fast::round_up(p.d_v, 16)) * sizeof(T);
    const bool refused = r.max_memory > 0 && estimate > r.max_memory;
    std::optional<FastKvCache<T>> cache;
    std::vector<T> q;
    if (!refused) {
      SplitMix64 rng(r.shape.seed + L);
      cache.emplace(1, p.g, p.d_k, p.d_v, L, isa);
      for (std::size_t t = 0; t < L; ++t) {
        const std::vector<T> k = uniform<T>(rng, p.g * p.d_k), v = uniform<T>(rng, p.g * p.d_v);
        cache->append(k.data(), v.data());
      }
      q = uniform<T>(rng, p.h * p.d_k);
    }
    for (const std::size_t threads : thread_counts)
      for (const std::size_t split : {std::size_t{1}, r.split}) {
        DecodeBenchRow row;
        row.length = L;
        row.threads = threads;
        row.split = split;
        row.flops = 2.0 * static_cast<double>(p.h) * static_cast<double>(L) * static_cast<double>(p.d_k + p.d_v);
        if (refused) {
          row.refused = true;
          row.refusal = fmt::format("a cache of about {}, more than --max-memory", describe_bytes(estimate));
        } else {
          row.cache_bytes = cache->bytes_read();
          row.seconds = time_steps(p, *cache, q, r.repeats, {.threads = threads, .split = split, .isa = isa});
        }
        result.rows.push_back(std::move(row));
        if (r.split == 1) break;  // the split rows would be the unsplit ones again
      }
  }
}

}  // namespace

DecodeBenchResult run_decode_bench(const DecodeBenchRequest& r) {
  const Problem p = decode_shape(r.shape);
  DecodeBenchResult result;
  result.cpu = cpu_model();
  result.kernels = std::string(kernel::name_of(kernel::isa()));
  result.dtype = r.dtype;
  result.h = p.h;
  result.g = p.g;
  result.d_k = p.d_k;
  result.d_v = p.d_v;
  result.split = r.split;
  result.bandwidth.push_back(measure_copy_bandwidth(1));
  if (r.threads > 1) result.bandwidth.push_back(measure_copy_bandwidth(r.threads));
  result.fma_peak_gflops = measure_fma_peak(1).gflops;
  if (r.dtype == DType::float64) measure<double>(r, p, result);
  else measure<float>(r, p, result);
  return result;
}

}  // namespace attn
