#pragma once
// The pieces of HTML that the report's sections share: numbers as the page writes them, a note, a few
// rows and columns of a matrix as a table for readers without scripts, the configuration and the
// tokens. Only pages/report/ includes this.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "render/draw/panel.hpp"
#include "tensor/tensor.hpp"
#include "trace/trace.hpp"

namespace attn::report_detail {

std::string thousands(std::size_t count);    // 1234567: "1,234,567"
std::string short_number(double x);          // 3 significant digits; inf and nan as the trace writes them
std::string shape_text(const Shape& shape);  // "4 × 8"
std::string note(std::string_view html);     // <p class="note">

// A few rows and columns of a panel, for readers without scripts (and for print): the first and the last
// ones, like the terminal's tables.
std::string static_table(const Panel& p, std::size_t limit);

// A table of tile vectors or matrices (rows × cols) with labels, for the tile walk without scripts.
std::string static_matrix(std::string_view caption, std::span<const double> values, std::size_t rows, std::size_t cols,
                          const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                          std::size_t limit);

std::string config_line(const Trace& t);                         // sizes, heads, mask, dtype, engines
std::string token_line(const std::vector<std::string>& tokens);  // the first 40, as spans

}  // namespace attn::report_detail
