// Google Benchmark micro-benchmarks of the fast kernels (src/kernel/), one instruction set at a time:
// the matrix product at the projections' shape (BLIS, whatever the set: kernel::gemm), one flash tile at
// the set's default tile, naive's softmax of rows, and the whole unwatched flash pass of one head.
// Counters: GFLOP/s where the work is matrix products (2 per multiply-add), values per second for the
// softmax.
//
// usage: build/release/bench/kernels_bench [--benchmark_filter=REGEX]   (docs/performance.md)

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/fast.hpp"
#include "kernel/kernels.hpp"
#include "model/problem.hpp"

namespace {

using attn::kernel::Isa;

std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

Isa isa_of(const benchmark::State& state) { return static_cast<Isa>(state.range(0)); }

// C (M, N) = A (M, K) · B (K, N), as the projections run it: M = 4096 tokens, K = N = 512.
void gemm(benchmark::State& state) {
  const std::size_t M = 4096, N = 512, K = 512;
  const std::vector<float> a = random_values(M * K, 1), b = random_values(K * N, 2);
  std::vector<float> c(M * N);
  const auto k = static_cast<std::ptrdiff_t>(K), row = static_cast<std::ptrdiff_t>(N);
  const attn::kernel::GemmArgs<float> g =
      attn::kernel::product(M, N, K, a.data(), k, 1, b.data(), row, 1, c.data(), row);
  const auto threads = static_cast<std::size_t>(state.range(1));
  for (auto _ : state) {
    attn::kernel::gemm(isa_of(state), g, threads);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(attn::kernel::name_of(isa_of(state))));
}

// One key tile folded into a query tile: the fast default tile, d = 64, nothing masked.
void flash_tile(benchmark::State& state) {
  const attn::TileSize tiles = attn::fast_tiles(isa_of(state));
  const std::size_t d = 64;
  const attn::kernel::Layout layout = attn::kernel::layout_of(isa_of(state), float{});
  const std::size_t rows_pad = (tiles.Br + layout.row_block - 1) / layout.row_block * layout.row_block;
  const std::size_t cols_pad = (tiles.Bc + layout.lanes - 1) / layout.lanes * layout.lanes;
  const std::vector<float> q = random_values(rows_pad * d, 3), kt = random_values(d * cols_pad, 4),
                           v = random_values(cols_pad * d, 5);
  std::vector<float> s(rows_pad * cols_pad), m(rows_pad, 0.0f), l(rows_pad, 0.0f), alpha(rows_pad), o(rows_pad * d),
      row_max(rows_pad * layout.lanes);
  std::vector<std::int64_t> lo(tiles.Br, 0), hi(tiles.Br, static_cast<std::int64_t>(tiles.Bc));
  attn::kernel::FlashTileArgs<float> a;
  a.rows = tiles.Br;
  a.rows_pad = rows_pad;
  a.cols = tiles.Bc;
  a.cols_pad = cols_pad;
  a.d_k = d;
  a.d_v = d;
  a.dv_pad = d;
  a.q = q.data();
  a.kt = kt.data();
  a.v = v.data();
  a.score.scale = 0.125f;
  a.score.lo = lo.data();
  a.score.hi = hi.data();
  a.s = s.data();
  a.m = m.data();
  a.l = l.data();
  a.alpha = alpha.data();
  a.o = o.data();
  a.row_max = row_max.data();
  for (auto _ : state) {
    attn::kernel::flash_tile(isa_of(state), a);
    benchmark::DoNotOptimize(o.data());
  }
  const double flops = 4.0 * static_cast<double>(tiles.Br * tiles.Bc * d);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(attn::kernel::name_of(isa_of(state))));
}

// Naive's scaled, masked softmax over 256 rows of 4096 scores.
void softmax_rows(benchmark::State& state) {
  const std::size_t rows = 256, cols = 4096;
  const std::vector<float> scores = random_values(rows * cols, 6);
  std::vector<float> s = scores;
  std::vector<std::int64_t> lo(rows, 0), hi(rows, static_cast<std::int64_t>(cols));
  attn::kernel::SoftmaxRowsArgs<float> a;
  a.rows = rows;
  a.cols = cols;
  a.s = s.data();
  a.row_stride = cols;
  a.score.scale = 0.125f;
  a.score.lo = lo.data();
  a.score.hi = hi.data();
  for (auto _ : state) {
    state.PauseTiming();
    s = scores;
    state.ResumeTiming();
    attn::kernel::softmax_rows(isa_of(state), a);
    benchmark::DoNotOptimize(s.data());
  }
  state.counters["values/s"] =
      benchmark::Counter(static_cast<double>(rows * cols * state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(attn::kernel::name_of(isa_of(state))));
}

// The whole unwatched flash pass of one head: n = 4096, d = 64, h = 1 (d_model = 64, no W_o), in the
// widest set, on 1 and 2 threads.
void flash_head(benchmark::State& state) {
  const std::size_t n = 4096, d = 64;
  attn::Problem p;
  p.n = p.m = n;
  p.d_model = p.d_context = p.d_k = p.d_v = p.d_out = d;
  p.X = attn::Tensor<double>({1, n, d});
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (double& x : p.X.values()) x = uniform(rng);
  p.C = p.X;
  for (attn::Tensor<double>* w : {&p.W_q, &p.W_k, &p.W_v}) {
    *w = attn::Tensor<double>({d, d});
    for (double& x : w->values()) x = uniform(rng) / 8;
  }
  p.scale = 0.125;
  p.mask.n = p.mask.m = n;
  p.mask.kind = static_cast<attn::MaskKind>(state.range(2));
  const attn::FastOptions o{attn::fast_tiles(isa_of(state)), static_cast<std::size_t>(state.range(1)), isa_of(state)};
  for (auto _ : state) benchmark::DoNotOptimize(attn::run_fast<float>(p, attn::Engine::flash, o));
  const double pairs = p.mask.kind == attn::MaskKind::causal ? n * (n + 1) / 2.0 : static_cast<double>(n * n);
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * d * pairs * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(attn::kernel::name_of(isa_of(state))));
}

void each_isa(benchmark::internal::Benchmark* b) {
  for (const Isa isa : attn::kernel::runnable_isas()) b->Args({static_cast<std::int64_t>(isa), 1});
  b->Args({static_cast<std::int64_t>(attn::kernel::isa()), 2});
}

void widest(benchmark::internal::Benchmark* b) {
  for (const std::int64_t threads : {1, 2})
    for (const attn::MaskKind mask : {attn::MaskKind::none, attn::MaskKind::causal})
      b->Args({static_cast<std::int64_t>(attn::kernel::isa()), threads, static_cast<std::int64_t>(mask)});
}

}  // namespace

BENCHMARK(gemm)->Apply(each_isa)->ArgNames({"isa", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(flash_tile)->Apply(each_isa)->ArgNames({"isa", "-"})->Unit(benchmark::kMicrosecond);
BENCHMARK(softmax_rows)->Apply(each_isa)->ArgNames({"isa", "-"})->Unit(benchmark::kMillisecond);
BENCHMARK(flash_head)
    ->Apply(widest)
    ->ArgNames({"isa", "threads", "mask"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
