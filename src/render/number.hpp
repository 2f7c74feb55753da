#pragma once
// Numbers as people read them in a table.

#include <string>

namespace attn {

// `precision` digits after the point; scientific notation for |x| >= 1e6; "-inf", "inf", "nan".
std::string format_value(double x, int precision);

}  // namespace attn
