// Picks the kernels of the widest instruction set the processor runs, and spreads work over threads.

#include "kernel/kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel/isa.hpp"

namespace attn::kernel {

namespace {

bool runs(Isa isa) {
#if defined(ATTN_X86_KERNELS)
  // libgcc checks the processor's flags and that the operating system saves the wider registers.
  switch (isa) {
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::baseline: return true;
  }
  return false;
#else
  return isa == Isa::baseline;
#endif
}

Isa choose() {
  const std::vector<Isa> sets = runnable_isas();
  if (const char* asked = std::getenv("ATTN_KERNELS"); asked != nullptr)
    for (const Isa s : sets)
      if (name_of(s) == asked) return s;
  return sets.back();
}

// Each kernel in the set `isa`: the overload for the args' T.
template <class Args>
void gemm_in(Isa isa, const Args& a) {
#if defined(ATTN_X86_KERNELS)
  if (isa == Isa::avx512) return avx512::gemm(a);
  if (isa == Isa::avx2) return avx2::gemm(a);
#endif
  (void)isa;
  baseline::gemm(a);
}

template <class Args>
void flash_tile_in(Isa isa, const Args& a) {
#if defined(ATTN_X86_KERNELS)
  if (isa == Isa::avx512) return avx512::flash_tile(a);
  if (isa == Isa::avx2) return avx2::flash_tile(a);
#endif
  (void)isa;
  baseline::flash_tile(a);
}

template <class Args>
void flash_backward_tile_in(Isa isa, const Args& a) {
#if defined(ATTN_X86_KERNELS)
  if (isa == Isa::avx512) return avx512::flash_backward_tile(a);
  if (isa == Isa::avx2) return avx2::flash_backward_tile(a);
#endif
  (void)isa;
  baseline::flash_backward_tile(a);
}

template <class Args>
void softmax_rows_in(Isa isa, const Args& a) {
#if defined(ATTN_X86_KERNELS)
  if (isa == Isa::avx512) return avx512::softmax_rows(a);
  if (isa == Isa::avx2) return avx2::softmax_rows(a);
#endif
  (void)isa;
  baseline::softmax_rows(a);
}

template <class T>
Layout layout_in(Isa isa) {
#if defined(ATTN_X86_KERNELS)
  if (isa == Isa::avx512) return avx512::layout_of(T{});
  if (isa == Isa::avx2) return avx2::layout_of(T{});
#endif
  (void)isa;
  return baseline::layout_of(T{});
}

std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// One band of rows of C per thread, whole panels of row_block rows: each thread packs B once per block
// of it (as many times as one thread alone would), and A only for its own rows.
template <class T>
void gemm_threads(Isa isa, const GemmArgs<T>& g, std::size_t threads) {
  if (g.M == 0 || g.N == 0) return;
  const Layout layout = layout_in<T>(isa);
  const std::size_t panels = (g.M + layout.row_block - 1) / layout.row_block;
  threads = std::max<std::size_t>(1, std::min(threads_for(double(g.M) * double(g.N) * double(g.K), threads), panels));
  const std::size_t band = (panels + threads - 1) / threads * layout.row_block;
  const std::size_t kc = std::max<std::size_t>(1, std::min(g.K, layout.gemm_kc));
  const std::size_t a_size = round_up(std::min(g.M, layout.gemm_mc), layout.row_block) * kc;
  const std::size_t b_size = kc * round_up(std::min(g.N, layout.gemm_nc), layout.gemm_nr);
  std::vector<std::unique_ptr<T[]>> scratch(threads);
  // Left uninitialised, as std::make_unique_for_overwrite would (which Emscripten's libc++ 13 lacks).
  for (auto& s : scratch) s = std::unique_ptr<T[]>(new T[a_size + b_size]);
  parallel_for((g.M + band - 1) / band, threads, [&](std::size_t item, std::size_t worker) {
    GemmArgs<T> part = g;
    const std::size_t i0 = item * band;
    part.M = std::min(band, g.M - i0);
    part.a = g.a + static_cast<std::ptrdiff_t>(i0) * g.a_row;
    part.c = g.c + static_cast<std::ptrdiff_t>(i0) * g.c_row;
    part.a_pack = scratch[worker].get();
    part.b_pack = scratch[worker].get() + a_size;
    gemm_in(isa, part);
  });
}

}  // namespace

std::vector<Isa> runnable_isas() {
  std::vector<Isa> sets;
  for (const Isa s : {Isa::baseline, Isa::avx2, Isa::avx512})
    if (runs(s)) sets.push_back(s);
  return sets;
}

Isa isa() {
  static const Isa chosen = choose();
  return chosen;
}

std::string_view name_of(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::baseline: break;
  }
  return "baseline";
}

Layout layout_of(Isa isa, float) { return layout_in<float>(isa); }
Layout layout_of(Isa isa, double) { return layout_in<double>(isa); }

std::size_t all_cores() { return std::max(1U, std::thread::hardware_concurrency()); }

std::size_t threads_for(double work, std::size_t threads) { return work < 2.0e6 ? 1 : threads; }

void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& work) {
  threads = std::min(std::max<std::size_t>(threads, 1), std::max<std::size_t>(count, 1));
  if (threads == 1) {
    for (std::size_t item = 0; item < count; ++item) work(item, 0);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_lock;
  const auto worker = [&](std::size_t id) {
    try {
      for (std::size_t item = next++; item < count && !failed; item = next++) work(item, id);
    } catch (...) {
      const std::lock_guard<std::mutex> hold(error_lock);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (std::size_t id = 1; id < threads; ++id) pool.emplace_back(worker, id);
  worker(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

void gemm(Isa isa, const GemmArgs<float>& g, std::size_t threads) { gemm_threads(isa, g, threads); }
void gemm(Isa isa, const GemmArgs<double>& g, std::size_t threads) { gemm_threads(isa, g, threads); }

void flash_tile(Isa isa, const FlashTileArgs<float>& a) { flash_tile_in(isa, a); }
void flash_tile(Isa isa, const FlashTileArgs<double>& a) { flash_tile_in(isa, a); }
void flash_backward_tile(Isa isa, const FlashBackwardTileArgs<float>& a) { flash_backward_tile_in(isa, a); }
void flash_backward_tile(Isa isa, const FlashBackwardTileArgs<double>& a) { flash_backward_tile_in(isa, a); }
void softmax_rows(Isa isa, const SoftmaxRowsArgs<float>& a) { softmax_rows_in(isa, a); }
void softmax_rows(Isa isa, const SoftmaxRowsArgs<double>& a) { softmax_rows_in(isa, a); }

double fma_loop(Isa isa, std::size_t iterations, std::size_t& flops_per_iteration) {
#if defined(ATTN_X86_KERNELS)
  if (isa == Isa::avx512) return avx512::fma_loop(iterations, flops_per_iteration);
  if (isa == Isa::avx2) return avx2::fma_loop(iterations, flops_per_iteration);
#endif
  (void)isa;
  return baseline::fma_loop(iterations, flops_per_iteration);
}

}  // namespace attn::kernel
