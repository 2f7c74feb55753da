// Parsing JSON text with errors that say where. A valid text is read in one pass by the fast parser
// (fast.hpp), which makes the strict checks on the way; whatever it gives up on goes the careful
// way: a first pass (CheckingSax) that knows its JSON Pointer and refuses duplicate keys and deep
// nesting, then nlohmann/json's DOM parser.

#include "json/parse.hpp"

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json/error.hpp"
#include "json/fast_parser.hpp"
#include "json/pointer.hpp"
#include "text/number.hpp"

namespace attn {

using json = nlohmann::json;

namespace {

// A first pass over the text that knows where it is (as a JSON Pointer), so that the errors the
// DOM parser reports without a place get one, and so that duplicate keys and absurd nesting, which
// the DOM parser would accept, are refused.
class CheckingSax final : public nlohmann::json_sax<json> {
 public:
  static constexpr std::size_t max_depth = max_json_depth;

  std::string pointer;  // where the first error is
  std::string message;  // "" when the text is fine

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }

  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    Frame& top = stack_.back();
    if (!top.keys.insert(k).second) {
      top.key = k;
      return error(here(false), fmt::format("duplicate key \"{}\": each key may appear once", k));
    }
    top.key = k;
    return true;
  }

  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& ex) override {
    if (ex.id == 406) return error(here(true), fmt::format("the number {} is out of range (beyond ±1.8e308)", token));
    // nlohmann's text starts "[json.exception.parse_error.101] parse error at line 1, column 2: …"
    // and quotes the bytes it last read, which in a binary file are not text: show those as \xNN.
    std::string what = ex.what();
    if (const auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    std::string printable;
    for (const char c : what) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte >= 0x7f) printable += fmt::format("\\x{:02X}", byte);
      else printable += c;
    }
    return error(here(true), fmt::format("invalid JSON: {}", printable));
  }

 private:
  struct Frame {
    bool object;
    std::string key;             // object: the key being read
    std::size_t count = 0;       // array: values seen so far
    std::set<std::string> keys;  // object: keys seen so far
  };

  // The pointer of the value being read; `next` for the one about to start in an array.
  std::string here(bool next) const {
    std::string out;
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      const bool innermost = i + 1 == stack_.size();
      if (f.object) out = pointer_key(out, f.key);
      else if (f.count > 0 || (innermost && next)) out = pointer_index(out, innermost && next ? f.count : f.count - 1);
    }
    return out;
  }

  bool value() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().count;
    return true;
  }

  bool open(bool object) {
    value();
    if (stack_.size() >= max_depth) return error(here(false), fmt::format("nested deeper than {} levels", max_depth));
    stack_.push_back({object});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  bool error(std::string where, std::string what) {
    pointer = std::move(where);
    message = std::move(what);
    return false;
  }

  std::vector<Frame> stack_;
};

}  // namespace

void refuse_blank(std::string_view text, const std::string& file, std::string_view expected) {
  if (text.empty()) throw InputError(file, "", fmt::format("the file is empty (0 bytes): expected {}", expected));
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(
        file, "",
        fmt::format("the file is blank ({}, all white space): expected {}", describe_bytes(text.size()), expected));
}

json parse_json(std::string_view text, const std::string& file, bool strict) {
  refuse_blank(text, file, "a JSON object");
  const auto check = [&] {
    CheckingSax checker;
    if (!json::sax_parse(text, &checker) || !checker.message.empty())
      throw InputError(file, checker.pointer, checker.message.empty() ? "invalid JSON" : checker.message);
  };
  // The fast parser reads only texts that the check accepts and json::parse reads the same way, so its
  // answer is the careful path's, for strict parsing and not.
  if (auto fast = parse_json_fast(text)) return std::move(*fast);
  if (strict) check();
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    check();  // says where
    throw;
  }
}

}  // namespace attn
