#pragma once
// JSON Pointers (RFC 6901) for error messages: "/W_q/2", "/mask/keep/0".

#include <cstddef>
#include <string>
#include <string_view>

namespace attn {

// `parent` extended by one object key, escaped as RFC 6901 says ("~" -> "~0", "/" -> "~1").
std::string pointer_key(const std::string& parent, std::string_view key);
// `parent` extended by one array index.
std::string pointer_index(const std::string& parent, std::size_t index);

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a typo.
template <class Range>
std::string nearest_word(std::string_view word, const Range& candidates);

std::size_t edit_distance(std::string_view a, std::string_view b);

template <class Range>
std::string nearest_word(std::string_view word, const Range& candidates) {
  std::string best;
  std::size_t best_distance = word.size() / 2 + 2;  // farther than this is another word, not a typo
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best;
}

}  // namespace attn
