// Picks the kernels of the widest instruction set the processor runs, and spreads work over threads.

#include "kernel/kernels.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kernel/isa.hpp"
#if defined(ATTN_BLIS)
#include "kernel/blis_gemm.hpp"
#endif

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

#if defined(ATTN_BLIS)

// One band of rows of C per thread, each a product of its own in BLIS on that thread: BLIS packs B once
// per band (as one thread alone would once in all), and A only for the band's rows. Bands are whole
// multiples of 16 rows, which every BLIS micro-kernel's height divides or nearly does. (The instruction
// set is BLIS's own choice for this processor: `isa` picks only the kernels of isa.cpp.)
template <class T>
void gemm_threads(Isa, const GemmArgs<T>& g, std::size_t threads) {
  if (g.M == 0 || g.N == 0) return;
  constexpr std::size_t rows = 16;
  const std::size_t blocks = (g.M + rows - 1) / rows;
  threads = std::max<std::size_t>(1, std::min(threads_for(double(g.M) * double(g.N) * double(g.K), threads), blocks));
  const std::size_t band = (blocks + threads - 1) / threads * rows;
  parallel_for((g.M + band - 1) / band, threads, [&](std::size_t item, std::size_t) {
    GemmArgs<T> part = g;
    const std::size_t i0 = item * band;
    part.M = std::min(band, g.M - i0);
    part.a = g.a + static_cast<std::ptrdiff_t>(i0) * g.a_row;
    part.c = g.c + static_cast<std::ptrdiff_t>(i0) * g.c_row;
    blis::gemm(part);
  });
}

#else

std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// Without BLIS (the explorer's WebAssembly core, or -DATTN_BLIS=OFF): the portable GEMM of isa.cpp.
// One band of rows of C per thread, whole panels of row_block rows: each thread packs B once per block
// of it (as many times as one thread alone would), and A only for its own rows.
template <class T>
void gemm_threads(Isa, const GemmArgs<T>& g, std::size_t threads) {
  if (g.M == 0 || g.N == 0) return;
  const Layout layout = layout_in<T>(Isa::baseline);
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
    baseline::gemm(part);
  });
}

#endif

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

namespace {

// The one pool of worker threads that every parallel_for shares: started on first use, grown to the most
// threads ever asked for, never shrunk, and kept until the process ends, so that the projections, naive's
// rows and flash's tiles reuse the same threads instead of starting their own each call. One job runs at
// a time; a parallel_for from inside a job (or while another caller's job runs) runs on its own thread.
class Pool {
 public:
  // The process's pool. After a fork the child has none of the parent's threads: it starts its own (the
  // parent's, whose threads are not there, is left alone and never joined).
  static Pool& shared() {
    static std::mutex lock;
    static Pool* pool = nullptr;
    const std::lock_guard<std::mutex> hold(lock);
    if (pool == nullptr || pool->pid_ != ::getpid()) pool = new Pool();  // a parent's pool is left behind
    return *pool;
  }

  std::size_t workers() {
    const std::lock_guard<std::mutex> hold(lock_);
    return threads_.size();
  }

  // False when the pool is busy with another job or this thread is one of its workers: run alone then.
  bool run(std::size_t count, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& work) {
    if (in_worker) return false;
    std::unique_lock<std::mutex> job(job_lock_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    {
      std::unique_lock<std::mutex> hold(lock_);
      while (threads_.size() < threads - 1) {
        const std::size_t id = threads_.size() + 1;
        threads_.emplace_back([this, id] { loop(id); });
      }
      work_ = &work;
      count_ = count;
      next_ = 0;
      failed_ = false;
      error_ = nullptr;
      joined_ = threads;  // workers 1 … threads − 1 take part, and the caller as worker 0
      pending_ = threads - 1;
      ++generation_;
    }
    wake_.notify_all();
    take_items(0);
    std::unique_lock<std::mutex> hold(lock_);
    done_.wait(hold, [this] { return pending_ == 0; });
    work_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  Pool() : pid_(::getpid()) {}

  void take_items(std::size_t id) {
    try {
      for (std::size_t item = next_++; item < count_ && !failed_; item = next_++) (*work_)(item, id);
    } catch (...) {
      const std::lock_guard<std::mutex> hold(lock_);
      if (!error_) error_ = std::current_exception();
      failed_ = true;
    }
  }

  void loop(std::size_t id) {
    in_worker = true;
    std::size_t seen = 0;
    std::unique_lock<std::mutex> hold(lock_);
    for (;;) {
      wake_.wait(hold, [&] { return generation_ != seen; });
      seen = generation_;
      if (id >= joined_) continue;  // this job asked for fewer threads
      hold.unlock();
      take_items(id);
      hold.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  static thread_local bool in_worker;

  const pid_t pid_;
  std::mutex job_lock_;  // held by the caller whose job runs
  std::mutex lock_;      // guards everything below but the item counter
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;  // worker k + 1 is threads_[k]
  const std::function<void(std::size_t, std::size_t)>* work_ = nullptr;
  std::size_t count_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::size_t joined_ = 0;
  std::size_t pending_ = 0;
  std::size_t generation_ = 0;
};

thread_local bool Pool::in_worker = false;

}  // namespace

void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& work) {
  threads = std::min(std::max<std::size_t>(threads, 1), std::max<std::size_t>(count, 1));
  if (threads > 1 && Pool::shared().run(count, threads, work)) return;
  for (std::size_t item = 0; item < count; ++item) work(item, 0);
}

std::size_t pool_threads() { return Pool::shared().workers(); }

void* big_allocate(std::size_t bytes) {
  constexpr std::size_t huge = std::size_t{2} << 20;
  if (bytes < huge) {
    void* p = std::malloc(std::max<std::size_t>(bytes, 1));
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const std::size_t rounded = (bytes + huge - 1) / huge * huge;  // aligned_alloc wants a multiple
  void* p = std::aligned_alloc(huge, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  ::madvise(p, rounded, MADV_HUGEPAGE);  // a request: where it is refused, small pages as before
#endif
  return p;
}

void BigFree::operator()(void* p) const { std::free(p); }

std::string products_name() {
#if defined(ATTN_BLIS)
  return blis::describe();
#else
  return "portable";
#endif
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
