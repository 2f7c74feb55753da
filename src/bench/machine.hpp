#pragma once
// What bench says of the machine it measured.

#include <string>

namespace attn {

// The processor's model name from /proc/cpuinfo ("model name"), or "" when there is none.
std::string cpu_model();

}  // namespace attn
