// The memory estimate that --max-memory checks: worked out by hand from the sizes.

#include <cstdint>
#include <limits>

#include <catch2/catch.hpp>

#include "engine/estimate.hpp"
#include "io/load.hpp"
#include "json/error.hpp"
#include "request/memory.hpp"

using namespace attn;

TEST_CASE("Size products that would overflow 64 bits are reported as too large, not wrapped", "[estimate]") {
  const std::size_t half = std::size_t{1} << 32;
  CHECK(checked_mul(half, half) == too_large);  // 2^64 does not fit
  CHECK(checked_mul(half, half - 1) == half * (half - 1));
  CHECK(checked_add(too_large - 1, 2) == too_large);
  CHECK(product(std::size_t{1} << 40, std::size_t{1} << 30) == too_large);
  CHECK(checked_mul(too_large, 0) == too_large);  // too large stays too large
}

TEST_CASE("The naive estimate counts two score buffers and a trace of every step", "[estimate]") {
  // The worked example: B = 1, n = m = 3, d_model = 4, h = g = 1, d_k = d_v = 2, no W_o (d_out = 2).
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json");
  // Shared values by hand: X 12 + C 12 + W_q 8 + W_k, W_v 16 + W_o 1·2·2 = 4 (counted from the
  // sizes, present or not) + Q and heads 2·6 = 12 + K, V and heads 2·3·4 = 24
  // + head outputs, concat, output 3·3·(2 + 2) = 36: 124.
  REQUIRE(shared_values(p) == 124);
  RunShape shape;
  shape.naive = true;
  shape.scalar = 4;
  const std::size_t scores = 9;  // h·n·m
  CHECK(estimate_memory(p, shape).engine == (124 + 2 * scores) * 4);
  CHECK(estimate_memory(p, shape).trace == 0);

  shape.shared_traced = true;
  shape.score_steps_traced = 4;
  CHECK(estimate_memory(p, shape).trace == (124 + 4 * scores) * 8);
  shape.json = true;
  CHECK(estimate_memory(p, shape).trace == (124 + 4 * scores) * (8 + 14));
}

TEST_CASE("The flash estimate does not grow with n·m unless its tiles are traced", "[estimate]") {
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json");
  RunShape shape;
  shape.naive = false;
  shape.flash = true;
  shape.tile_size = {2, 1};
  // Two tiles' worth besides the shared values: 2·Br·(Bc + d_v + 3) = 2·2·(1 + 2 + 3) = 24.
  CHECK(estimate_memory(p, shape).engine == (124 + 24) * 4);
  shape.tiles_traced = true;
  // Tr = 2, Tc = 3 tiles, each 2·Br·Bc + Br·(d_v + 5) = 4 + 14 = 18 values.
  CHECK(estimate_memory(p, shape).trace == 1 * 1 * 2 * 3 * 18 * 8);
}

TEST_CASE("compare's estimate counts the wider reference and the noise floor's copies in double", "[estimate]") {
  const Problem p = load_problem_file(ATTN_SOURCE_DIR "/data/the_cat_sat.json");
  RunShape shape;
  shape.naive = true;
  shape.flash = true;
  shape.scalar = 4;
  shape.reference_scalar = 8;
  // By hand for the worked example (n = m = 3, d_model = 4, one head, d_k = d_v = 2): the shared
  // values are 124 (as in the tests above) and one score buffer 9; the reference's naive run holds
  // (124 + 2 · 9) · 8 bytes, and the noise floor 2 · 124 more doubles.
  CHECK(estimate_memory(p, shape).engine == (124 + 2 * 9) * 8 + 2 * 124 * 8);
}

TEST_CASE("The sizes of --max-memory are read in bytes, and a size past what size_t holds is held at its largest",
          "[estimate]") {
  // By hand: 1024-based units, the B and iB suffixes optional, case ignored.
  CHECK(parse_size("1000000") == 1'000'000);
  CHECK(parse_size("1536K") == 1536u * 1024);
  CHECK(parse_size("1.5GiB") == 3u * 512 * 1024 * 1024);
  CHECK(parse_size("512mb") == 512u * 1024 * 1024);
  CHECK(parse_size("4G") == std::uint64_t{4} << 30);
  // Where size_t is 32 bits (the explorer's WebAssembly core), 4G = 2^32 would wrap to 0 and refuse every
  // run: it is 2^32 − 1 there instead, and a size below that is kept as it is.
  const std::uint64_t largest32 = std::numeric_limits<std::uint32_t>::max();
  CHECK(parse_size("4G", largest32) == largest32);
  CHECK(parse_size("16T", largest32) == largest32);
  CHECK(parse_size("1G", largest32) == std::uint64_t{1} << 30);
  CHECK(parse_size("4294967295", largest32) == largest32);
  // On a 64-bit platform a size this large is still within size_t, and kept.
  CHECK(parse_size("9e18") == std::size_t{9'000'000'000'000'000'000u});
  CHECK_THROWS_AS(parse_size("lots"), UsageError);
  CHECK_THROWS_AS(parse_size("-1G"), UsageError);
}
