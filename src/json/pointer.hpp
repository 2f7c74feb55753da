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

}  // namespace attn
