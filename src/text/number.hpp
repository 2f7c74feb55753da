#pragma once
// Numbers as text, one convention per reader: for documents (traces, JSON, the exact values of
// --format) the shortest text that reads back to the same value; for people a fixed number of digits.
// Every convention writes what is not finite as "-inf", "inf" and "nan".

#include <cstddef>
#include <cstdint>
#include <string>

namespace attn {

// For documents: the shortest text that reads back to the same value of float (when `float32`: the
// float the double holds exactly) or of double, as the trace writes it.
std::string exact_value(double x, bool float32);

// exact_value of a finite `x`, written at `out` (room for exact_value_chars); the end of the text.
// For the writers of millions of numbers, without a string each.
inline constexpr int exact_value_chars = 40;
char* exact_value_to(char* out, double x, bool float32);

// For people, in tables: `precision` digits after the point; scientific notation for |x| >= 1e6.
std::string format_value(double x, int precision);

// For people, in sentences and legends: `digits` significant digits (at least 1), whatever the size.
std::string significant_value(double x, int digits);

// For people, a size: "512 bytes", "1.5 KiB", "4.0 GiB"; the largest size_t, a count that saturated, as
// "more than 16 EiB".
std::string describe_bytes(std::uint64_t bytes);

}  // namespace attn
