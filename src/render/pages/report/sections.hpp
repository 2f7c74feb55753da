#pragma once
// The HTML of the report's sections, which must read without scripts: each step's formula, meaning,
// shape, legend and tables (or why it is absent), the flash pass's tile walk, naive vs flash with
// compare's verdict, the mistake, the notes, the tokens and the navigation. Only pages/report/ includes
// this.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "render/pages/report/plan.hpp"
#include "render/pages/report/report.hpp"

namespace attn::report_detail {

// The end of a tile walk's section, the forward's and the backward's alike: the controls (the select
// `prefix`tile-select labelled `axis`, the buttons prev-`prefix`tile and next-`prefix`tile), the state
// line `state` (class `state_class` when given), the places the script draws into, the first tile's
// `tables` when there are any, and the section's close.
std::string walk_end(std::string_view prefix, std::string_view axis, std::string_view state_class,
                     const std::string& state, const std::string& tables);
// `tokens` from `begin` to `end`: the labels of a tile's rows or columns.
std::vector<std::string> tile_labels(const std::vector<std::string>& tokens, std::size_t begin, std::size_t end);

class ReportSections {
 public:
  ReportSections(const Trace& trace, const ReportOptions& options, const ReportPlan& plan)
      : t_(trace), p_(*trace.problem), o_(options), plan_(plan) {}

  std::string step_sections() const;  // every step of the input, in pipeline order
  // report --backward: the backward pass's diagram, every gradient of the input and the flash backward's
  // tile walk
  std::string backward_section() const;
  std::string flash_section() const;
  std::string diff_section() const;
  // attn-trace decode --report: the cache, each decode step's row, the chunks, the block table, the check
  // (decode_section.cpp)
  std::string decode_section() const;
  std::string mistake_section() const;
  std::string notes_html() const;
  std::string tokens_html() const;
  std::string nav() const;

 private:
  std::string sections_of(const std::vector<Step>& steps) const;
  std::string absent_step(Step step) const;
  std::string flash_backward_section() const;
  std::string backward_tile_tables(const FlashBackwardTile& tile) const;
  std::string step_section(const StepView& view, std::size_t index) const;
  std::string tile_tables(const FlashTile& tile) const;
  // One field of a tile (trace/trace.hpp's tile_fields) as a table: its rows the tile's queries or keys,
  // its columns the keys or numbered features.
  std::string field_matrix(const Tensor<double>& t, TileAxis rows, TileAxis cols, std::string_view caption,
                           const std::vector<std::string>& queries, const std::vector<std::string>& keys) const;

  const Trace& t_;
  const Problem& p_;
  const ReportOptions& o_;
  const ReportPlan& plan_;
};

}  // namespace attn::report_detail
