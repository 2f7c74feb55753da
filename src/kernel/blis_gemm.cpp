// BLIS's typed expert interface, one thread per call: BLIS takes a row and a column stride for every
// operand, which is what GemmArgs has (A and B strided any way, C's rows contiguous), and packs them
// into its own buffers, which it draws from pools that are safe to share between threads.

#include "kernel/blis_gemm.hpp"

#include <cstddef>
#include <string>

#include <blis.h>

namespace attn::kernel::blis {

namespace {

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
  return std::string("BLIS ") + bli_info_get_version_str() + ", " + bli_arch_string(bli_arch_query_id());
}

}  // namespace attn::kernel::blis
