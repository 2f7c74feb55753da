#include "io/json_pointer.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "io/error.hpp"

namespace attn {

InputError::InputError(std::string file, std::string pointer, std::string message)
    : std::runtime_error(pointer.empty() ? fmt::format("{}: {}", file, message)
                                         : fmt::format("{}: {}: {}", file, pointer, message)),
      file_(std::move(file)),
      pointer_(std::move(pointer)),
      message_(std::move(message)) {}

std::string pointer_key(const std::string& parent, std::string_view key) {
  std::string out = parent + "/";
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string pointer_index(const std::string& parent, std::size_t index) { return fmt::format("{}/{}", parent, index); }

// Levenshtein distance, ignoring case (so "w_q" is one step from nothing: distance 0 to "W_q").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace attn
