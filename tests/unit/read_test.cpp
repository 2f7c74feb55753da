// Reading within a limit (src/io/read.hpp) and making file text safe to print (src/text/visible.hpp).
// Expected counts and strings are worked out by hand from the texts beside them.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "io/read.hpp"
#include "json/error.hpp"
#include "text/visible.hpp"

using namespace attn;

namespace {

// A file in the temp folder, removed at the end of the test.
class TextFile {
 public:
  explicit TextFile(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() / "attn-trace-read-XXXXXX").string();
    const int fd = ::mkstemp(path_.data());
    if (fd < 0) throw std::runtime_error("cannot create " + path_);
    ::close(fd);
    std::ofstream(path_, std::ios::binary) << text;
  }
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;
  ~TextFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_error(const std::string& text, std::size_t limit = 1 << 20) {
  const TextFile file(text);
  try {
    (void)read_text(file.path(), MemoryLimit{limit, "LIMIT"});
  } catch (const InputError& e) {
    return e.message();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("JsonCost counts values, containers, strings and string bytes outside and inside strings", "[read]") {
  JsonCost cost;
  // By hand: commas outside strings 2 (in [1, 2] and between the members), containers 2 ({ and [),
  // strings 3 ("a", "b", "x,[y") holding 1 + 1 + 4 bytes; values = commas + containers + 1.
  cost.add(R"({"a": [1, 2], "b": "x,[y"})");
  CHECK(cost.bytes() == 26);
  CHECK(cost.values() == 2 + 2 + 1);  // commas + containers + the document itself
  CHECK(cost.total() == 26 + 5 * JsonCost::per_value + 2 * JsonCost::per_container + 3 * JsonCost::per_string +
                            6 * JsonCost::per_string_byte);
}

TEST_CASE("JsonCost gives the same count however the text is cut into chunks, escapes included", "[read]") {
  const std::string text = R"({"t": ["a\"b,", "c\\", 3], "u": [[0], [1]]})";
  JsonCost whole;
  whole.add(text);
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    JsonCost parts;
    parts.add(std::string_view(text).substr(0, cut));
    parts.add(std::string_view(text).substr(cut));
    INFO("cut at " << cut);
    CHECK(parts.total() == whole.total());
    CHECK(parts.values() == whole.values());
  }
  // By hand: strings "t", "a\"b," (5 bytes between the quotes), "c\\" (3), "u"; commas outside
  // strings: after the two strings, after the list, inside [[0], [1]]: 4; containers { [ [ [ [: 5.
  CHECK(whole.values() == 4 + 5 + 1);
  CHECK(whole.total() == text.size() + 10 * JsonCost::per_value + 5 * JsonCost::per_container +
                             4 * JsonCost::per_string + (1 + 5 + 3 + 1) * JsonCost::per_string_byte);
}

TEST_CASE("JsonCost counts as a byte-at-a-time reading does, over seeded random texts cut at random", "[read]") {
  // The reference reads one byte at a time: a quote opens or closes a string unless escaped; inside,
  // every byte counts as a string byte but the closing quote; outside, commas and [ { count.
  std::mt19937 rng(14);
  const std::string alphabet = "\"\"\\,,[{]}a 1";
  for (int round = 0; round < 500; ++round) {
    std::string text(rng() % 300, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    std::size_t commas = 0, containers = 0, strings = 0, string_bytes = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
        if (in_string) ++string_bytes;
      } else if (c == '"') {
        in_string = true;
        ++strings;
      } else {
        commas += c == ',';
        containers += c == '[' || c == '{';
      }
    }
    JsonCost cost;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t length = std::min<std::size_t>(1 + rng() % 40, text.size() - at);
      cost.add(std::string_view(text).substr(at, length));
      at += length;
    }
    INFO("text: " << text);
    const std::size_t values = commas + containers + (text.empty() ? 0 : 1);
    CHECK(cost.values() == values);
    CHECK(cost.total() == text.size() + values * JsonCost::per_value + containers * JsonCost::per_container +
                              strings * JsonCost::per_string + string_bytes * JsonCost::per_string_byte);
  }
}

TEST_CASE("read_text refuses a first byte that cannot begin JSON, after white space and a byte order mark", "[read]") {
  CHECK(read_error(std::string("\0{}", 3)) == "invalid JSON at line 1, column 1: byte 0x00 cannot begin a JSON value");
  CHECK(read_error(" \n\n  \x01") == "invalid JSON at line 3, column 3: byte 0x01 cannot begin a JSON value");
  CHECK(read_error("\xEF\xBB\xBFxyz") == "invalid JSON at line 1, column 1: byte 0x78 cannot begin a JSON value");
  for (const std::string ok : {"{}", " [1]", "\xEF\xBB\xBF{}", "\"s\"", "-1", "7", "true", "false", "null", "   "})
    CHECK(read_error(ok) == "(no error)");
}

TEST_CASE("read_text refuses a file over the limit by its size, and a text whose parse would pass it", "[read]") {
  CHECK_THAT(read_error(std::string(900, ' '), 500),
             Catch::Matches("the file is 900 bytes, over --max-memory LIMIT: .*not read"));
  // 100 numbers "0,": 200 bytes of text but 100 values of 48 bytes once parsed.
  std::string numbers = "[";
  for (int i = 0; i < 100; ++i) numbers += "0,";
  numbers += "0]";
  CHECK_THAT(read_error(numbers, 1000),
             Catch::StartsWith("loading this input would take more than --max-memory LIMIT"));
  CHECK(read_error(numbers, 10000) == "(no error)");
}

TEST_CASE("read_text returns the text byte for byte", "[read]") {
  const std::string text = "{\"a\": \"\xE7\x8C\xAB\", \"b\": [1, 2]}\n";
  const TextFile file(text);
  CHECK(read_text(file.path()) == text);
}

TEST_CASE("visible writes control characters out and keeps every other character", "[visible]") {
  CHECK(visible("The cat") == "The cat");
  CHECK(visible("猫 é Ω") == "猫 é Ω");
  CHECK(visible("\x1b[31mRED\x1b[0m") == "\\x1b[31mRED\\x1b[0m");
  CHECK(visible("\a\b\t\n\v\f\r") == "\\a\\b\\t\\n\\v\\f\\r");
  CHECK(visible(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(visible("del\x7f") == "del\\x7f");
  CHECK(visible("\xc2\x9b"
                "2J") == "\\u009b2J");       // C1 CSI
  CHECK(visible("\xc2\x85") == "\\u0085");   // C1 NEL
  CHECK(visible("\xc2\xa0") == "\xc2\xa0");  // U+00A0, the first character after C1, is kept
  CHECK(visible("a\xe2\x80\xae"
                "b") == "a\\u202eb");                   // right-to-left override
  CHECK(visible("\xe2\x81\xa6") == "\\u2066");          // left-to-right isolate
  CHECK(visible("\xff\xfe") == "\\xff\\xfe");           // not UTF-8
  CHECK(visible("\xc0\xaf") == "\\xc0\\xaf");           // an overlong '/'
  CHECK(visible("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(visible("\xe7\x8c") == "\\xe7\\x8c");           // cut short
}
