// The reader of tensors written as JSON nested arrays (src/formats/json_dump.hpp): shapes from the nesting,
// the strings a trace uses for inf and nan, and ragged or non-numeric arrays refused at their JSON Pointer.

#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "dump_bytes.hpp"
#include "formats/json_dump.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::string dump_error(const std::string& text) {
  return refusal([&] { return read_json_dump(text, "t.json"); }, "t.json");
}

std::string dump_pointer(const std::string& text) {
  try {
    (void)read_json_dump(text, "t.json");
  } catch (const InputError& e) {
    return e.pointer();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("JSON nested arrays read with their shape from the nesting, in row-major order", "[json-dump]") {
  const DumpTensor t = read_json_dump("[[[1, 2], [3, 4.5]], [[-1, 0], [1e3, -2.5e-1]]]", "t.json");
  CHECK(t.dtype == DumpDType::float64);
  CHECK(t.shape == Shape{2, 2, 2});
  CHECK(t.values == std::vector<double>{1, 2, 3, 4.5, -1, 0, 1000, -0.25});
  CHECK(read_json_dump("[1, 2, 3]", "t.json").shape == Shape{3});
  const DumpTensor scalar = read_json_dump(" 7 ", "t.json");
  CHECK(scalar.shape.empty());
  CHECK(scalar.values == std::vector<double>{7});
  CHECK(read_json_dump("[]", "t.json").shape == Shape{0});
  CHECK(read_json_dump("[[], []]", "t.json").shape == Shape{2, 0});
}

TEST_CASE("The strings inf, -inf and nan read as those values, as in a trace", "[json-dump]") {
  const DumpTensor t = read_json_dump(R"(["inf", "-inf", "nan", 0])", "t.json");
  CHECK(t.values[0] == std::numeric_limits<double>::infinity());
  CHECK(t.values[1] == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(t.values[2]));
}

TEST_CASE("Ragged, non-numeric or too deep arrays are refused at the JSON Pointer of the first bad row",
          "[json-dump]") {
  CHECK_THAT(dump_error("[[1, 2], [3]]"), Catch::Contains("a list of 1 where the first at this depth has 2"));
  CHECK(dump_pointer("[[1, 2], [3]]") == "/1");
  CHECK(dump_pointer("[[1, 2], [3, [4]]]") == "/1/1");
  CHECK_THAT(dump_error("[[1, 2], [3, [4]]]"), Catch::Contains("ragged"));
  CHECK(dump_pointer("[[1, 2], 3]") == "/1");
  CHECK(dump_pointer("[[[1], [2]], [[3], [4], [5]]]") == "/1");
  CHECK_THAT(dump_error(R"([1, "x"])"), Catch::Contains("this string is not a number"));
  CHECK(dump_pointer(R"([1, "x"])") == "/1");
  CHECK_THAT(dump_error("[1, null]"), Catch::Contains("null is not a number"));
  CHECK_THAT(dump_error(R"({"a": [1]})"), Catch::Contains("an object where nested lists"));
  CHECK_THAT(dump_error(""), Catch::Contains("the file is empty (0 bytes): expected nested lists of numbers"));
  CHECK_THAT(dump_error(" \n\t"), Catch::Contains("the file is blank (3 bytes, all white space)"));
  CHECK_THAT(dump_error("[1, 2"), Catch::Contains("invalid JSON"));
  CHECK_THAT(dump_error(std::string(100, '[') + std::string(100, ']')), Catch::Contains("nested deeper than 64"));
}
