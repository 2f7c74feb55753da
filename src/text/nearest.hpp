#pragma once
// "Did you mean …?": the nearest spelling of a key or a name, for the messages of every layer.

#include <cstddef>
#include <string>
#include <string_view>

namespace attn {

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a typo.
template <class Range>
std::string nearest_word(std::string_view word, const Range& candidates);

// The clause an "unknown …" message puts after the name it could not place: ` (did you mean "NEAR"?)`
// with the nearest candidate, or "" when none is close enough.
template <class Range>
std::string did_you_mean(std::string_view word, const Range& candidates);

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

template <class Range>
std::string did_you_mean(std::string_view word, const Range& candidates) {
  const std::string near = nearest_word(word, candidates);
  return near.empty() ? std::string() : " (did you mean \"" + near + "\"?)";
}

}  // namespace attn
