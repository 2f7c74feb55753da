#pragma once
// The kernels of each instruction set: kernel/isa.cpp compiled once per set, each copy in its own
// namespace (CMakeLists.txt). kernels.cpp picks the widest the processor runs; the tests call each.

#include <cstddef>

#include "kernel/args.hpp"

#define ATTN_DECLARE_KERNELS(ISA)                                 \
  namespace attn::kernel::ISA {                                   \
  Layout layout_of(float);                                        \
  Layout layout_of(double);                                       \
  void flash_tile(const FlashTileArgs<float>&);                   \
  void flash_tile(const FlashTileArgs<double>&);                  \
  void flash_backward_tile(const FlashBackwardTileArgs<float>&);  \
  void flash_backward_tile(const FlashBackwardTileArgs<double>&); \
  void softmax_rows(const SoftmaxRowsArgs<float>&);               \
  void softmax_rows(const SoftmaxRowsArgs<double>&);              \
  double fma_loop(std::size_t, std::size_t&);                     \
  }

ATTN_DECLARE_KERNELS(baseline)
// The portable GEMM, where BLIS does not do the products (isa.cpp, ATTN_OWN_GEMM).
namespace attn::kernel::baseline {
void gemm(const GemmArgs<float>&);
void gemm(const GemmArgs<double>&);
}  // namespace attn::kernel::baseline
#if defined(ATTN_X86_KERNELS)
ATTN_DECLARE_KERNELS(avx2)
ATTN_DECLARE_KERNELS(avx512)
#endif

#undef ATTN_DECLARE_KERNELS
