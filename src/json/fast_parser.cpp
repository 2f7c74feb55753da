#include "json/fast_parser.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

namespace attn {

using json = nlohmann::json;

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// 10^0 … 10^22: every one an exact double.
constexpr double powers_of_ten[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// The JSON number in [from, to) (already checked well formed) as the nearest double: false when it is
// out of range, which is left to nlohmann. std::from_chars where the library has it for doubles;
// Emscripten's libc++ 13 does not, and there musl's strtod, which rounds correctly too, reads a copy
// that ends in a NUL.
bool read_double(const char* from, const char* to, double& x) {
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
  const auto [end, ec] = std::from_chars(from, to, x);
  return ec == std::errc{} && end == to;
#else
  const std::string text(from, to);
  char* end = nullptr;
  errno = 0;
  x = std::strtod(text.c_str(), &end);
  return errno == 0 && end == text.c_str() + text.size();
#endif
}

// The length of the well-formed UTF-8 sequence at `p` (whose first byte is >= 0x80), or 0 if it is not
// one. These are the ranges of the Unicode Standard's table 3-7, which nlohmann checks as well: no
// overlong forms, no surrogates, nothing past U+10FFFF.
std::size_t utf8_length(const char* p, const char* end) {
  const auto byte = [&](std::size_t i, unsigned lo, unsigned hi) {
    if (end - p <= static_cast<std::ptrdiff_t>(i)) return false;
    const auto b = static_cast<unsigned char>(p[i]);
    return b >= lo && b <= hi;
  };
  const auto lead = static_cast<unsigned char>(p[0]);
  if (lead >= 0xC2 && lead <= 0xDF) return byte(1, 0x80, 0xBF) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    // E0 would be overlong below A0; ED would be a surrogate from A0.
    const unsigned lo = lead == 0xE0 ? 0xA0 : 0x80, hi = lead == 0xED ? 0x9F : 0xBF;
    return byte(1, lo, hi) && byte(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    // F0 would be overlong below 90; F4 would pass U+10FFFF from 90.
    const unsigned lo = lead == 0xF0 ? 0x90 : 0x80, hi = lead == 0xF4 ? 0x8F : 0xBF;
    return byte(1, lo, hi) && byte(2, 0x80, 0xBF) && byte(3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

void append_utf8(std::string& out, unsigned codepoint) {
  const auto add = [&](unsigned b) { out += static_cast<char>(b); };
  if (codepoint < 0x80) {
    add(codepoint);
  } else if (codepoint < 0x800) {
    add(0xC0 | (codepoint >> 6));
    add(0x80 | (codepoint & 0x3F));
  } else if (codepoint < 0x10000) {
    add(0xE0 | (codepoint >> 12));
    add(0x80 | ((codepoint >> 6) & 0x3F));
    add(0x80 | (codepoint & 0x3F));
  } else {
    add(0xF0 | (codepoint >> 18));
    add(0x80 | ((codepoint >> 12) & 0x3F));
    add(0x80 | ((codepoint >> 6) & 0x3F));
    add(0x80 | (codepoint & 0x3F));
  }
}

// Recursive descent over RFC 8259's grammar. Every member returns false to give up, with the parser
// anywhere in the text: the caller then throws the partial document away.
class FastParser {
 public:
  explicit FastParser(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool document(json& out) {
    // nlohmann skips a UTF-8 byte order mark at the very start (and refuses a broken one).
    if (end_ - p_ >= 3 && std::string_view(p_, 3) == "\xEF\xBB\xBF") p_ += 3;
    skip_space();
    if (!value(out, 0)) return false;
    skip_space();
    return p_ == end_;
  }

 private:
  void skip_space() {
    while (p_ != end_ && is_space(*p_)) ++p_;
  }

  bool value(json& out, std::size_t depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '[': return array(out, depth + 1);
      case '{': return object(out, depth + 1);
      case '"': {
        std::string s;
        if (!string(s)) return false;
        out = std::move(s);
        return true;
      }
      case 't': return literal("true", out, true);
      case 'f': return literal("false", out, false);
      case 'n': return literal("null", out, nullptr);
      default:
        return number([&](auto x) {
          out = x;
          return true;
        });
    }
  }

  template <class T>
  bool literal(std::string_view word, json& out, T v) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    out = v;
    return true;
  }

  bool array(json& out, std::size_t depth) {
    if (depth > max_json_depth) return false;  // strict parsing refuses it, with the pointer
    ++p_;
    out = json::array();
    auto& items = out.get_ref<json::array_t&>();
    skip_space();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    const auto add = [&](auto x) {
      items.emplace_back(x);
      return true;
    };
    for (;;) {
      if (p_ == end_) return false;
      // A number is made in place: most of a large input is lists of numbers.
      const bool ok = *p_ == '-' || is_digit(*p_) ? number(add) : value(items.emplace_back(), depth);
      if (!ok) return false;
      skip_space();
      if (p_ == end_) return false;
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      skip_space();
    }
  }

  bool object(json& out, std::size_t depth) {
    if (depth > max_json_depth) return false;
    ++p_;
    out = json::object();
    auto& members = out.get_ref<json::object_t&>();
    skip_space();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      if (p_ == end_ || *p_ != '"') return false;
      std::string key;
      if (!string(key)) return false;
      skip_space();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      skip_space();
      // A duplicate key: nlohmann would keep the last value; strict parsing refuses it, with the pointer.
      const auto [at, inserted] = members.try_emplace(std::move(key));
      if (!inserted) return false;
      if (!value(at->second, depth)) return false;
      skip_space();
      if (p_ == end_) return false;
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      skip_space();
    }
  }

  // The string starting at the quote under p_, unescaped.
  bool string(std::string& out) {
    ++p_;
    const char* run = p_;  // the bytes since the last escape, copied as they are
    for (;;) {
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out.append(run, p_);
        ++p_;
        return true;
      }
      if (c < 0x20) return false;  // a control character must be escaped
      if (c == '\\') {
        out.append(run, p_);
        if (!escape(out)) return false;
        run = p_;
      } else if (c < 0x80) {
        ++p_;
      } else {
        const std::size_t length = utf8_length(p_, end_);
        if (length == 0) return false;
        p_ += length;
      }
    }
  }

  // The escape starting at the backslash under p_.
  bool escape(std::string& out) {
    ++p_;
    if (p_ == end_) return false;
    const char c = *p_++;
    switch (c) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: return false;
    }
    int codepoint = hex4();
    if (codepoint < 0 || (codepoint >= 0xDC00 && codepoint <= 0xDFFF)) return false;  // a low surrogate alone
    if (codepoint >= 0xD800 && codepoint <= 0xDBFF) {
      // A high surrogate: only with a low one after it does it make a character.
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      const int low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) return false;
      codepoint = 0x10000 + ((codepoint - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, static_cast<unsigned>(codepoint));
    return true;
  }

  // The four hex digits under p_ as a number, or -1.
  int hex4() {
    if (end_ - p_ < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      int digit = 0;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      else return -1;
      v = v * 16 + digit;
    }
    return v;
  }

  // -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, typed as nlohmann types it, given to `put`.
  template <class Put>
  bool number(Put&& put) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || !is_digit(*p_)) return false;
    // The digits as one integer w, which is exact while there are at most 19 of them, and the decimal
    // exponent it is to be scaled by.
    std::uint64_t w = 0;
    std::ptrdiff_t digits = 0;
    if (*p_ == '0') ++p_, digits = 1;
    else digits = take_digits(w);
    bool integer = true;
    std::ptrdiff_t fraction_digits = 0;
    if (p_ != end_ && *p_ == '.') {
      integer = false;
      ++p_;
      fraction_digits = take_digits(w);
      if (fraction_digits == 0) return false;
      digits += fraction_digits;
    }
    long exponent = 0;
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      const bool down = p_ != end_ && *p_ == '-';
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !is_digit(*p_)) return false;
      for (; p_ != end_ && is_digit(*p_); ++p_)
        if (exponent < 100000) exponent = exponent * 10 + (*p_ - '0');  // beyond, only from_chars is exact
      if (down) exponent = -exponent;
    }

    // nlohmann reads an integer with '-' as int64, without as uint64, and one out of that range as a
    // double, as every other number.
    constexpr std::uint64_t two_to_63 = std::uint64_t{1} << 63;
    if (integer && digits <= 19) {
      if (!negative) return put(json::number_unsigned_t{w});
      if (w < two_to_63) return put(-static_cast<json::number_integer_t>(w));
      if (w == two_to_63) return put(std::numeric_limits<json::number_integer_t>::min());
    }
    // Clinger's fast path: w and 10^|e| are exact doubles, so one multiplication or division by IEEE
    // arithmetic rounds the decimal correctly, as nlohmann's strtod does.
    if (!integer && digits <= 19 && w <= (std::uint64_t{1} << 53)) {
      const long e = exponent - fraction_digits;
      if (e >= -22 && e <= 22) {
        const double x = e < 0 ? static_cast<double>(w) / powers_of_ten[-e] : static_cast<double>(w) * powers_of_ten[e];
        return put(negative ? -x : x);
      }
    }
    if (integer && negative) {
      json::number_integer_t i = 0;
      if (const auto [end, ec] = std::from_chars(start, p_, i); ec == std::errc{} && end == p_) return put(i);
    } else if (integer) {
      json::number_unsigned_t u = 0;
      if (const auto [end, ec] = std::from_chars(start, p_, u); ec == std::errc{} && end == p_) return put(u);
    }
    // Correctly rounded, as strtod. Out of range, a number is an error past ±1.8e308 for nlohmann and 0
    // below 2.5e-324: both are left to it.
    json::number_float_t x = 0;
    if (!read_double(start, p_, x)) return false;
    return put(x);
  }

  // Skips the digits under p_, appending them to w (modulo 2^64); returns how many there were.
  std::ptrdiff_t take_digits(std::uint64_t& w) {
    const char* from = p_;
    for (; p_ != end_ && is_digit(*p_); ++p_) w = w * 10 + static_cast<std::uint64_t>(*p_ - '0');
    return p_ - from;
  }

  const char* p_;
  const char* end_;
};

// The lists under `j` that hold no list or object, emptied, to depth max_json_depth (deeper ones are
// left to the destructor, so that this recursion stays shallow).
void empty_leaf_lists(json& j, std::size_t depth) {
  if (depth > max_json_depth) return;
  if (j.is_object()) {
    for (auto& [key, item] : j.get_ref<json::object_t&>()) empty_leaf_lists(item, depth + 1);
  } else if (j.is_array()) {
    auto& items = j.get_ref<json::array_t&>();
    bool leaf = true;
    for (json& item : items) {
      if (item.is_structured()) {
        leaf = false;
        empty_leaf_lists(item, depth + 1);
      }
    }
    if (leaf) items.clear();
  }
}

}  // namespace

void discard_json(json doc) { empty_leaf_lists(doc, 0); }

std::optional<json> parse_json_fast(std::string_view text) {
  json out;
  if (!FastParser(text).document(out)) return std::nullopt;
  return out;
}

}  // namespace attn
