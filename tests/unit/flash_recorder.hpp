#pragma once
// The flash tests' shared parts: an observer that keeps every tile flash reports (tests/unit/flash_test.cpp,
// flash_tiles_test.cpp), and random configurations (a problem, its mask and its tile sizes) with a line
// that describes one.

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/flash.hpp"
#include "mask_spec.hpp"
#include "support.hpp"

namespace attn::test {

// ------------------------------------------------------------------------------------- observers

// Keeps the steps it is asked for, every flash tile (in double), the end of every query tile and lse.
class FlashRecorder final : public Observer {
 public:
  struct Tile {
    std::size_t batch, head, i, j, row_begin, row_end, col_begin, col_end;
    bool skipped;
    bool has_matrices;  // every pointer set (a skipped tile must have none)
    bool has_no_matrices;
    Tensor<double> S, m_prev, m_new, alpha, P, l_prev, l_new, O;
  };
  struct Final {
    std::size_t batch, head, i, row_begin, row_end;
    Tensor<double> O, lse;
  };

  explicit FlashRecorder(std::vector<Step> steps = {}, bool keep_tiles = true)
      : steps_(std::move(steps)), tiles_(keep_tiles) {}

  bool wants(Step step) const override { return std::find(steps_.begin(), steps_.end(), step) != steps_.end(); }
  void on(Step step, const Tensor<float>& value) override { recorder_.on(step, value); }
  void on(Step step, const Tensor<double>& value) override { recorder_.on(step, value); }
  const Tensor<double>& at(Step step) const { return recorder_.at(step); }

  bool wants_tiles() const override { return true; }
  void on_tile(const TileEvent<float>& e) override { keep(e); }
  void on_tile(const TileEvent<double>& e) override { keep(e); }
  void on_query_tile_done(const QueryTileDone<float>& e) override { keep(e); }
  void on_query_tile_done(const QueryTileDone<double>& e) override { keep(e); }
  void on_lse(const Tensor<float>& lse) override { lse_ = cast<double>(lse); }
  void on_lse(const Tensor<double>& lse) override { lse_ = lse; }

  std::vector<Tile> tiles;
  std::vector<Final> finals;
  std::size_t tile_events = 0;
  const Tensor<double>& lse() const { return lse_; }

 private:
  template <class T>
  void keep(const TileEvent<T>& e) {
    ++tile_events;
    if (!tiles_) return;
    const auto copy = [](const Tensor<T>* t) { return t ? cast<double>(*t) : Tensor<double>(); };
    const bool all = e.S && e.m_prev && e.m_new && e.alpha && e.P && e.l_prev && e.l_new && e.O;
    const bool none = !e.S && !e.m_prev && !e.m_new && !e.alpha && !e.P && !e.l_prev && !e.l_new && !e.O;
    tiles.push_back({e.batch, e.head, e.i, e.j, e.row_begin, e.row_end, e.col_begin, e.col_end, e.skipped, all, none,
                     copy(e.S), copy(e.m_prev), copy(e.m_new), copy(e.alpha), copy(e.P), copy(e.l_prev), copy(e.l_new),
                     copy(e.O)});
  }
  template <class T>
  void keep(const QueryTileDone<T>& e) {
    if (tiles_)
      finals.push_back({e.batch, e.head, e.i, e.row_begin, e.row_end, cast<double>(*e.O), cast<double>(*e.lse)});
  }

  StepRecorder recorder_;
  std::vector<Step> steps_;
  bool tiles_;
  Tensor<double> lse_;
};

inline bool any_nan(const Tensor<double>& t) { return !no_nan(t); }

// ------------------------------------------------------------------------------- random configs

struct Config {
  Problem p;
  MaskSpec spec;
  TileSize blocks;
  double weight_gain = 1;  // W_q and W_k (and their biases) multiplied by this: logits grow as its square
};

inline std::string describe(const Config& c) {
  const Problem& p = c.p;
  return fmt::format(
      "B={} n={} m={} ({}) d_model={} d_k={} d_v={} h={} g={} W_o={} biases={} mask={} align={} "
      "window={} Br={} Bc={} gain={}",
      p.B, p.n, p.m, p.cross ? "cross" : "self", p.d_model, p.d_k, p.d_v, p.h, p.g, p.has_output_projection(),
      !p.b_q.empty(), to_string(c.spec.kind), to_string(c.spec.align), c.spec.window, c.blocks.Br, c.blocks.Bc,
      c.weight_gain);
}

// Sizes up to `max_len` queries and keys, up to 16 wide heads, h in {1, 2, 3, 4, 6} sharing g | h
// key/value heads, up to 3 batch items, self- or cross-attention, any mask, tiles of 1 to 9.
inline Config random_config(std::mt19937& rng, std::size_t max_len) {
  Dims d;
  d.B = pick(rng, 1, 3);
  d.n = pick(rng, 1, max_len);
  d.m = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, max_len);
  d.d_model = pick(rng, 1, 8);
  d.d_context = pick(rng, 1, 8);
  d.h = std::vector<std::size_t>{1, 2, 3, 4, 6}[pick(rng, 0, 4)];
  std::vector<std::size_t> divisors;
  for (std::size_t g = 1; g <= d.h; ++g)
    if (d.h % g == 0) divisors.push_back(g);
  d.g = divisors[pick(rng, 0, divisors.size() - 1)];
  d.d_k = pick(rng, 1, 16);
  d.d_v = pick(rng, 1, 16);
  d.d_out = pick(rng, 0, 1) == 0 ? 0 : pick(rng, 1, 8);
  d.biases = pick(rng, 0, 1) == 1;

  Config c;
  c.p = random_problem(rng, d);
  // logits of order 1 up to about 1e4: the online softmax must rescale by tiny alphas without overflow
  c.weight_gain = std::vector<double>{1, 1, 3, 10, 20, 40, 60}[pick(rng, 0, 6)];
  for (Tensor<double>* w : {&c.p.W_q, &c.p.W_k})
    for (double& x : w->values()) x *= c.weight_gain;
  for (std::vector<double>* b : {&c.p.b_q, &c.p.b_k})
    for (double& x : *b) x *= c.weight_gain;
  c.spec = random_mask(rng, c.p);
  c.blocks = {pick(rng, 1, 9), pick(rng, 1, 9)};
  return c;
}

}  // namespace attn::test
