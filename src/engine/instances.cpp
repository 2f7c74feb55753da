// The traced engines and their comparisons, compiled once for the number types the tool and the
// tests run them in: each header declares these `extern template`, so a file that runs an engine
// links to this one's code instead of compiling the whole engine again.

#include "engine/backward.hpp"
#include "engine/compare.hpp"
#include "engine/compare_backward.hpp"
#include "engine/decoder.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"

namespace attn {

template AttentionResult<float> run_naive<float>(const Problem&, Observer&, DType);
template AttentionResult<double> run_naive<double>(const Problem&, Observer&, DType);
template AttentionResult<long double> run_naive<long double>(const Problem&, Observer&, DType);
template AttentionResult<float> run_flash<float>(const Problem&, Observer&, TileSize, DType);
template AttentionResult<double> run_flash<double>(const Problem&, Observer&, TileSize, DType);

template AttentionResult<float> run_naive_backward<float>(const Problem&, Observer&, DType);
template AttentionResult<double> run_naive_backward<double>(const Problem&, Observer&, DType);
template AttentionResult<long double> run_naive_backward<long double>(const Problem&, Observer&, DType);
template AttentionResult<float> run_flash_backward<float>(const Problem&, Observer&, TileSize, DType);
template AttentionResult<double> run_flash_backward<double>(const Problem&, Observer&, TileSize, DType);

template CompareRecord judge_flash<float>(const Problem&, TileSize, const AttentionResult<float>&,
                                          const AttentionResult<float>&, DType);
template CompareRecord judge_flash<double>(const Problem&, TileSize, const AttentionResult<double>&,
                                           const AttentionResult<double>&, DType);
template CompareRecord compare_engines<float>(const Problem&, TileSize, Observer&, Observer&, DType);
template CompareRecord compare_engines<double>(const Problem&, TileSize, Observer&, Observer&, DType);

template void judge_gradients<float>(const Problem&, const StepKeeper<double>&, const StepKeeper<double>&,
                                     CompareRecord&, DType);
template void judge_gradients<double>(const Problem&, const StepKeeper<double>&, const StepKeeper<double>&,
                                      CompareRecord&, DType);
template CompareRecord compare_backward<float>(const Problem&, TileSize, Observer&, Observer&, DType);
template CompareRecord compare_backward<double>(const Problem&, TileSize, Observer&, Observer&, DType);

template DecodeResult<float> run_decode<float>(const Problem&, const DecodePlan&, DecodeObserver&, DType);
template DecodeResult<double> run_decode<double>(const Problem&, const DecodePlan&, DecodeObserver&, DType);

}  // namespace attn
