// BLIS's typed expert interface, one thread per call: BLIS takes a row and a column stride for every
// operand, which is what GemmArgs has (A and B strided any way, C's rows contiguous), and packs them
// into its own buffers, which it draws from pools that are safe to share between threads.

#include "kernel/blis_gemm.hpp"

#include <cstddef>
#include <cstdlib>
#include <string>

#include <blis.h>

#include "kernel/kernels.hpp"

namespace attn::kernel::blis {

namespace {

// BLIS chooses its kernels once, at its first product, by the processor's family and model, and 0.9
// knows them only up to Zen 3/4 and Skylake-X: on a Zen 5 (family 26) it fell back to its "generic"
// reference kernels, which ran the projections at 15% of the FMA peak (skx: 74%). So the choice follows the
// instruction set of our own kernels (kernel::isa(), ATTN_KERNELS included) instead: BLIS's Skylake-X
// kernels with AVX-512, its Haswell ones with AVX2 (docs/performance.md, "The products: BLIS", measured
// both against the others), its own choice on a baseline processor. A BLIS_ARCH_TYPE in the environment
// still wins. bli_init registers BLIS's kernels and reads BLIS_ARCH_TYPE, which fixes the choice for the
// process (set only after it, the variable changed nothing), so the variable is there for that call alone.
// (Asked for its choice before bli_init, BLIS 0.9 aborts on any BLIS_ARCH_TYPE: its registry is not up.)
void choose_kernels() {
  const Isa ours = isa();
  if (std::getenv("BLIS_ARCH_TYPE") != nullptr || ours == Isa::baseline) {
    bli_init();
    return;
  }
  const arch_t id = ours == Isa::avx512 ? BLIS_ARCH_SKX : BLIS_ARCH_HASWELL;
  ::setenv("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(id)).c_str(), 1);
  bli_init();
  ::unsetenv("BLIS_ARCH_TYPE");
}

void ready() {
  static const bool once = (choose_kernels(), true);
  (void)once;
}

// One thread for this call, whatever BLIS_NUM_THREADS says: the caller is one of the pool's threads.
// And BLIS's packed path always, never its "small/unpacked" one (sup), which BLIS 0.9 takes when a
// dimension is under a few hundred: on naive's S = Q·Kᵀ of one head (4096 × 64 · 64 × 4096, Kᵀ strided
// by columns) sup ran at 50 GFLOP/s and the packed path at 94 on one Zen 4 core; P·V (N 64) ran at 71
// either way.
rntm_t one_thread() {
  rntm_t rntm;
  bli_rntm_init(&rntm);
  bli_rntm_set_num_threads(1, &rntm);
  bli_rntm_disable_l3_sup(&rntm);
  return rntm;
}

// The bias goes into C first (C = bias, or C += bias when accumulating), and BLIS adds A·B to it (beta 1).
template <class T>
void add_bias(const GemmArgs<T>& g) {
  for (std::size_t i = 0; i < g.M; ++i) {
    T* row = g.c + static_cast<std::ptrdiff_t>(i) * g.c_row;
    for (std::size_t j = 0; j < g.N; ++j) row[j] = g.accumulate ? row[j] + g.bias[j] : g.bias[j];
  }
}

template <class T, class Call>
void product(const GemmArgs<T>& g, Call call) {
  if (g.M == 0 || g.N == 0) return;
  ready();
  if (g.bias != nullptr) add_bias(g);
  T one = 1;
  T beta = g.accumulate || g.bias != nullptr ? T{1} : T{0};
  rntm_t rntm = one_thread();
  // BLIS's operands are not const in its prototypes; it only reads A and B.
  call(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, static_cast<dim_t>(g.M), static_cast<dim_t>(g.N), static_cast<dim_t>(g.K),
       &one, const_cast<T*>(g.a), static_cast<inc_t>(g.a_row), static_cast<inc_t>(g.a_col), const_cast<T*>(g.b),
       static_cast<inc_t>(g.b_row), static_cast<inc_t>(g.b_col), &beta, g.c, static_cast<inc_t>(g.c_row), inc_t{1},
       nullptr, &rntm);
}

}  // namespace

void gemm(const GemmArgs<float>& g) { product(g, bli_sgemm_ex); }
void gemm(const GemmArgs<double>& g) { product(g, bli_dgemm_ex); }

std::string describe() {
  ready();
  return std::string("BLIS ") + bli_info_get_version_str() + ", " + bli_arch_string(bli_arch_query_id());
}

}  // namespace attn::kernel::blis
