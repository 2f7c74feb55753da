#pragma once
// What the report's page will hold, decided before any of it is written (report.cpp makes it): the
// difference of the two engines, the mistake's first difference, the steps' heatmaps within the budget,
// the query tiles of the walk, and the notes that say what was left out. The sections and the page's
// data read it. Only pages/report/ includes this.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "render/draw/colormap.hpp"
#include "render/draw/panel.hpp"
#include "render/pages/report/budget.hpp"
#include "trace/trace.hpp"

namespace attn::report_detail {

struct ReportPlan {
  std::vector<std::string> notes;  // what the page leaves out, as HTML sentences
  // naive vs flash
  std::optional<StepRecord> difference;
  std::vector<Panel> diff_panels;      // D itself, for the tables
  std::vector<Panel> diff_map_panels;  // D in diff_unit, for the map
  std::string diff_unit;               // the map's unit and its neutral band, in words for the legend
  double diff_neutral = 0;             // |D| in units up to this is "within the rule": the neutral colour
  std::size_t diff_numbers = 0;
  bool diff_embedded = false;
  double max_diff = 0;
  ColorRange diff_range;
  // the steps
  std::vector<StepView> views;
  // the mistake: its first difference as intended and as mistaken
  std::vector<Panel> mistake_panels;
  ColorRange mistake_range;
  std::size_t mistake_numbers = 0;
  bool mistake_embedded = false;
  // the tile walk
  std::vector<QueryTile> walk;
  std::size_t query_tiles_total = 0;
  // the backward tile walk (report --backward with flash): whole key tiles, in the engine's order
  std::vector<KeyTile> backward_walk;
  std::size_t key_tiles_total = 0;
};

}  // namespace attn::report_detail
