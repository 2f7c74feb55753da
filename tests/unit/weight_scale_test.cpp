// The weights' colour scales (src/render/draw/colormap.hpp's WeightScale, panel.hpp's Shading): absolute,
// each row to its own largest, log10, and automatic's choice between the first two. The expected shades
// are worked by hand from the panel below, a causal 5 × 5 of weights.

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "render/draw/colormap.hpp"
#include "render/draw/panel.hpp"

using namespace attn;

namespace {

// Rows 0..4 of a causal mask: row i keeps keys 0..i. Row maxima 1, 0.6, 0.4, 0.3, 0.2.
Panel causal_weights(std::size_t rows = 5) {
  const std::vector<std::vector<double>> kept = {
      {1}, {0.6, 0.4}, {0.3, 0.3, 0.4}, {0.2, 0.25, 0.25, 0.3}, {0.2, 0.2, 0.2, 0.2, 0.2}};
  Panel p{Step::weights};
  p.rows = rows;
  p.cols = 5;
  p.values.assign(rows * 5, 0.0);
  p.removed.assign(rows * 5, 1);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      p.values[i * 5 + j] = kept[i][j];
      p.removed[i * 5 + j] = 0;
    }
  return p;
}

}  // namespace

TEST_CASE("The row scale shades each weight as a fraction of its row's largest kept weight", "[render][colormap]") {
  const Panel p = causal_weights();
  const ColorRange range = panel_range({&p}, WeightScale::row);
  CHECK(range.weights == WeightScale::row);
  CHECK(range.scale == ColorScale::sequential);
  const Shading shade(p, range);
  CHECK(shade.at(0, 0) == 1);
  CHECK(shade.at(1, 1) == Approx(0.4 / 0.6));
  CHECK(shade.at(4, 2) == 1);  // 0.2 of a row whose largest is 0.2: the top colour, not the bottom
  CHECK(shade.at(3, 0) == Approx(0.2 / 0.3));
  // A block: the mean shade of what the mask kept; a block the mask removed whole says so.
  const Shading::Block b = shade.block(3, 5, 3, 5);  // kept: (3,3) 0.3/0.3, (4,3) 1, (4,4) 1
  CHECK_FALSE(b.removed);
  CHECK(b.shade == Approx(1.0));
  CHECK(b.value == Approx((0.3 + 0.2 + 0.2) / 3));
  CHECK(shade.block(0, 2, 2, 5).removed);
}

TEST_CASE("The absolute scale shades every row on one scale, from 0 to the largest weight", "[render][colormap]") {
  const Panel p = causal_weights();
  const ColorRange range = panel_range({&p}, WeightScale::absolute);
  CHECK(range.weights == WeightScale::absolute);
  CHECK(range.lo == 0);
  CHECK(range.hi == 1);
  const Shading shade(p, range);
  CHECK(shade.at(4, 2) == Approx(0.2));
  CHECK(shade.at(1, 1) == Approx(0.4));
}

TEST_CASE("The log scale spans log10 from the smallest kept weight, at most 6 decades down, to the largest",
          "[render][colormap]") {
  const Panel p = causal_weights();
  const ColorRange range = panel_range({&p}, WeightScale::log);
  CHECK(range.weights == WeightScale::log);
  CHECK(range.lo == 0.2);
  CHECK(range.hi == 1);
  CHECK(range.position(0.2) == 0);
  CHECK(range.position(1) == 1);
  CHECK(range.position(std::sqrt(0.2)) == Approx(0.5));  // halfway in log10
  CHECK(range.position(0) == 0);                         // an unmasked 0 takes the bottom colour
  Panel tiny = p;
  tiny.values[4 * 5 + 0] = 1e-12;
  const ColorRange floor = panel_range({&tiny}, WeightScale::log);
  CHECK(floor.lo == Approx(1e-6));
  CHECK(floor.position(1e-12) == 0);
}

TEST_CASE("auto picks the row scale when rows' largest weights differ more than 4 times, else absolute",
          "[render][colormap]") {
  const Panel five = causal_weights(5);  // 1 / 0.2 = 5 > 4
  CHECK(panel_range({&five}, WeightScale::automatic).weights == WeightScale::row);
  const Panel four = causal_weights(4);  // 1 / 0.3 = 3.3
  CHECK(panel_range({&four}, WeightScale::automatic).weights == WeightScale::absolute);
  // Masked cells are left out: a 0 the mask put there is no row's largest, nor its smallest.
  CHECK(scale_words(panel_range({&five}, WeightScale::automatic)) ==
        "row scale: each row from 0 to its own largest weight");
  CHECK(scale_words(panel_range({&four}, WeightScale::automatic)) == "absolute scale: one scale for every row");
}

TEST_CASE("A signed step keeps its diverging scale about 0 whatever scale the weights were asked",
          "[render][colormap]") {
  Panel scores{Step::scores};
  scores.rows = 2;
  scores.cols = 2;
  scores.values = {-1, 4, 2, 0.5};
  for (const WeightScale asked : {WeightScale::row, WeightScale::log, WeightScale::automatic}) {
    const ColorRange range = panel_range({&scores}, asked);
    CHECK(range.scale == ColorScale::diverging);
    CHECK(range.weights == WeightScale::absolute);
    CHECK(range.lo == -4);
    CHECK(scale_words(range).empty());
  }
}

TEST_CASE("A colour range wider than the largest double still places its values, from one end to the other",
          "[render][colormap]") {
  // Scores of ±1.44e308 (tests/data/fuzz/heatmap_span_overflow.json): hi − lo is past the largest double,
  // and (x − lo)/(hi − lo) was inf/inf, a NaN shade that the ramp cast to an index (the fuzzer's find).
  const ColorRange range = color_range(std::vector<double>{-1.44e308, 0.0, 1.44e308}.data(), 3, false);
  CHECK(range.position(-1.44e308) == 0);
  CHECK(range.position(0) == 0.5);
  CHECK(range.position(1.44e308) == 1);
  CHECK(range.position(0.72e308) == Approx(0.75));
  // And within the range, as before: by hand, (0.25 − (−1))/(1 − (−1)).
  CHECK(color_range(std::vector<double>{-1.0, 1.0}.data(), 2, false).position(0.25) == 0.625);
}
