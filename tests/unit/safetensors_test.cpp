// The .safetensors reader (src/formats/safetensors.hpp) on files made here byte by byte: every dtype with
// values worked out by hand from their bits, then malformed files, each refused with a message that
// names the problem and the JSON Pointer of the header entry at fault.

#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "dump_bytes.hpp"
#include "formats/safetensors.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::string st_error(const std::string& bytes) {
  return refusal([&] { return read_safetensors(bytes, "t.safetensors"); }, "t.safetensors");
}

std::string st_pointer(const std::string& bytes) {
  try {
    (void)read_safetensors(bytes, "t.safetensors");
  } catch (const InputError& e) {
    return e.pointer();
  }
  return "(no error)";
}

// One F32 tensor "x" of shape [2] at [0, 8], with `entry` replacing its entry when given.
std::string one_tensor(const std::string& entry = R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})",
                       const std::string& data = le32(0x3F800000) + le32(0x40000000)) {
  return safetensors_file(R"({"x": )" + entry + "}", data);
}

}  // namespace

TEST_CASE("Every dtype of a .safetensors file reads with its shape, in the header's order", "[safetensors]") {
  // d: F64 [2] at [10, 26]: 0x3FF0000000000000 = 1, 0x8000000000000000 = -0.
  // a: F16 [2] at [0, 4]: 0x3C00 = 1, 0x7BFF = 65504.
  // b: BF16 [1, 1] at [4, 6]: 0x7F7F = (2 - 2^-7) · 2^127.
  // c: F32 [] at [6, 10]: 0xBE800000 = -0.25.
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "d": {"dtype": "F64", "shape": [2], "data_offsets": [10, 26]},)"
      R"( "a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},)"
      R"( "b": {"dtype": "BF16", "shape": [1, 1], "data_offsets": [4, 6]},)"
      R"( "c": {"dtype": "F32", "shape": [], "data_offsets": [6, 10]}}  )";  // padded with spaces, as allowed
  const std::string data = le16(0x3C00) + le16(0x7BFF) + le16(0x7F7F) + le32(0xBE800000) + le64(0x3FF0000000000000ULL) +
                           le64(0x8000000000000000ULL);
  const auto tensors = read_safetensors(safetensors_file(header, data), "t.safetensors");
  REQUIRE(tensors.size() == 4);
  CHECK(tensors[0].first == "d");
  CHECK(tensors[0].second.dtype == DumpDType::float64);
  CHECK(tensors[0].second.shape == Shape{2});
  CHECK(tensors[0].second.values[0] == 1.0);
  CHECK(tensors[0].second.values[1] == 0.0);
  CHECK(std::signbit(tensors[0].second.values[1]));
  CHECK(tensors[1].first == "a");
  CHECK(tensors[1].second.dtype == DumpDType::float16);
  CHECK(tensors[1].second.values == std::vector<double>{1.0, 65504.0});
  CHECK(tensors[2].first == "b");
  CHECK(tensors[2].second.dtype == DumpDType::bfloat16);
  CHECK(tensors[2].second.shape == Shape{1, 1});
  CHECK(tensors[2].second.values == std::vector<double>{0x1.FEp127});
  CHECK(tensors[3].first == "c");
  CHECK(tensors[3].second.dtype == DumpDType::float32);
  CHECK(tensors[3].second.shape.empty());
  CHECK(tensors[3].second.values == std::vector<double>{-0.25});
}

TEST_CASE("A .safetensors file with no tensors, or an empty one, reads", "[safetensors]") {
  CHECK(read_safetensors(safetensors_file("{}", ""), "t.safetensors").empty());
  const auto t = read_safetensors(
      safetensors_file(R"({"e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}})", ""), "t.safetensors");
  REQUIRE(t.size() == 1);
  CHECK(t[0].second.shape == Shape{0, 4});
  CHECK(t[0].second.values.empty());
}

TEST_CASE("Malformed .safetensors files are refused with a message that names the problem", "[safetensors]") {
  const std::string good = one_tensor();
  REQUIRE(read_safetensors(good, "t.safetensors")[0].second.values == std::vector<double>{1.0, 2.0});

  SECTION("truncated") {
    CHECK_THAT(st_error(""), Catch::Contains("8-byte header length"));
    CHECK_THAT(st_error(good.substr(0, 5)), Catch::Contains("8-byte header length"));
    CHECK_THAT(st_error(good.substr(0, 20)), Catch::Contains("runs past the end of the file"));
    CHECK_THAT(st_error(good.substr(0, good.size() - 1)),
               Catch::Contains("ends at 8, past the end of the data (7 bytes)"));
  }
  SECTION("a header length of 0, past the end, or NaN") {
    CHECK_THAT(st_error(le64(0) + "{}"), Catch::Contains("header length is 0"));
    CHECK_THAT(st_error(le64(1000) + "{}"), Catch::Contains("header length 1000 runs past the end"));
    // The bytes of a double NaN, read as the length: 0x7FF8000000000000.
    CHECK_THAT(st_error(le64(0x7FF8000000000000ULL) + good.substr(8)),
               Catch::Contains("header length 9221120237041090560 runs past the end"));
  }
  SECTION("a header that is not a JSON object") {
    CHECK_THAT(st_error(safetensors_file("[1, 2]", "")), Catch::Contains("does not start with '{'"));
    CHECK_THAT(st_error(safetensors_file(R"({"x": )", "")),
               Catch::Contains("in the .safetensors header: invalid JSON"));
    CHECK_THAT(st_error(safetensors_file(R"({"x": {}, "x": {}})", "")), Catch::Contains("duplicate key"));
    std::string deep;
    for (int i = 0; i < 100; ++i) deep += R"({"a": )";
    deep += '1';
    deep.append(100, '}');
    CHECK_THAT(st_error(safetensors_file(deep, "")), Catch::Contains("nested deeper than 64 levels"));
    CHECK_THAT(st_error(safetensors_file(R"({"__metadata__": 3})", "")),
               Catch::Contains("__metadata__ must be an object"));
  }
  SECTION("wrong dtype strings") {
    const auto with = [&](const std::string& dtype) {
      return one_tensor(R"({"dtype": ")" + dtype + R"(", "shape": [2], "data_offsets": [0, 8]})");
    };
    CHECK_THAT(st_error(with("I64")), Catch::Contains("tensor 'x' has dtype 'I64': only F16, BF16, F32 and F64"));
    CHECK_THAT(st_error(with("U8")), Catch::Contains("has dtype 'U8'"));
    CHECK_THAT(st_error(with("f32")), Catch::Contains("has dtype 'f32'"));
    CHECK(st_pointer(with("I64")) == "/x/dtype");
    CHECK_THAT(st_error(one_tensor(R"({"dtype": 32, "shape": [2], "data_offsets": [0, 8]})")),
               Catch::Contains("dtype must be a string"));
  }
  SECTION("entries that are not dtype, shape and data_offsets") {
    CHECK_THAT(st_error(one_tensor(R"({"shape": [2], "data_offsets": [0, 8]})")), Catch::Contains("has no \"dtype\""));
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1})")),
               Catch::Contains("unknown key 'x'"));
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})")),
               Catch::Contains("an extent must be a whole number"));
    CHECK(st_pointer(one_tensor(R"({"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]})")) == "/x/shape/0");
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]})")),
               Catch::Contains("two whole numbers"));
  }
  SECTION("offsets out of order, past the end, overlapping, leaving holes, or of the wrong length") {
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})")),
               Catch::Contains("begins at 8, after its end 0"));
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 16]})")),
               Catch::Contains("ends at 16, past the end of the data (8 bytes)"));
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 8]})")),
               Catch::Contains("needs 4 bytes, but its offsets hold 8"));
    const std::string overlap = safetensors_file(
        R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
        le32(0) + le32(0));
    CHECK_THAT(st_error(overlap), Catch::Contains("tensor 'y' [4, 8] overlaps tensor 'x' [0, 8]"));
    CHECK(st_pointer(overlap) == "/y/data_offsets");
    const std::string hole = safetensors_file(
        R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "y": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
        le32(0) + le32(0) + le32(0));
    CHECK_THAT(st_error(hole), Catch::Contains("bytes 4 to 8 of the data belong to no tensor"));
    CHECK_THAT(st_error(good + "xyzw"), Catch::Contains("bytes 8 to 12 of the data belong to no tensor"));
  }
  SECTION("a 2 GiB claimed shape in a small file, and a shape whose size overflows") {
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F16", "shape": [1073741824], "data_offsets": [0, 2147483648]})")),
               Catch::Contains("ends at 2147483648, past the end of the data (8 bytes)"));
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F16", "shape": [1073741824], "data_offsets": [0, 8]})")),
               Catch::Contains("needs 2147483648 bytes, but its offsets hold 8"));
    CHECK_THAT(st_error(one_tensor(R"({"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]})")),
               Catch::Contains("needs more than 2^64 bytes"));
  }
}
