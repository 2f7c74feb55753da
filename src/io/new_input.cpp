// `attn-trace new`: the input's JSON text, written by hand so that every matrix row has its own line
// and its columns line up, as in data/*.json; quoted (json/quoted.hpp) escapes the tokens.

#include "io/new_input.hpp"
#include "text/words.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "json/quoted.hpp"

namespace attn {

std::string matrix_text(const std::string& lead, std::size_t rows, std::size_t cols,
                        const std::vector<std::string>& texts, std::size_t width) {
  if (width == 0)
    for (const std::string& s : texts) width = std::max(width, s.size());
  std::string out = lead + "[";
  const std::string row_indent = ",\n" + std::string(lead.size() + 1, ' ');
  for (std::size_t r = 0; r < rows; ++r) {
    if (r > 0) out += row_indent;
    out += '[';
    for (std::size_t c = 0; c < cols; ++c) {
      if (c > 0) out += ", ";
      out += fmt::format("{:>{}}", texts[r * cols + c], width);
    }
    out += ']';
  }
  return out + "]";
}

namespace {

std::string token_list(const std::vector<std::string>& tokens) {
  std::vector<std::string> items;
  items.reserve(tokens.size());
  for (const std::string& t : tokens) items.push_back(attn::quoted(t));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

// Hundredths as a decimal with two places: -35 -> "-0.35", 100 -> "1.00".
std::string hundredths(long long h) {
  return fmt::format("{}{}.{:02}", h < 0 ? "-" : "", std::llabs(h) / 100, std::llabs(h) % 100);
}

// How one matrix's numbers are drawn, and the widest of them, for aligned columns.
struct Draw {
  std::function<std::string(SplitMix64&)> value;
  std::size_t width;
};

// X: whole numbers 0..1, or uniform in [-1, 1] to two places.
Draw token_values(bool integers) {
  if (integers) return {[](SplitMix64& rng) { return fmt::format("{}", rng.between(0, 1)); }, 1};
  return {[](SplitMix64& rng) { return hundredths(rng.between(-100, 100)); }, 5};
}

// A weight: whole numbers -1..1, or uniform in [-spread, spread]/√d_model to two places, so that a
// projection's outputs stay about as large as the token values times `spread` whatever d_model is.
Draw weight_values(bool integers, std::size_t d_model, double spread = 1) {
  if (integers) return {[](SplitMix64& rng) { return fmt::format("{}", rng.between(-1, 1)); }, 2};
  const double shrink = spread / std::sqrt(static_cast<double>(d_model));
  return {[shrink](SplitMix64& rng) {
            return hundredths(std::llround(static_cast<double>(rng.between(-100, 100)) * shrink));
          },
          5};
}

constexpr double query_key_spread = 3;

// `lead` (the indented key), then a (rows, cols) matrix drawn row by row, one row per line.
std::string matrix(const std::string& lead, std::size_t rows, std::size_t cols, const Draw& draw, SplitMix64& rng) {
  std::vector<std::string> texts;
  texts.reserve(rows * cols);
  for (std::size_t k = 0; k < rows * cols; ++k) texts.push_back(draw.value(rng));
  return matrix_text(lead, rows, cols, texts, draw.width);
}

std::string mask_json(const NewInputRequest& r) {
  if (r.mask == MaskKind::sliding_window) return fmt::format(R"({{"type": "sliding_window", "window": {}}})", r.window);
  return attn::quoted(std::string(to_string(r.mask)));
}

}  // namespace

std::string new_input_description(const NewInputRequest& r) {
  std::vector<std::string> parts = {plural(r.tokens.size(), "token", "tokens")};
  if (!r.context_tokens.empty())
    parts.push_back(
        fmt::format("cross-attention to {}", plural(r.context_tokens.size(), "context token", "context tokens")));
  parts.push_back(fmt::format("d_model {}", r.d_model));
  parts.push_back(fmt::format("{} of d_k {}", plural(r.heads, "head", "heads"), r.d_k));
  if (r.kv_heads != r.heads)
    parts.push_back(fmt::format("sharing {} ({})", plural(r.kv_heads, "key/value head", "key/value heads"),
                                r.kv_heads == 1 ? "multi-query" : "grouped-query"));
  if (r.mask == MaskKind::sliding_window) parts.push_back(fmt::format("sliding_window mask of {}", r.window));
  else parts.emplace_back(r.mask == MaskKind::causal ? "causal mask" : "no mask");
  parts.emplace_back(r.output_projection ? "W_o" : "no W_o");
  parts.emplace_back(r.integers ? "whole numbers" : "decimals");
  parts.push_back(fmt::format("seed {}", r.seed));
  return fmt::format("made by attn-trace new: {}", fmt::join(parts, ", "));
}

std::string make_new_input(const NewInputRequest& r) {
  SplitMix64 rng(r.seed);
  // W_q and W_k three times wider: X's entries have variance 1/3, so each entry of Q and K has variance
  // d_model · 1/3 · 3/d_model = 1 and a scaled score q·k/√d_k spreads about 1, which gives the weights
  // structure; with the narrower [-1, 1]/√d_model of W_v the scores spread about 1/9 and every row of
  // weights was nearly uniform.
  const Draw x = token_values(r.integers), w = weight_values(r.integers, r.d_model),
             w_qk = weight_values(r.integers, r.d_model, query_key_spread);
  const bool cross = !r.context_tokens.empty();
  // The stream's order: X, the context, W_q, W_k, W_v, W_o; the file puts the context before X.
  const std::string X = matrix("  \"X\":   ", r.tokens.size(), r.d_model, x, rng);
  const std::string C = cross ? matrix("    \"X\": ", r.context_tokens.size(), r.d_model, x, rng) : "";
  const std::string W_q = matrix("  \"W_q\": ", r.d_model, r.heads * r.d_k, w_qk, rng);
  const std::string W_k = matrix("  \"W_k\": ", r.d_model, r.kv_heads * r.d_k, w_qk, rng);
  const std::string W_v = matrix("  \"W_v\": ", r.d_model, r.kv_heads * r.d_k, w, rng);

  std::string out = "{\n";
  out += fmt::format("  \"description\": {},\n", attn::quoted(new_input_description(r)));
  out += fmt::format("  \"tokens\": {},\n", token_list(r.tokens));
  out += fmt::format("  \"n_heads\": {},\n  \"n_kv_heads\": {},\n", r.heads, r.kv_heads);
  out += fmt::format("  \"mask\": {},\n", mask_json(r));
  if (cross) out += fmt::format("  \"context\": {{\n    \"tokens\": {},\n{}\n  }},\n", token_list(r.context_tokens), C);
  out += fmt::format("{},\n{},\n{},\n{}", X, W_q, W_k, W_v);
  if (r.output_projection) out += ",\n" + matrix("  \"W_o\": ", r.heads * r.d_k, r.d_model, w, rng);
  return out + "\n}\n";
}

std::size_t new_input_bytes(const NewInputRequest& r) {
  // In long double, which cannot overflow for any sizes a command line can give.
  const long double d = r.d_model, n = r.tokens.size(), m = r.context_tokens.size(),
                    q_cols = static_cast<long double>(r.heads) * r.d_k,
                    kv_cols = static_cast<long double>(r.kv_heads) * r.d_k;
  const long double numbers = (n + m) * d + d * q_cols + 2 * d * kv_cols + (r.output_projection ? q_cols * d : 0);
  const long double rows = n + m + 3 * d + (r.output_projection ? q_cols : 0);
  long double token_bytes = 0;  // escaped, at most 6 bytes per byte ("\u0001"), quotes and a comma
  for (const auto* list : {&r.tokens, &r.context_tokens})
    for (const std::string& t : *list) token_bytes += 6.0L * t.size() + 4;
  // Each number takes at most 7 bytes ("-0.35, "), each row 16 more; the matrices' texts and the whole
  // text are held at once, and a string may grow to twice its size.
  const long double bytes = 3 * (7 * numbers + 16 * rows + token_bytes + 1024);
  constexpr auto most = std::numeric_limits<std::size_t>::max();
  return bytes >= static_cast<long double>(most) ? most : static_cast<std::size_t>(bytes);
}

}  // namespace attn
