#pragma once
// What bench says of the machine it measured.

#include <cstddef>
#include <string>

namespace attn {

// The processor's model name from /proc/cpuinfo ("model name"), or "" when there is none.
std::string cpu_model();

// The FP32 FMA peak as measured here: `threads` threads at once, each running independent vector FMAs
// in registers (kernel::fma_loop) in the instruction set the fast kernels use (kernel::isa(): the widest this processor
// runs, or ATTN_KERNELS), the fastest of five timed rounds of about 40 ms each, after one round to calibrate (and to
// wake the cores). On more than one thread, one round on one thread first, and more rounds (up to 14 in all) while
// the fastest is under 90% of `threads` times that: a core another process held for a moment would otherwise
// halve the peak (seen once on a 2-core machine), and every share of it would double. Under a second in all.
struct FmaPeak {
  double gflops = 0;        // floating-point operations per second / 1e9, a multiply-add counted as two
  std::size_t threads = 0;  // that ran at once
  std::string kernels;      // the instruction set ("avx512", "avx2", "baseline")
};
FmaPeak measure_fma_peak(std::size_t threads);

}  // namespace attn
