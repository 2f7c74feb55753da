#pragma once
// attn-trace explain: one attention weight a_ij followed from the inputs to the output, every operation
// with the numbers the engine computed (docs/cli.md, "explain"); or one number of the output Y.
// Plain records, so that render and io can show them without compiling an engine.
//
// Every number comes from a run in the request's dtype: the projections, scores, weights and head
// outputs from the steps the engine reported, the flash pass's running max, sum and rescales from its
// tiles. What no engine reports is recomputed, and says so: the products of each sum, term by term (in
// double, from the factors as the run held them, so each product is exact for float32), and the row
// max, the exps and their sum of naive's softmax (in the run's dtype, the way softmax_rows computes
// them, so that they give the engine's weight).

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/problem.hpp"
#include "model/run.hpp"
#include "model/score_chain.hpp"
#include "observe/steps.hpp"

namespace attn {

// One number as a sum of products: value = Σ_t a_t·b_t (+ bias).
struct ProductSum {
  std::vector<double> a, b;    // (terms) the factors, as the run held them
  std::vector<double> terms;   // (terms) a_t·b_t, recomputed in double
  std::optional<double> bias;  // added last, when the input has one
  double value = 0;            // what the engine computed

  // Σ_t terms + bias, in double: what `value` is, up to the run's rounding.
  double recomputed() const;
};

// ------------------------------------------------------------------ naming the tokens

// How `text` names one of `tokens`: by its exact name, else (when no token has that name) by its index.
struct TokenLookup {
  std::optional<std::size_t> index;
  std::string error;  // without an index: why, in one line (unknown name, ambiguous name, index too big)
};

// `what` names the tokens in the error: "query", "key", "context".
TokenLookup find_token(std::span<const std::string> tokens, std::string_view text, std::string_view what);

// ------------------------------------------------------------------ one weight

struct ExplainRequest {
  std::size_t batch = 0;
  std::size_t head = 0;           // the query head
  std::size_t query = 0;          // i
  std::size_t key = 0;            // j (a context token in cross-attention)
  Engine engine = Engine::naive;  // naive, or flash: the tile walk too (naive runs beside it to compare)
  DType dtype = DType::float32;
  TileSize tile_size;  // flash's tiles
};

// Key j' of query row i in naive's softmax.
struct SoftmaxEntry {
  bool allowed = true;  // by the mask
  double scaled = 0;    // s' = scale·q·k_j' (the scaled step; with ALiBi the bias step), before the mask
  double shifted = 0;   // s'' − max: -inf where masked
  double exp = 0;       // exp(s'' − max)
  double weight = 0;    // a_ij' (the weights step)
};

// One key tile of the query tile that holds row i, as the flash pass folded it into row i's state.
struct FlashTileStep {
  std::size_t tile = 0;                    // j of the tile
  std::size_t col_begin = 0, col_end = 0;  // its keys [col_begin, col_end)
  bool skipped = false;                    // the mask left the whole query tile nothing here: no change
  double m_prev = 0, m_new = 0;            // row i's running max before and after the tile
  double alpha = 1;                        // exp(m_prev − m_new): how much the earlier tiles shrink
  double l_prev = 0, l_new = 0;            // row i's running sum: l_new = alpha·l_prev + Σ p
  std::vector<double> s;                   // (cols) row i's scaled, masked scores in this tile
  std::vector<double> p;                   // (cols) exp(s − m_new)
  double share = 0;  // the explained key's p times the alphas so far: its part of l_new (0 before its tile)
};

struct FlashExplanation {
  TileSize tile_size;
  std::size_t query_tile = 0, row_begin = 0, row_end = 0;  // the query tile holding row i
  std::size_t key_tile = 0;                                // the key tile holding key j
  std::vector<FlashTileStep> steps;                        // every key tile of that query tile, in order
  double s = 0;                                            // s_ij as the tile held it (-inf: masked)
  double p = 0;                                            // exp(s_ij − m_new) at the key's tile
  std::vector<double> later_alphas;  // the alpha of every later key tile (skipped ones rescale nothing)
  double alpha_product = 1;          // their product, in double
  double l = 0;                      // the final running sum
  double weight = 0;                 // p·Π alpha / l, in double: the weight flash never forms
  std::vector<double> weights;       // (m) every key's weight of row i, formed the same way
  double naive_weight = 0;           // a_ij of naive in the same dtype
  double tolerance = 0;              // how far the two may be apart (flash_weight_tolerance)
  bool within = false;               // |weight − naive_weight| <= tolerance
};

// A stage of the score chain between the scale and the mask (model/score_chain.hpp) that the input has:
// the step it makes and the score after it.
struct StageValue {
  Stage stage;
  std::string_view step;     // "capped"
  std::string_view formula;  // "S_c = c·tanh(S'/c)"
  double value = 0;          // from its step
};

struct Explanation {
  DType dtype = DType::float32;
  Engine engine = Engine::naive;
  std::size_t batch = 0, head = 0, kv_head = 0, query = 0, key = 0;
  std::size_t h = 1, g = 1, d_k = 0, d_v = 0;
  bool batched = false, cross = false, output_projection = false;
  std::string query_token;              // tokens[b][i]
  std::vector<std::string> key_tokens;  // (m) context_tokens[b]

  // 1. the inputs, rounded to the dtype
  std::vector<double> x;  // (d_model) X[b][i]
  std::vector<double> c;  // (d_context) C[b][j]: X[b][j] in self-attention
  // 2. the projections: q[e] = Σ_r x_r·W_q[r][hd·d_k + e] + b_q, k[e] = Σ_r c_r·W_k[r][kv·d_k + e] + b_k
  std::vector<ProductSum> q, k;  // (d_k) each value from q_heads, k_heads
  // 2b. with RoPE: q and k turned by their positions (from q_rot, k_rot); empty without
  std::vector<double> q_rot, k_rot;  // (d_k)
  double pos_q = 0, pos_k = 0;       // the positions of query i and key j
  std::vector<double> theta;         // (dims/2) θ_i
  std::string rope_pairs;            // "(i, i + 2)" or "(2i, 2i + 1)"
  // 3. the score and its scale
  ProductSum dot;    // q·k = Σ_e q_e·k_e (the turned ones with RoPE); value from the scores step
  double scale = 1;  // in the dtype
  bool scale_given = false;
  double scaled = 0;  // s = scale·q·k, from the scaled step
  // 3a. with softcap: c·tanh(s/c), its value the capped step's (in `stages`)
  std::optional<double> softcap;  // c
  // 3b. with ALiBi: s + b, b = -slope·(pos_i - pos_j), its value the bias step's (in `stages`)
  std::optional<double> alibi;  // b
  double slope = 0, alibi_pos_q = 0, alibi_pos_k = 0;
  // 3c. every stage between the scale and the mask that the input has, in the chain's order (the two
  // above among them): each is explained, the ones without a line of their own by their step's formula
  std::vector<StageValue> stages;
  // What the mask applies to: s after every stage of `stages`.
  double mask_input() const { return stages.empty() ? scaled : stages.back().value; }
  // 4. the mask
  bool allowed = true;
  std::string mask;         // Mask::summary()
  std::string mask_reason;  // why (i, j) is forbidden; empty when allowed
  bool empty_row = false;   // the mask leaves row i no key at all
  // 5. naive's softmax of row i
  std::vector<SoftmaxEntry> row;  // (m)
  std::size_t argmax = 0;         // the key that holds the row max
  double row_max = 0, row_sum = 0;
  double weight = 0;  // a_ij, the weights step
  // 5a. with sinks: the head's sink, one more logit in the row's max and sum, of no value
  std::optional<double> sink;  // s_h, in the dtype
  double sink_exp = 0;         // exp(s_h − max), a term of row_sum
  double sink_weight = 0;      // its share of the row, from the sink_weights step
  bool max_is_sink = false;    // the sink holds the row max (argmax is then no key)
  // 5b. with dropout: what the keep mask does to a_ij
  std::optional<double> dropout;  // p
  bool kept = true;               // the keep mask keeps (b, head, i, j)
  double dropped = 0;             // a_ij·1/(1 − p), or 0: the dropped step
  std::vector<double> factors;    // (m) each key's factor in row i: 1/(1 − p) or 0 (empty without dropout)
  // 6. with Engine::flash: the tile walk
  std::optional<FlashExplanation> flash;
  // 7. the head output of row i: o[e] = Σ_j' a_ij'·v_j'[e], a and o from the explained engine
  std::vector<double> v;      // (d_v) v_j, from v_heads
  std::vector<ProductSum> o;  // (d_v) value from head_outputs (flash: O / l of its pass); with dropout it sums
                              // the dropped weights
};

// How far flash's weight may be from naive's by rounding alone (docs/cli.md, "explain"). Both reach
// a_ij = exp(s_ij − M) / Σ_j' exp(s_ij' − M), M the row max: naive with one exp, flash with exp(s_ij − m)
// times the later rescales exp(m_prev − m_new), whose arguments telescope to M − s_ij. Each subtraction is
// off by u times its size, each exp by 2u, each addition, product and quotient by u. With R the spread
// M − min s of the allowed keys, T_c key tiles and m keys, to first order flash's weight is within
// (2R + 7·T_c + m + 1)·u of the exact one and naive's within (2R + m + 4)·u; the sum is doubled for
// safety. Scores that differ by up to δs change a weight by a factor up to e^(2·δs), and underflow can
// lose η (the smallest subnormal) per exp and addition:
//   tolerance = a·(2u·(4R + 7·T_c + 2m + 5) + e^(2·δs) − 1) + 2·(m + T_c + 2)·η
double flash_weight_tolerance(double weight, double spread, double score_gap, std::size_t key_tiles, std::size_t m,
                              DType dtype);

// Runs `request.engine` (flash: with naive beside it) on `problem` in request.dtype, keeping one head,
// and explains a_ij. The indices must be in range (std::out_of_range otherwise).
Explanation explain_weight(const std::shared_ptr<const Problem>& problem, const ExplainRequest& request);

// The steps explain_weight keeps, read from the step graph: every step the head outputs are computed
// from, from the heads on (the projections are worked out term by term from the input).
std::vector<Step> steps_explaining_weight(const Problem& p);

// ------------------------------------------------------------------ one output number

struct OutputRequest {
  std::size_t batch = 0;
  std::size_t query = 0;   // i
  std::size_t column = 0;  // C, a column of Y
  Engine engine = Engine::naive;
  DType dtype = DType::float32;
  TileSize tile_size;
};

struct OutputExplanation {
  DType dtype = DType::float32;
  Engine engine = Engine::naive;
  std::size_t batch = 0, query = 0, column = 0;
  std::size_t h = 1, d_v = 0, d_out = 0;
  bool batched = false, output_projection = false;
  std::string query_token;

  // With W_o: Y[b][i][C] = Σ_k concat[i][k]·W_o[k][C] + b_o[C], concat[i][hd·d_v + e] = o^hd_i[e].
  // Without: Y[b][i][C] = concat[i][C] = o^hd_i[e] = Σ_j a_ij·v_j[e], hd = C / d_v, e = C mod d_v.
  ProductSum y;                         // value from the output step
  std::vector<double> head_sums;        // (h) with W_o: each head's d_v terms summed, its share of Y
  std::vector<std::size_t> top;         // with W_o: the features k of the largest |terms|, largest first (up to 5)
  std::size_t head = 0, feature = 0;    // without W_o: which head output Y[C] is
  std::vector<std::string> key_tokens;  // (m) without W_o: the keys of the terms
};

// Runs `request.engine` on `problem` in request.dtype and explains Y[b][i][C]. The indices must be in
// range (std::out_of_range otherwise).
OutputExplanation explain_output(const std::shared_ptr<const Problem>& problem, const OutputRequest& request);

// The most explain_output keeps, read from the step graph: what the head outputs are computed from, and
// every step after them.
std::vector<Step> steps_explaining_output(const Problem& p);

}  // namespace attn
