#pragma once
// Numbers as people read them in a table.

#include <string>

namespace attn {

// `precision` digits after the point; scientific notation for |x| >= 1e6; "-inf", "inf", "nan".
std::string format_value(double x, int precision);

// The exact value, as the trace writes it: the shortest text that reads back to the same value of the
// trace's dtype (float32: the float the double holds exactly); "-inf", "inf", "nan".
std::string exact_value(double x, bool float32);

}  // namespace attn
