// The fast JSON parser (json/fast_parser.hpp) against nlohmann::json::parse, the independent implementation
// every expected DOM here comes from: on every JSON file of the repository, on edge cases written by hand
// and on seeded random documents, valid and broken. Values are compared by type as well as by ==, since
// 2, 2u and 2.0 compare equal in nlohmann, and floats bit for bit, since -0.0 == 0.0. What strict parsing
// refuses (duplicate keys, nesting deeper than 64 levels) is found apart from the code under test, by
// nlohmann's parser callback; the fast parser must give up on exactly those and on every invalid text.

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json/error.hpp"
#include "json/fast_parser.hpp"
#include "json/parse.hpp"

using namespace attn;
using json = nlohmann::json;

namespace {

std::string type_of(const json& j) {
  switch (j.type()) {
    case json::value_t::number_integer: return "int64";
    case json::value_t::number_unsigned: return "uint64";
    case json::value_t::number_float: return "double";
    default: return j.type_name();
  }
}

// "" when `a` and `b` are the same document, types and float bits included; else where they differ.
std::string difference(const json& a, const json& b, const std::string& at = "") {
  if (a.type() != b.type())
    return fmt::format("at \"{}\": {} {} vs {} {}", at, type_of(a), a.dump(), type_of(b), b.dump());
  if (a.is_number_float()) {
    const auto x = a.get<double>(), y = b.get<double>();
    if (std::bit_cast<std::uint64_t>(x) != std::bit_cast<std::uint64_t>(y))
      return fmt::format("at \"{}\": {:a} vs {:a}", at, x, y);
    return "";
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return fmt::format("at \"{}\": {} items vs {}", at, a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::string d = difference(a[i], b[i], fmt::format("{}/{}", at, i)); !d.empty()) return d;
    return "";
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return fmt::format("at \"{}\": {} keys vs {}", at, a.size(), b.size());
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      if (i.key() != j.key()) return fmt::format("at \"{}\": key \"{}\" vs \"{}\"", at, i.key(), j.key());
      if (std::string d = difference(*i, *j, fmt::format("{}/{}", at, i.key())); !d.empty()) return d;
    }
    return "";
  }
  return a == b ? "" : fmt::format("at \"{}\": {} vs {}", at, a.dump(), b.dump());
}

// nlohmann's reading of `text`, or nullopt where it refuses it.
std::optional<json> nlohmann_parse(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// Whether a text nlohmann accepts has a duplicate key or a container nested deeper than 64 levels:
// what strict parsing refuses. The callback's depth is the number of containers around the event.
bool strictly_refused(const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one per open container
  bool refused = false;
  [[maybe_unused]] const json doc = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        keys.emplace_back();
        if (depth >= 64) refused = true;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end: keys.pop_back(); break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second) refused = true;
        break;
      default: break;
    }
    return true;
  });
  return refused;
}

enum class Expect { same, gives_up, same_or_gives_up };

// Checks the fast parser on `text` against nlohmann; returns what it did, for the caller's counts.
bool check_text(const std::string& text, Expect expect = Expect::same_or_gives_up) {
  const std::optional<json> expected = nlohmann_parse(text);
  const std::optional<json> fast = parse_json_fast(text);
  INFO("text: " << (text.size() > 300 ? text.substr(0, 300) + "…" : text));
  if (!expected || strictly_refused(text)) {
    INFO("nlohmann refuses it, or strict parsing does");
    CHECK_FALSE(fast.has_value());
    return fast.has_value();
  }
  if (expect == Expect::same) REQUIRE(fast.has_value());
  if (expect == Expect::gives_up) CHECK_FALSE(fast.has_value());
  if (fast) {
    CHECK(*fast == *expected);
    CHECK(difference(*fast, *expected) == "");
  }
  return fast.has_value();
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Random JSON text, valid by construction: numbers in every textual form within double's range, strings
// with every escape and raw UTF-8 of 1 to 4 bytes, keys drawn from a few so that some repeat, white space
// of every kind.
class RandomJson {
 public:
  explicit RandomJson(std::uint32_t seed) : rng_(seed) {}

  std::string document() { return space() + value(0) + space(); }

  std::string number() {
    std::string s = pick(2) ? "-" : "";
    switch (pick(6)) {
      case 0: {  // integers, some at and past the 64-bit limits
        static const char* edges[] = {"0",
                                      "9223372036854775807",
                                      "9223372036854775808",
                                      "18446744073709551615",
                                      "18446744073709551616",
                                      "99999999999999999999",
                                      "9007199254740993"};
        return pick(4) == 0 ? s + edges[pick(std::size(edges))] : s + digits(1 + pick(21), true);
      }
      case 1: return s + digits(1, false) + "." + digits(1 + pick(4), false);  // as Python writes rounded weights
      case 2: return s + digits(1 + pick(10), true) + "." + digits(1 + pick(22), false);
      default: {
        std::string m = pick(2) ? digits(1 + pick(10), true) : "0";
        if (pick(2)) m += "." + digits(1 + pick(20), false);
        const int limit = 290 - static_cast<int>(m.size());  // keeps the value within double's range
        static const char* signs[] = {"", "+", "-", "-"};
        std::string e = std::string(pick(2) ? "e" : "E") + signs[pick(4)];
        e += std::string(pick(3) == 0 ? pick(4) : 0, '0') + std::to_string(pick(static_cast<std::size_t>(limit)));
        return s + m + e;
      }
    }
  }

  std::string string() {
    std::string s = "\"";
    for (std::size_t n = pick(10); n > 0; --n) {
      switch (pick(8)) {
        case 0: {
          static const char* escapes[] = {"\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"};
          s += escapes[pick(std::size(escapes))];
          break;
        }
        case 1: s += fmt::format(fmt::runtime(pick(2) ? "\\u{:04x}" : "\\u{:04X}"), bmp_codepoint()); break;
        case 2: {  // a character beyond the BMP, as a surrogate pair
          const unsigned c = 0x10000 + static_cast<unsigned>(pick(0x100000));
          s += fmt::format("\\u{:04x}\\u{:04X}", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF));
          break;
        }
        case 3: s += utf8(static_cast<unsigned>(pick(2) ? bmp_codepoint() : 0x10000 + pick(0x100000))); break;
        case 4: s += utf8(static_cast<unsigned>(edge_codepoints[pick(std::size(edge_codepoints))])); break;
        default: {
          const char c = static_cast<char>(0x20 + pick(0x60));  // printable ASCII and DEL
          s += c == '"' || c == '\\' ? 'x' : c;
        }
      }
    }
    return s + "\"";
  }

 private:
  static constexpr unsigned edge_codepoints[] = {0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

  std::string digits(std::size_t count, bool no_leading_zero) {
    std::string s;
    for (std::size_t i = 0; i < count; ++i)
      s += static_cast<char>('0' + (i == 0 && no_leading_zero ? 1 + pick(9) : pick(10)));
    return s;
  }

  unsigned bmp_codepoint() {
    for (;;)
      if (const auto c = static_cast<unsigned>(pick(0x10000)); c < 0xD800 || c > 0xDFFF) return c;
  }

  static std::string utf8(unsigned c) {
    std::string s;
    if (c < 0x20) return "\\u00" + fmt::format("{:02x}", c);  // raw, a control character would be invalid
    if (c < 0x80) return std::string(1, c == '"' || c == '\\' ? 'x' : static_cast<char>(c));
    if (c < 0x800) return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    if (c < 0x10000)
      return {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
              static_cast<char>(0x80 | (c & 0x3F))};
    return {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
            static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
  }

  std::string space() {
    static const char* spaces[] = {"", "", "", " ", "\n", "\t", "\r\n  ", " \t \r "};
    return spaces[pick(std::size(spaces))];
  }

  std::string value(std::size_t depth) {
    const std::size_t kind = pick(depth < 5 ? 10 : 6);
    switch (kind) {
      case 0: return "true";
      case 1: return "false";
      case 2: return "null";
      case 3: return string();
      case 4:
      case 5: return number();
      case 6:
      case 7: {
        std::string s = "[" + space();
        for (std::size_t n = pick(6), i = 0; i < n; ++i) s += (i ? "," + space() : "") + value(depth + 1) + space();
        return s + "]";
      }
      default: {
        static const char* keys[] = {"\"a\"", "\"b\"", "\"X\"", "\"W_q\"", "\"\\u0061\"", "\"\"", "\"é\"", "\"a/b~\""};
        std::string s = "{" + space();
        for (std::size_t n = pick(5), i = 0; i < n; ++i)
          s += (i ? "," + space() : "") + (pick(4) ? keys[pick(std::size(keys))] : string()) + space() + ":" + space() +
               value(depth + 1) + space();
        return s + "}";
      }
    }
  }

  std::mt19937 rng_;
};

std::string nested(std::size_t levels, const std::string& inside = "") {
  return std::string(levels, '[') + inside + std::string(levels, ']');
}

}  // namespace

TEST_CASE("The fast parser reads every JSON file of the repository as nlohmann does, or gives up where it must",
          "[json_fast]") {
  std::size_t files = 0, read = 0;
  for (const char* dir : {"/data", "/tests/data"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(ATTN_SOURCE_DIR) + dir)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
      INFO("file: " << entry.path().string());
      const std::string text = read_file(entry.path());
      // Every input and trace nlohmann reads and strict parsing accepts is the fast parser's to read.
      if (check_text(text, Expect::same_or_gives_up)) ++read;
      else if (nlohmann_parse(text) && !strictly_refused(text)) FAIL("the fast parser gave up on a valid file");
      ++files;
    }
  }
  INFO(fmt::format("{} files, {} read by the fast parser", files, read));
  CHECK(files > 100);
  CHECK(read > 100);
}

TEST_CASE("The fast parser types numbers as nlohmann does, at the 64-bit limits, signed zero and double's range",
          "[json_fast]") {
  for (const char* text : {"0",
                           "-0",
                           "1",
                           "-1",
                           "9223372036854775807",  // int64's top
                           "9223372036854775808",  // one past: uint64, having no '-'
                           "-9223372036854775808",
                           "-9223372036854775809",  // one past int64's bottom: a double
                           "18446744073709551615",
                           "18446744073709551616",  // one past uint64's top: a double
                           "-18446744073709551616",
                           "99999999999999999999",
                           "123456789012345678901234567890",
                           "9007199254740993",
                           "9007199254740993.0",  // 2^53 + 1: past Clinger's fast path, rounded to even
                           "0.0",
                           "-0.0",
                           "-0.0e0",
                           "0e0",
                           "0E+0",
                           "0e-999999",
                           "0.0e99999",
                           "1e308",
                           "-1e308",
                           "1.7976931348623157e308",
                           "1.7976931348623158e308",
                           "2.2250738585072014e-308",
                           "2.2250738585072011e-308",
                           "4.9406564584124654e-324",
                           "5e-324",
                           "2.4703282292062328e-324",
                           "1e-320",
                           "1e22",
                           "1e23",
                           "1e-22",
                           "1e-23",
                           "0.1",
                           "0.3",
                           "-0.1234",
                           "3.141592653589793238462643383279",
                           "1.00000000000000011102230246251565404236316680908203125",  // halfway: to even
                           "1.00000000000000011102230246251565404236316680908203126",
                           "1E5",
                           "1e+5",
                           "1e-5",
                           "1.5E-0005",
                           "1e0000000000000000000000000005",
                           "9007199254740992e-22",
                           "9007199254740993e-22",
                           "123456789e-30",
                           "0.000000000000000000000000000001",
                           "[1,-1,1.0,-1.0,1e0]"}) {
    check_text(text, Expect::same);
  }
  // Past ±1.8e308 nlohmann refuses a number (406, which parse_json reports as out of range); below
  // 2.5e-324 it reads 0, which the fast parser leaves to it rather than tell underflow from overflow.
  for (const char* text : {"1e400", "-1e400", "1e99999999999999999999", "1.8e308"}) check_text(text, Expect::gives_up);
  for (const char* text : {"1e-400", "-1e-400", "2.4703282292062327e-324", "[1e-999]"}) {
    check_text(text, Expect::gives_up);
    const auto expected = nlohmann_parse(text);
    REQUIRE(expected);
    CHECK(difference(parse_json(text, "f.json"), *expected) == "");  // still read, the careful way
  }
}

TEST_CASE("The fast parser reads structure, white space, escapes and UTF-8 as nlohmann does", "[json_fast]") {
  // The first and last character of every UTF-8 byte range that nlohmann accepts.
  const char* utf8_edges = "\"\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF\"";
  for (const char* text : {"[]",
                           "{}",
                           "[[]]",
                           "[{}]",
                           "{\"a\":[]}",
                           "{\"a\":{}}",
                           "[[],[[]],{},[{}]]",
                           " \t\r\n[ 1 , 2 ] \n",
                           "\n{\n\t\"a\" :\r\n1 ,\"b\":[ true,false , null ]}\n",
                           "[1,[2,[3,{\"x\":[4]}]]]",
                           "true",
                           "false",
                           "null",
                           "\"\"",
                           "\"plain\"",
                           "\xEF\xBB\xBF{\"a\": 1}",
                           "\xEF\xBB\xBF  []",
                           R"("\" \\ \/ \b \f \n \r \t")",
                           R"("\u0041\u00e9\u00E9\u20ac\ud83d\ude00\uD83D\uDE00")",
                           R"("\u0000")",
                           R"("a\u0000b")",
                           "\"\x7F\"",
                           "\"é€😀 Ωμέγα\"",
                           utf8_edges,
                           R"({"b": 1, "a": 2, "é": 3, "a/b": 4, "~": 5, "": 6})",
                           R"({"\u0061": 1, "b": 2})"}) {
    check_text(text, Expect::same);
  }
}

TEST_CASE("The fast parser gives up on every text nlohmann refuses", "[json_fast]") {
  for (const std::string& text : std::vector<std::string>{"",
                                                          " ",
                                                          "[",
                                                          "]",
                                                          "[1,]",
                                                          "[,1]",
                                                          "[1 2]",
                                                          "{\"a\"}",
                                                          "{\"a\":}",
                                                          "{\"a\":1,}",
                                                          "{a:1}",
                                                          "{\"a\" 1}",
                                                          "01",
                                                          "-01",
                                                          "1.",
                                                          ".5",
                                                          "-",
                                                          "+1",
                                                          "1e",
                                                          "1e+",
                                                          "1.e5",
                                                          "--1",
                                                          "0x10",
                                                          "NaN",
                                                          "Infinity",
                                                          "-Infinity",
                                                          "tru",
                                                          "nul",
                                                          "True",
                                                          "nulll",
                                                          "[1]x",
                                                          "[1] [2]",
                                                          "\"abc",
                                                          "\"\\x\"",
                                                          "\"\\u12\"",
                                                          "\"\\u12G4\"",
                                                          "\"\\ud800\"",
                                                          "\"\\udc00\"",
                                                          "\"\\ud800\\u0041\"",
                                                          "\"\\ud800x\"",
                                                          "\"\\ud800\\\"",
                                                          "\"\xC0\x80\"",
                                                          "\"\xC1\xBF\"",
                                                          "\"\xE0\x9F\xBF\"",
                                                          "\"\xED\xA0\x80\"",
                                                          "\"\xF0\x8F\xBF\xBF\"",
                                                          "\"\xF4\x90\x80\x80\"",
                                                          "\"\xF5\x80\x80\x80\"",
                                                          "\"\xFF\"",
                                                          "\"\x80\"",
                                                          "\"\xC3\"",
                                                          "\"\xE2\x82\"",
                                                          "\"a\nb\"",
                                                          "\"\t\"",
                                                          std::string("\"a\0b\"", 5),
                                                          "\xEF\xBB{}",
                                                          "\xEF{}",
                                                          "\xBB\xBF{}",
                                                          "[1]\xEF\xBB\xBF",
                                                          "// c\n[]",
                                                          "[1,/*c*/2]"}) {
    INFO("text: " << text);
    REQUIRE_FALSE(nlohmann_parse(text).has_value());
    CHECK_FALSE(parse_json_fast(text).has_value());
  }
}

TEST_CASE("The fast parser leaves to nlohmann a NUL byte after the value, where nlohmann's text ends", "[json_fast]") {
  // nlohmann reads a NUL byte outside a string as the end of the input (for C strings), so it accepts
  // these; the fast parser gives up on them and parse_json reads them as before.
  for (const std::string& text : {std::string("[1]\0", 4), std::string("{\"a\": 2}") + '\0' + " anything"}) {
    check_text(text, Expect::gives_up);
    CHECK(difference(parse_json(text, "f.json"), json::parse(text)) == "");
  }
}

TEST_CASE("Duplicate keys and nesting deeper than 64 levels are still refused, with today's messages", "[json_fast]") {
  const auto message = [](const std::string& text) -> std::string {
    try {
      (void)parse_json(text, "f.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string duplicate = R"({"a": 1, "b": {"c": [1, {"d": 2, "d": 3}]}})";
  CHECK_FALSE(parse_json_fast(duplicate).has_value());
  CHECK(message(duplicate) == "f.json: /b/c/1/d: duplicate key \"d\": each key may appear once");
  CHECK(message(R"({"X": [1], "X": [2]})") == "f.json: /X: duplicate key \"X\": each key may appear once");
  // Not strict (a trace): the last value wins, as nlohmann has it.
  CHECK(parse_json(duplicate, "f.json", false) == json::parse(duplicate));

  // 64 levels are read (a list in a list … 64 deep); the 65th is refused where it opens.
  check_text(nested(64, "1"), Expect::same);
  check_text("{\"a\":" + nested(63) + "}", Expect::same);
  CHECK(parse_json(nested(64), "f.json") == json::parse(nested(64)));
  CHECK_FALSE(parse_json_fast(nested(65)).has_value());
  std::string zeros;
  for (int i = 0; i < 64; ++i) zeros += "/0";
  CHECK(message(nested(65)) == "f.json: " + zeros + ": nested deeper than 64 levels");
  CHECK(message(R"({"a": )" + nested(64) + "}") == "f.json: /a" + zeros.substr(2) + ": nested deeper than 64 levels");
  // Not strict: any depth, as nlohmann reads it.
  CHECK(parse_json(nested(200, "7"), "f.json", false) == json::parse(nested(200, "7")));
}

TEST_CASE("The fast parser agrees with nlohmann on seeded random documents, valid and broken", "[json_fast]") {
  RandomJson random(20240614);
  std::size_t valid = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random.document();
    INFO("document " << i);
    REQUIRE(nlohmann_parse(text).has_value());  // the generator writes valid JSON
    if (check_text(text, Expect::same_or_gives_up)) ++valid;
    else if (strictly_refused(text)) ++refused;
    else FAIL("the fast parser gave up on a valid document without a duplicate key: " << text);
  }
  INFO(fmt::format("{} read, {} with a duplicate key", valid, refused));
  CHECK(valid > 1000);
  CHECK(refused > 100);

  // Broken: a byte changed, removed or added, where it most often breaks the text, or makes another valid one.
  std::mt19937 rng(7);
  const std::string bytes = std::string("[]{}\",:\\-+.eE0123456789 \ttrufalsn\x80\xBF\xC3\xE2\xED\xF0\xF4\xFF") + '\0';
  std::size_t broken = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = random.document();
    if (text.empty()) continue;
    for (int m = 1 + static_cast<int>(rng() % 3); m > 0; --m) {
      const std::size_t at = rng() % text.size();
      const char b = bytes[rng() % bytes.size()];
      switch (rng() % 3) {
        case 0: text[at] = b; break;
        case 1: text.erase(at, 1); break;
        default: text.insert(at, 1, b);
      }
      if (text.empty()) text.push_back('x');
    }
    INFO("broken document " << i);
    check_text(text, Expect::same_or_gives_up);
    if (!nlohmann_parse(text)) ++broken;
  }
  CHECK(broken > 1000);

  // Numbers alone, every one within double's range: each read, bit for bit as nlohmann reads it.
  for (int i = 0; i < 20000; ++i) check_text(random.number(), Expect::same);
}

TEST_CASE("discard_json takes documents of any depth and any mix of values", "[json_fast]") {
  // Deeper than strict parsing allows (a trace is read without that bound): emptying in place stops at
  // 64 levels, so this must not run out of stack.
  const std::string deep_text = nested(100000, "1");
  CHECK_FALSE(parse_json_fast(deep_text).has_value());  // beyond 64 levels: left to nlohmann
  json deep = parse_json(deep_text, "f.json", false);
  std::size_t depth = 0;
  const json* inner = &deep;
  for (; inner->is_array() && inner->size() == 1; inner = &inner->front()) ++depth;
  CHECK(depth == 100000);
  CHECK(type_of(*inner) == "uint64");
  CHECK(*inner == 1);
  discard_json(std::move(deep));

  const std::string mixed = R"({"X": [[1, 2.5], [-3, 4]], "t": ["a", "b"], "e": [], "o": {"k": [[[]], [1, {}]]}})";
  json doc = parse_json(mixed, "f.json");
  CHECK(difference(doc, json::parse(mixed)) == "");
  CHECK(doc.at("X").dump() == "[[1,2.5],[-3,4]]");
  CHECK(type_of(doc.at("X").at(1).at(0)) == "int64");
  CHECK(doc.at("o").dump() == R"({"k":[[[]],[1,{}]]})");
  discard_json(std::move(doc));

  json seven = parse_json("7", "f.json");
  CHECK(type_of(seven) == "uint64");
  CHECK(seven == 7);
  discard_json(std::move(seven));
}
