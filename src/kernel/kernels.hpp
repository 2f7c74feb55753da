#pragma once
// The fast path's kernels, as the engines call them: the widest instruction set this processor runs
// (AVX-512, AVX2 + FMA, or the baseline) chosen once, and work spread over threads.
// The arithmetic is kernel/isa.cpp; the layouts and argument structs are kernel/args.hpp.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel/args.hpp"

namespace attn::kernel {

enum class Isa { baseline, avx2, avx512 };

// The widest set this processor and this build run, or the one ATTN_KERNELS names ("baseline", "avx2",
// "avx512") when it runs too: a way to measure and test the narrower ones on a wide machine.
Isa isa();
std::string_view name_of(Isa isa);
// The sets this build has and this processor runs, narrowest first.
std::vector<Isa> runnable_isas();

Layout layout_of(Isa isa, float);
Layout layout_of(Isa isa, double);

// The logical processors: what threads = 0 ("all cores") means.
std::size_t all_cores();

// The threads worth starting for `work` multiply-adds: one below about 2 million, where starting and
// joining a thread (tens of µs) would cost more than it saves; `threads` from there on.
std::size_t threads_for(double work, std::size_t threads);

// Calls work(item, worker) for every item in [0, count), on up to `threads` threads (worker in
// [0, threads)): the calling thread is worker 0, and each worker takes the next item as it is free.
// An exception of a worker is rethrown here once every worker has stopped. The other workers are the
// threads of one pool that every call shares (kept from call to call, as many as the most ever asked for
// less one); a call from inside another's work, or while another thread's call runs, runs on the calling
// thread alone, so that threads never multiply.
void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& work);

// The worker threads the shared pool has started so far (besides the callers').
std::size_t pool_threads();

// A large buffer, left uninitialised, on pages of 2 MiB where Linux grants them (transparent huge pages
// asked for with madvise): the first touch of naive's 512 MiB of scores then faults 256 times, not
// 131072, which took a quarter of its time. Freed with std::free.
void* big_allocate(std::size_t bytes);
struct BigFree {
  void operator()(void* p) const;
};
template <class T>
using BigArray = std::unique_ptr<T[], BigFree>;
template <class T>
BigArray<T> big_array(std::size_t count) {
  return BigArray<T>(static_cast<T*>(big_allocate(count * sizeof(T))));
}

// std::allocator, except that an element made without a value (vector(n), resize(n)) is left
// uninitialised, for the fast path's arrays that a product or a kernel overwrites whole: Q, K, V, the
// inputs in T and the merged head outputs (kernel::Buffer). Zeroing them first took 3 ms of the 66 ms
// the projections take at n = 4096, d_model 512 on one core of the Intel Xeon of docs/performance.md.
// (Memory at a cache line's start instead of malloc's made no difference there that the noise did not
// hide, and fresh 2 MiB pages for these 8 MiB arrays faulted slowly enough to double their time.)
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  explicit UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using Buffer = std::vector<T, UninitAllocator<T>>;

// What computes gemm's products: "BLIS 0.9.0, zen3" (the library's version and the kernels it chose for
// this processor), or "portable" (isa.cpp's GEMM, in a build without BLIS).
std::string products_name();

// The arguments of C = A·B with these strides (args.hpp): no bias, C overwritten.
template <class T>
GemmArgs<T> product(std::size_t M, std::size_t N, std::size_t K, const T* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                    const T* b, std::ptrdiff_t b_row, std::ptrdiff_t b_col, T* c, std::ptrdiff_t c_row) {
  GemmArgs<T> g;
  g.M = M;
  g.N = N;
  g.K = K;
  g.a = a;
  g.a_row = a_row;
  g.a_col = a_col;
  g.b = b;
  g.b_row = b_row;
  g.b_col = b_col;
  g.c = c;
  g.c_row = c_row;
  return g;
}

// C = A·B (+ bias), or C += A·B (args.hpp), its rows spread over `threads` of the shared pool: in BLIS,
// whose kernels are its own choice for this processor (`isa` is not asked), or, in a build without it,
// in isa.cpp's portable GEMM. The packing scratch of GemmArgs is ignored: each thread gets its own.
void gemm(Isa isa, const GemmArgs<float>& g, std::size_t threads);
void gemm(Isa isa, const GemmArgs<double>& g, std::size_t threads);

// One key tile folded into one query tile's running state (args.hpp), on this thread.
void flash_tile(Isa isa, const FlashTileArgs<float>& a);
void flash_tile(Isa isa, const FlashTileArgs<double>& a);

// One query tile's share of one key tile's gradients (args.hpp), on this thread.
void flash_backward_tile(Isa isa, const FlashBackwardTileArgs<float>& a);
void flash_backward_tile(Isa isa, const FlashBackwardTileArgs<double>& a);

// Naive's scaled, biased, masked softmax of rows, in place (args.hpp), on this thread.
void softmax_rows(Isa isa, const SoftmaxRowsArgs<float>& a);
void softmax_rows(Isa isa, const SoftmaxRowsArgs<double>& a);

// `iterations` rounds of independent float32 FMAs in registers, nothing else (isa.cpp), on this thread:
// what bench times to measure the processor's FP32 FMA peak. Returns a value that depends on every
// FMA, and the floating-point operations of one round (a multiply-add counted as two).
double fma_loop(Isa isa, std::size_t iterations, std::size_t& flops_per_iteration);

}  // namespace attn::kernel
