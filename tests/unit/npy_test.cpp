// The .npy reader (src/formats/npy.hpp) on files made here byte by byte: every header version and dtype
// with values worked out by hand from their bits, then malformed files, each refused with a message
// that names the problem.

#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "dump_bytes.hpp"
#include "formats/npy.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::string npy_error(const std::string& bytes, bool bfloat16 = false) {
  return refusal([&] { return read_npy(bytes, "t.npy", bfloat16); }, "t.npy");
}

}  // namespace

TEST_CASE("A version 1.0 file of <f2 reads as float16, inf included", "[npy]") {
  // 0x3C00 = 1, 0xC000 = -2, 0x3555 = (1 + 0x155/1024) / 4 = 0.333251953125, 0x7C00 = inf.
  const std::string data = le16(0x3C00) + le16(0xC000) + le16(0x3555) + le16(0x7C00);
  const DumpTensor t =
      read_npy(npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }", data), "t.npy", false);
  CHECK(t.dtype == DumpDType::float16);
  CHECK(t.shape == Shape{2, 2});
  REQUIRE(t.values.size() == 4);
  CHECK(t.values[0] == 1.0);
  CHECK(t.values[1] == -2.0);
  CHECK(t.values[2] == 0.333251953125);
  CHECK(t.values[3] == std::numeric_limits<double>::infinity());
}

TEST_CASE("A version 2.0 file of <f4 reads as float32, the largest float included", "[npy]") {
  // 0x3FC00000 = 1.5, 0xBE800000 = -0.25, 0x7F7FFFFF = (2 - 2^-23) · 2^127.
  const std::string data = le32(0x3FC00000) + le32(0xBE800000) + le32(0x7F7FFFFF);
  const DumpTensor t =
      read_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data, 2), "t.npy", false);
  CHECK(t.dtype == DumpDType::float32);
  CHECK(t.shape == Shape{3});
  CHECK(t.values == std::vector<double>{1.5, -0.25, static_cast<double>(std::numeric_limits<float>::max())});
}

TEST_CASE("A version 3.0 file of <f8 with shape () reads as a float64 scalar", "[npy]") {
  // 0x3FB999999999999A is the double nearest 0.1.
  const DumpTensor t =
      read_npy(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", le64(0x3FB999999999999AULL), 3),
               "t.npy", false);
  CHECK(t.dtype == DumpDType::float64);
  CHECK(t.shape.empty());
  CHECK(t.values == std::vector<double>{0.1});
}

TEST_CASE("bfloat16 saved as <u2 or |V2 reads as bfloat16 when asked", "[npy]") {
  // 0x3F80 = 1, 0xC040 = -(1 + 64/128) · 2 = -3, 0x4049 = (1 + 73/128) · 2 = 3.140625.
  const DumpTensor u2 =
      read_npy(npy_file("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", le16(0x3F80) + le16(0xC040)),
               "t.npy", true);
  CHECK(u2.dtype == DumpDType::bfloat16);
  CHECK(u2.values == std::vector<double>{1.0, -3.0});
  const DumpTensor v2 =
      read_npy(npy_file("{'descr': '|V2', 'fortran_order': False, 'shape': (1, 1), }", le16(0x4049), 2), "t.npy", true);
  CHECK(v2.dtype == DumpDType::bfloat16);
  CHECK(v2.shape == Shape{1, 1});
  CHECK(v2.values == std::vector<double>{3.140625});
}

TEST_CASE("The header is read whatever its spacing, quotes, key order and trailing commas", "[npy]") {
  const std::string one = le32(0x3F800000);  // 1.0f
  for (const char* dict : {"{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(1,)}",
                           "{ 'shape' : ( 1 , ) , 'descr' : '<f4' , 'fortran_order' : False , }",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }"}) {
    INFO(dict);
    const DumpTensor t = read_npy(npy_file(dict, one), "t.npy", false);
    CHECK(t.shape == Shape{1});
    CHECK(t.values == std::vector<double>{1.0});
  }
  // No padding at all: the data follows the dict's closing brace.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
  const std::string bare = std::string("\x93NUMPY\x01\x00", 8) + le16(dict.size()) + dict + one;
  CHECK(read_npy(bare, "t.npy", false).values == std::vector<double>{1.0});
}

TEST_CASE("A shape with an extent of 0 reads as an empty tensor with no data", "[npy]") {
  const DumpTensor t =
      read_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", ""), "t.npy", false);
  CHECK(t.shape == Shape{0, 3});
  CHECK(t.values.empty());
}

TEST_CASE("Malformed .npy files are refused with a message that names the problem", "[npy]") {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = le32(0x3F800000) + le32(0x40000000);  // 1.0f, 2.0f
  const std::string good = npy_file(f4, two);
  REQUIRE(read_npy(good, "t.npy", false).values == std::vector<double>{1.0, 2.0});

  SECTION("truncated") {
    CHECK_THAT(npy_error(""), Catch::Contains("the file is empty (0 bytes): expected a .npy file"));
    CHECK_THAT(npy_error(good.substr(0, 4)), Catch::Contains("inside the .npy magic"));
    CHECK_THAT(npy_error(good.substr(0, 7)), Catch::Contains("before the .npy version"));
    CHECK_THAT(npy_error(good.substr(0, 9)), Catch::Contains("inside the .npy header length"));
    CHECK_THAT(npy_error(npy_file(f4, two, 2).substr(0, 11)), Catch::Contains("inside the .npy header length"));
    CHECK_THAT(npy_error(good.substr(0, 40)), Catch::Contains("runs past the end of the file"));
    CHECK_THAT(npy_error(good.substr(0, good.size() - 1)), Catch::Contains("needs 8 bytes of data"));
  }
  SECTION("not a .npy file, or a version not read") {
    CHECK_THAT(npy_error("PK\x03\x04 a zip file"), Catch::Contains("not a .npy file"));
    std::string v4 = good;
    v4[6] = 4;
    CHECK_THAT(npy_error(v4), Catch::Contains("version 4.0 is not read"));
    std::string v11 = good;
    v11[7] = 1;
    CHECK_THAT(npy_error(v11), Catch::Contains("version 1.1 is not read"));
  }
  SECTION("a header length past the end") {
    std::string v2 = npy_file(f4, two, 2);
    v2.replace(8, 4, le32(0xFFFFFFFF));
    CHECK_THAT(npy_error(v2), Catch::Contains("header length 4294967295 runs past the end"));
  }
  SECTION("dtypes that are not read") {
    const auto with = [&](const std::string& descr) {
      return npy_file("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }", two);
    };
    CHECK_THAT(npy_error(with(">f4")), Catch::Contains("'>f4' is big-endian"));
    CHECK_THAT(npy_error(with("<i4")), Catch::Contains("'<i4' is not read"));
    CHECK_THAT(npy_error(with("|f1")), Catch::Contains("'|f1' is not read"));
    CHECK_THAT(npy_error(with("<u2")), Catch::Contains("read the file as bfloat16"));
    CHECK_THAT(npy_error(with("|V2")), Catch::Contains("read the file as bfloat16"));
    CHECK_THAT(npy_error(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two)),
               Catch::Contains("structured arrays are not read"));
  }
  SECTION("Fortran order") {
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two)),
               Catch::Contains("C order only; save with np.ascontiguousarray"));
  }
  SECTION("shapes that are not tuples of whole numbers") {
    const auto shaped = [&](const std::string& shape) {
      return npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", two);
    };
    CHECK_THAT(npy_error(shaped("(-2,)")), Catch::Contains("negative extent"));
    CHECK_THAT(npy_error(shaped("(2.0,)")), Catch::Contains("not a whole number"));
    CHECK_THAT(npy_error(shaped("(2)")), Catch::Contains("not a tuple: write (2,)"));
    CHECK_THAT(npy_error(shaped("[2]")), Catch::Contains("a tuple such as (2, 3)"));
    CHECK_THAT(npy_error(shaped("(nan,)")), Catch::Contains("a whole number in the shape"));
    CHECK_THAT(npy_error(shaped("(99999999999999999999999,)")), Catch::Contains("too large"));
  }
  SECTION("a 2 GiB claimed shape in a small file, and a shape whose size overflows") {
    // 1,073,741,824 float16 values are 2 GiB: refused from the header alone.
    CHECK_THAT(npy_error(npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (1073741824,), }", two)),
               Catch::Contains("needs 2147483648 bytes of data, but the file has 8"));
    CHECK_THAT(
        npy_error(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", two)),
        Catch::Contains("needs more than 2^64 bytes"));
  }
  SECTION("trailing bytes") { CHECK_THAT(npy_error(good + "x"), Catch::Contains("needs 8: 1 trailing bytes")); }
  SECTION("headers that are not the dict numpy writes") {
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'shape': (2,), }", two)), Catch::Contains("no 'fortran_order'"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'fortran_order': False, }", two)), Catch::Contains("no 'shape'"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", two)),
               Catch::Contains("'descr' twice"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two)),
               Catch::Contains("has the key 'x'"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", two)),
               Catch::Contains("True or False"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} 7", two)),
               Catch::Contains("after the dict's closing"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4\x01', 'fortran_order': False, 'shape': (2,)}", two)),
               Catch::Contains("'<f4\\x01' is not read"));
    CHECK_THAT(npy_error(npy_file("{'descr': '<f4", "")), Catch::Contains("string with an escape or a line break"));
  }
}
