// The dump readers on files that numpy and the safetensors layout made, rather than this project's
// tests: the fuzzer's seeds fuzz/seeds/dump_* (fuzz/seeds/README.md says how each was written), with
// the values they were written from.

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "formats/json_dump.hpp"
#include "formats/npy.hpp"
#include "formats/safetensors.hpp"

using namespace attn;

namespace {

std::string seed(const std::string& name) {
  const std::string path = std::string(ATTN_SOURCE_DIR) + "/fuzz/seeds/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("Files written by numpy.save read back with the values they were saved from", "[npy]") {
  const DumpTensor f2 = read_npy(seed("dump_f2_v1.npy"), "dump_f2_v1.npy", false);
  CHECK(f2.dtype == DumpDType::float16);
  CHECK(f2.shape == Shape{2, 2});
  CHECK(f2.values == std::vector<double>{1.0, -2.0, 0.5, std::numeric_limits<double>::infinity()});

  const DumpTensor f4 = read_npy(seed("dump_f4_v2.npy"), "dump_f4_v2.npy", false);  // format version 2.0
  CHECK(f4.dtype == DumpDType::float32);
  CHECK(f4.values == std::vector<double>{1.5, -0.25, 3.0});

  const DumpTensor f8 = read_npy(seed("dump_f8_scalar.npy"), "dump_f8_scalar.npy", false);
  CHECK(f8.shape.empty());
  CHECK(f8.values == std::vector<double>{0.1});

  const DumpTensor bf16 = read_npy(seed("dump_bf16_u2.npy"), "dump_bf16_u2.npy", true);  // 0x3F80, 0xC040
  CHECK(bf16.dtype == DumpDType::bfloat16);
  CHECK(bf16.values == std::vector<double>{1.0, -3.0});
}

TEST_CASE("A .safetensors file written from the format's description reads back in header order", "[safetensors]") {
  const auto t = read_safetensors(seed("dump_all_dtypes.safetensors"), "dump_all_dtypes.safetensors");
  REQUIRE(t.size() == 4);
  CHECK(t[0].first == "a");
  CHECK(t[0].second.values == std::vector<double>{1.0, 65504.0});
  CHECK(t[1].second.values == std::vector<double>{0x1.FEp127});  // BF16 0x7F7F
  CHECK(t[2].second.values == std::vector<double>{-0.25});
  CHECK(t[3].second.shape == Shape{2});
  CHECK(std::signbit(t[3].second.values[1]));
}

TEST_CASE("The nested-array seed reads with inf and nan", "[json-dump]") {
  const DumpTensor t = read_json_dump(seed("dump_nested.json"), "dump_nested.json");
  CHECK(t.shape == Shape{2, 2, 2});
  CHECK(std::isinf(t.values[3]));
  CHECK(std::isnan(t.values[5]));
  CHECK(t.values[6] == 1000.0);
}
