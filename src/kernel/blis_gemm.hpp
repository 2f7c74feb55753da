#pragma once
// The fast path's matrix products in BLIS (Debian's libblis): C = A·B (+ bias) or C += A·B on the calling
// thread alone, for the strides of GemmArgs (args.hpp). kernels.cpp spreads bands of rows over the
// shared pool; BLIS starts no thread of its own. Why BLIS and not our own GEMM, or OpenBLAS:
// docs/performance.md ("The products: BLIS").

#include <string>

#include "kernel/args.hpp"

namespace attn::kernel::blis {

void gemm(const GemmArgs<float>& g);
void gemm(const GemmArgs<double>& g);

// "BLIS 0.9.0, zen3": the library's version and the kernels it chose for this processor.
std::string describe();

}  // namespace attn::kernel::blis
