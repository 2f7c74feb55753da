// Text laid out for the terminal (src/render/draw/text.hpp) and the colours of every picture
// (src/render/draw/colormap.hpp). Expected widths follow Unicode's EastAsianWidth.txt (猫 U+732B is W, ｘ
// U+FF58 is F) and its combining marks (U+0301 takes no column); the colours are the published
// viridis and ColorBrewer RdBu end and middle points.

#include <catch2/catch.hpp>

#include "render/draw/colormap.hpp"
#include "render/draw/text.hpp"

using namespace attn;

TEST_CASE("A CJK or fullwidth character takes two columns, a combining accent none, a colour escape none",
          "[render][text]") {
  CHECK(display_width("cat") == 3);
  CHECK(display_width("猫") == 2);
  CHECK(display_width("ｘ") == 2);
  CHECK(display_width("e\xCC\x81") == 1);  // e + U+0301 COMBINING ACUTE ACCENT
  CHECK(display_width("√d_k") == 4);
  CHECK(display_width("\x1b[1;36mhead\x1b[0m") == 4);
  CHECK(display_width("\x1b[48;2;68;1;84m  \x1b[0m") == 2);
}

TEST_CASE("Cutting text never splits a character and never passes the width", "[render][text]") {
  CHECK(truncate_to("attention", 5) == "atte…");
  CHECK(truncate_to("attention", 9) == "attention");
  // 猫猫猫 is 6 columns; in 4 there is room for one cat and the ellipsis, not for half a second cat.
  CHECK(truncate_to("猫猫猫", 4) == "猫…");
  CHECK(display_width(truncate_to("猫猫猫", 4)) == 3);
  CHECK(truncate_to("attention", 6, "...") == "att...");
  // A colour left on where the cut falls is reset.
  CHECK(truncate_to("\x1b[1mattention\x1b[0m", 4) == "\x1b[1matt…\x1b[0m");
}

TEST_CASE("Wrapping breaks at spaces, keeps the first line's indent and runs of spaces, indents the rest",
          "[render][text]") {
  const auto lines = wrap("  name     one two three four", 16, "    ");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "  name     one");
  CHECK(lines[1] == "    two three");
  CHECK(lines[2] == "    four");
  for (const std::string& l : wrap("猫猫 猫猫 猫猫 猫猫", 9, "")) CHECK(display_width(l) <= 9);
  CHECK(wrap("", 10, "  ") == std::vector<std::string>{""});
  // A word longer than the line is broken across lines, nothing cut: joined again it is whole.
  const auto path = wrap("file /check/work/main/data/padded_batch.json", 12, "  ");
  REQUIRE(path.size() == 5);
  CHECK(path[0] == "file /check/");
  CHECK(path[1] == "  work/main/");
  CHECK(path[3] == "  d_batch.js");
  CHECK(path[4] == "  on");
  for (const std::string& l : path) CHECK(display_width(l) <= 12);
  for (const std::string& l : wrap("猫猫猫猫猫猫猫", 5, "")) CHECK(display_width(l) <= 5);
}

TEST_CASE("Plain ASCII spells the printer's symbols out and writes other characters as \\u escapes", "[render][text]") {
  CHECK(to_ascii("S' = S / √d_k") == "S' = S / sqrt(d_k)");
  CHECK(to_ascii("1/√2 = 0.7071") == "1/sqrt(2) = 0.7071");
  CHECK(to_ascii("Q·Kᵀ [3 query × 2 d_k]") == "Q*K^T [3 query x 2 d_k]");
  CHECK(to_ascii("━━ q ━") == "== q =");
  CHECK(to_ascii("猫") == "\\u732B");
  CHECK(to_ascii("\xF0\x9F\x90\x88") == "\\U0001F408");  // U+1F408 CAT
  CHECK(to_ascii("a − b ≥ 0 …") == "a - b >= 0 ...");
}

TEST_CASE("A locale is UTF-8 when its name says so, in either spelling", "[render][text]") {
  CHECK(utf8_locale("C.UTF-8"));
  CHECK(utf8_locale("en_US.utf8"));
  CHECK_FALSE(utf8_locale("C"));
  CHECK_FALSE(utf8_locale("POSIX"));
  CHECK_FALSE(utf8_locale("en_US.ISO-8859-1"));
}

TEST_CASE("Weights are viridis from purple to yellow, signed values blue, white at 0, red, masked cells grey",
          "[render][colormap]") {
  CHECK(hex(color_at(ColorScale::sequential, 0)) == "#440154");
  CHECK(hex(color_at(ColorScale::sequential, 1)) == "#fde725");
  CHECK(hex(color_at(ColorScale::diverging, 0)) == "#2166ac");
  CHECK(hex(color_at(ColorScale::diverging, 0.5)) == "#f7f7f7");
  CHECK(hex(color_at(ColorScale::diverging, 1)) == "#b2182b");
  // The grey of a masked cell is no colour of either map.
  for (int k = 0; k <= 100; ++k) {
    CHECK_FALSE(color_at(ColorScale::sequential, k / 100.0) == removed_color);
    CHECK_FALSE(color_at(ColorScale::diverging, k / 100.0) == removed_color);
  }
}

TEST_CASE("A colour range is sequential from 0 for weights and symmetric about 0 for signed values",
          "[render][colormap]") {
  const double weights[] = {0.0454, 0.7679, 0.1867};
  const ColorRange w = color_range(weights, 3, true);
  CHECK(w.scale == ColorScale::sequential);
  CHECK(w.lo == 0);
  CHECK(w.hi == 0.7679);
  const double scores[] = {-1, 4, 2, -INFINITY};
  const ColorRange s = color_range(scores, 4, false);
  CHECK(s.scale == ColorScale::diverging);
  CHECK(s.lo == -4);
  CHECK(s.hi == 4);
  CHECK(s.position(0) == 0.5);
  CHECK(s.position(-INFINITY) == 0);
  // Scores that happen to be all positive are still signed by nature: white stays 0.
  const double positive[] = {0.5, 1.25};
  const ColorRange p = color_range(positive, 2, false);
  CHECK(p.scale == ColorScale::diverging);
  CHECK(p.lo == -1.25);
  CHECK(p.position(0) == 0.5);
}
