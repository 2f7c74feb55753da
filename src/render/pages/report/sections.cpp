#include "render/pages/report/sections.hpp"

#include <algorithm>
#include <utility>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/number.hpp"
#include "render/draw/notes.hpp"
#include "render/pages/report/html.hpp"
#include "render/pages/report/legend.hpp"
#include "render/pages/report/pipeline_svg.hpp"
#include "render/pages/report/writer.hpp"

namespace attn::report_detail {

std::string walk_end(std::string_view prefix, std::string_view axis, std::string_view state_class,
                     const std::string& state, const std::string& tables) {
  std::string out = fmt::format(
      "<div class=\"walk-controls needs-js\"><label>{1} <select id=\"{0}tile-select\"></select></label> "
      "<button type=\"button\" data-action=\"prev-{0}tile\" title=\"previous tile (←)\">◀ previous tile</button> "
      "<button type=\"button\" data-action=\"next-{0}tile\" title=\"next tile (→)\">next tile ▶</button></div>"
      "<p id=\"{0}tile-state\"{2} aria-live=\"polite\">{3}</p><div class=\"walk needs-js\"><div "
      "id=\"{0}tile-full\"></div><div id=\"{0}tile-parts\"></div></div>",
      prefix, axis, state_class.empty() ? "" : fmt::format(" class=\"{}\"", state_class), page_text(state));
  if (!tables.empty())
    out +=
        fmt::format("<details class=\"numbers\" open><summary>the first tile's numbers</summary>{}</details>", tables);
  return out + "</section>\n";
}

std::vector<std::string> tile_labels(const std::vector<std::string>& tokens, std::size_t begin, std::size_t end) {
  return {tokens.begin() + static_cast<long>(begin), tokens.begin() + static_cast<long>(end)};
}

// A decode's trace holds the output alone, every token's row: the decode section has the steps of each token.
std::string ReportSections::step_sections() const {
  return sections_of(t_.decode ? std::vector<Step>{Step::output} : steps_of(p_));
}

std::string ReportSections::sections_of(const std::vector<Step>& steps) const {
  std::string out;
  for (const Step step : steps) {
    const auto found =
        std::find_if(plan_.views.begin(), plan_.views.end(), [step](const StepView& v) { return v.rec->step == step; });
    out += found == plan_.views.end() ? absent_step(step)
                                      : step_section(*found, static_cast<std::size_t>(found - plan_.views.begin()));
  }
  return out;
}

// A step the trace does not hold keeps its section (the pipeline links to it), saying why.
std::string ReportSections::absent_step(Step step) const {
  const std::string_view name = step_info(step).name;
  const bool backward = is_gradient_step(step);
  const bool in_tiles = is_score_step(step) && t_.engine == Engine::flash &&
                        (backward ? t_.flash_backward.has_value() : t_.flash.has_value());
  return fmt::format(
      "<section class=\"step absent\" id=\"step-{}\" data-step=\"{}\"><h2><a class=\"anchor\" "
      "href=\"#step-{}\">{}</a></h2><p class=\"formula\">{}</p><p class=\"meaning\">{}</p>{}</section>\n",
      name, name, name, name, page_text(step_formula(step, p_)), page_text(step_description(step, p_)),
      note(!in_tiles ? "Not in this trace (it was left out by <code>--steps</code>)."
           : backward
               ? "The flash backward never forms this n × m matrix whole: its tiles hold it piece by piece, in "
                 "<a href=\"#flash-backward\">the backward tile walk</a>. <code>--engine both</code> draws it here "
                 "too."
               : "The flash engine never forms this n × m matrix whole: its tiles hold it piece by piece, in "
                 "<a href=\"#flash\">the tile walk</a>. <code>--engine both</code> draws it here too."));
}

std::string ReportSections::step_section(const StepView& view, std::size_t index) const {
  const StepRecord& rec = *view.rec;
  const std::string_view name = step_info(rec.step).name;
  std::string notes;
  if (const std::size_t left = view.left_out(); left > 0) {
    const bool too_large = std::all_of(view.panels.begin(), view.panels.end(),
                                       [&](const PanelSize& size) { return size.cells > o_.max_step_numbers; });
    notes = note(too_large ? fmt::format("These heatmaps are larger than the {} numbers a page holds; the trace "
                                         "(<code>run --json</code>) has them all.",
                                         thousands(o_.max_step_numbers))
                           : fmt::format("{} of these {} heatmaps are not in this page (its budget of numbers "
                                         "went to the heatmaps before them); <code>--head H</code> makes a trace "
                                         "of one head that fits.",
                                         left, view.panels.size()));
  }
  if (const std::vector<Panel> angles = rotation_panels(p_, rec.step); !angles.empty()) {
    // RoPE's angle table: what each token was turned by.
    notes +=
        note(fmt::format("The angles: pair i turns by pos·θ_i, θ_i = {}^(−2i/{}).", p_.rope->theta, p_.rope->dims));
    for (const Panel& panel : angles) notes += static_table(panel, 12);
  }
  if (rec.step == Step::weights) {
    // The rows the mask emptied, one line per batch item.
    std::map<std::size_t, std::vector<std::string>> empty;
    for (const EmptyRow& e : t_.empty_rows) empty[e.batch].push_back(page_text(p_.tokens[e.batch][e.query]));
    for (auto& [b, names] : empty) {
      const std::size_t count = names.size();
      if (count > 8) names.resize(8), names.emplace_back("…");
      notes += note(fmt::format("{} {}{} {} no key to attend: {} weights are all 0.",
                                count == 1 ? "Query" : fmt::format("{} queries", count), fmt::join(names, ", "),
                                p_.batched ? fmt::format(" of batch item {}", b) : "", count == 1 ? "has" : "have",
                                count == 1 ? "its" : "their"));
    }
  }
  if (rec.step == Step::d_masked || rec.step == Step::d_scores)
    if (const std::optional<std::string> why = softmax_backward_note(t_))
      notes += fmt::format("<p class=\"note why-zero\">{}</p>", page_text(*why));
  return fmt::format(
      "<section class=\"step\" id=\"step-{}\" data-step=\"{}\" data-index=\"{}\"><h2><a class=\"anchor\" "
      "href=\"#step-{}\">{}</a></h2><p class=\"formula\">{}</p><p class=\"meaning\">{}</p><p "
      "class=\"shape\">shape <b>{}</b> ({}), {}</p>{}<div class=\"heatmaps needs-js\"></div>{}<details "
      "class=\"numbers\" open><summary>numbers</summary>{}</details></section>\n",
      name, name, index, name, name, page_text(rec.formula), page_text(rec.description), shape_text(rec.value.shape()),
      fmt::join(dim_names(rec.step, p_.batched, p_.layout), " × "), name_of(t_.dtype),
      legend_svg(view.range, view.removed, name), notes, view.tables);
}

// The flash section: the walk's controls, and its first tile as tables for readers without scripts.
std::string ReportSections::flash_section() const {
  std::string out =
      "<section id=\"flash\" class=\"flash\"><h2><a class=\"anchor\" href=\"#flash\">flash: the tile walk</a></h2>"
      "<p class=\"formula\">m_new = max(m_prev, rowmax S) &nbsp; alpha = exp(m_prev − m_new) &nbsp; P = exp(S − "
      "m_new)</p><p class=\"formula\">l_new = alpha·l_prev + rowsum P &nbsp; O = alpha·O_prev + P·V &nbsp; then "
      "once: O / l, lse = m + log l</p>";
  if (t_.decode) return "";  // a decode's flash is its split, in the decode section
  if (!t_.flash)
    return out +
           note(
               "This trace has no flash pass. <code>attn-trace report FILE</code> runs both engines by default; a "
               "saved trace needs <code>run --engine both --json</code> (or <code>flash</code>, or <code>compare "
               "--json</code>).") +
           "</section>\n";
  const FlashRecord& f = *t_.flash;
  out += fmt::format(
      "<p class=\"meaning\">FlashAttention-2's forward pass (arXiv:2307.08691, Algorithm 1): each query tile of "
      "{} row{} meets the keys {} at a time. Only one tile of scores S and its exponentials P exist at once; each "
      "row keeps a running maximum m, sum l and output O, and when a tile raises m, alpha = exp(m_prev − m_new) "
      "rescales what earlier tiles added. The rectangle on the score matrix is the current tile.</p>",
      f.tile_size.Br, f.tile_size.Br == 1 ? "" : "s", f.tile_size.Bc);
  std::string state = "The trace holds no tile that fits this page.";
  std::string tables;
  if (!plan_.walk.empty() && !plan_.walk.front().tiles.empty()) {
    const FlashTile& tile = *plan_.walk.front().tiles.front();
    state = fmt::format("{}head {} · query tile {} (rows {}–{}) × key tile {} (keys {}–{}){}",
                        p_.batched ? fmt::format("batch {} · ", tile.batch) : "", tile.head, tile.i, tile.row_begin,
                        tile.row_end - 1, tile.j, tile.col_begin, tile.col_end - 1,
                        tile.skipped ? ": skipped, the mask rules out every pair" : "");
    if (!tile.skipped) tables = tile_tables(tile);
  }
  return out + walk_end("", "query tile", "", state, tables);
}

std::string ReportSections::field_matrix(const Tensor<double>& t, TileAxis rows, TileAxis cols,
                                         std::string_view caption, const std::vector<std::string>& queries,
                                         const std::vector<std::string>& keys) const {
  const std::vector<std::string>& row_labels = rows == TileAxis::keys ? keys : queries;
  const std::size_t r = row_labels.size(), c = t.size() / std::max<std::size_t>(1, r);
  std::vector<std::string> features;
  if (cols != TileAxis::keys)
    for (std::size_t k = 0; k < c; ++k) features.push_back(std::to_string(k));
  return static_matrix(caption, t.values(), r, c, row_labels, cols == TileAxis::keys ? keys : features, o_.table_size);
}

// S, the running state, P and O of one tile, as tables: its fields in the order of the trace's table
// (trace/trace.hpp), the running state as one table where it starts.
std::string ReportSections::tile_tables(const FlashTile& tile) const {
  const std::vector<std::string> rows = tile_labels(p_.tokens[tile.batch], tile.row_begin, tile.row_end);
  const std::vector<std::string> cols = tile_labels(p_.context_tokens[tile.batch], tile.col_begin, tile.col_end);
  std::string out;
  bool state_shown = false;
  for (const TileField<FlashTile>& field : tile_fields()) {
    if (field.dropout_only) continue;  // P_drop: the trace holds it; the walk shows P
    if (field.state) {
      if (std::exchange(state_shown, true)) continue;
      const TileState state = tile_state(tile);
      out +=
          static_matrix("state", state.values, rows.size(), state.names.size(), rows, state.names, state.names.size());
      continue;
    }
    out += field_matrix(tile.*field.member, field.rows, field.cols, field.caption, rows, cols);
  }
  return out;
}

std::string ReportSections::diff_section() const {
  if (!plan_.difference) {
    if (!t_.flash && t_.engine == Engine::naive) return "";
    return "<section id=\"naive-vs-flash\" class=\"diff\"><h2>naive vs flash</h2>" +
           note(t_.engine == Engine::both
                    ? "The naive output is not in this trace (<code>--steps</code> left it out), so there is "
                      "nothing to set the flash output against."
                    : "Only one engine's output is in this trace; <code>--engine both</code> (the default of "
                      "<code>report</code> for an input) shows how far flash is from naive.") +
           "</section>\n";
  }
  std::string verdict = fmt::format("max |flash − naive| = {} over {} values ({})", short_number(plan_.max_diff),
                                    plan_.difference->value.size(), name_of(t_.dtype));
  if (t_.compare) {
    const CompareRecord& c = *t_.compare;
    verdict += fmt::format(
        ". compare's verdict: <b class=\"{}\">{}</b>: max |flash − ref| = {} {} 2 · max |naive − ref| + noise = "
        "2 · {} + {} = {} (ref: naive attention in {})",
        c.pass ? "pass" : "fail", c.pass ? "pass" : "fail", short_number(c.flash_vs_ref.max_abs), c.pass ? "≤" : ">",
        short_number(c.naive_vs_ref.max_abs), short_number(c.noise), short_number(c.bound), reference_name(c.dtype));
  } else {
    verdict +=
        ". Both sum the same numbers in another order, so they differ in the last digits; "
        "<code>attn-trace compare</code> judges both against a wider reference.";
  }
  std::string tables;
  for (std::size_t k = 0; k < plan_.diff_panels.size() && k < 4; ++k) {
    Panel shown = plan_.diff_panels[k];
    if (shown.caption.empty()) shown.caption = "flash − naive";
    tables += static_table(shown, o_.table_size);
  }
  return fmt::format(
      "<section id=\"naive-vs-flash\" class=\"diff\"><h2><a class=\"anchor\" href=\"#naive-vs-flash\">naive vs "
      "flash</a></h2><p class=\"formula\">D = O_flash − O_naive</p><p class=\"meaning\">How far the flash "
      "output is from the naive one, entry by entry (shape {}).</p><p class=\"verdict\" "
      "id=\"verdict\">{}</p>{}{}<div class=\"heatmaps needs-js\" id=\"diff-maps\"></div><details "
      "class=\"numbers\" open><summary>numbers</summary>{}</details></section>\n",
      shape_text(plan_.difference->value.shape()), verdict,
      legend_svg(plan_.diff_range, false, "diff", plan_.diff_neutral) +
          fmt::format("<p class=\"legend-scale\" id=\"diff-unit\">{}</p>", plan_.diff_unit),
      plan_.diff_embedded ? ""
                          : note("The difference map is too large for this page; the verdict above covers it all."),
      tables);
}

// report --mistake: what the mistake is, every step's largest difference, the first difference as two
// heatmaps (and tables), and what it costs.
std::string ReportSections::mistake_section() const {
  if (o_.mistake == nullptr) return "";
  const MistakeResult& r = *o_.mistake;
  const MistakeInfo& info = mistake_info(r.mistake);
  std::string steps;
  for (const StepDifference& d : r.steps) {
    const bool first = r.first_difference && *r.first_difference == d.step;
    const std::string what = !d.same_shape ? fmt::format("shapes differ: {} and {}", shape_text(d.intended_shape),
                                                         shape_text(d.mistaken_shape))
                             : d.differs() ? short_number(d.max_abs)
                                           : "0 (identical)";
    steps += fmt::format("<tr{}><th>{}</th><td>{}</td><td>{}</td></tr>", first ? " class=\"first\"" : "",
                         step_info(d.step).name, what, first ? "first difference" : "");
  }
  std::string first =
      "<p class=\"meaning\">No step differs: on this input the mistake changes nothing (see "
      "below why).</p>";
  if (r.first_difference) {
    const Step step = *r.first_difference;
    first = fmt::format(
        "<h3 id=\"mistake-first\">first difference: {}</h3><p class=\"formula\">intended: {}</p>"
        "<p class=\"formula\">mistaken: {}</p>",
        step_info(step).name, page_text(find_step(r.intended, step)->formula),
        page_text(find_step(r.mistaken, step)->formula));
    if (!plan_.mistake_panels.empty()) {
      first += legend_svg(plan_.mistake_range, !plan_.mistake_panels[0].removed.empty(), "mistake");
      if (!plan_.mistake_embedded)
        first += note("These matrices are too large for this page; the tables show a corner.");
      first +=
          "<div class=\"heatmaps needs-js\" id=\"mistake-maps\"></div><details class=\"numbers\" "
          "open><summary>numbers</summary>" +
          static_table(plan_.mistake_panels[0], o_.table_size) + static_table(plan_.mistake_panels[1], o_.table_size) +
          "</details>";
    }
  }
  std::string costs = "<ul class=\"findings\">";
  for (const std::string& f : r.findings) costs += fmt::format("<li>{}</li>", page_text(f));
  costs += "</ul>";
  for (const CostTable& t : r.costs) {
    if (t.rows.empty()) continue;
    costs += fmt::format("<table class=\"numbers cost\"><caption>{}</caption><thead><tr><th>{}</th>",
                         page_text(t.title), t.by_key ? "key" : "query");
    for (const std::string& m : t.measures)
      costs += fmt::format("<th>{} (intended)</th><th>{} (mistaken)</th>", page_text(m), page_text(m));
    costs += "</tr></thead><tbody>";
    constexpr std::size_t most = 32;
    for (std::size_t k = 0; k < t.rows.size() && k < most; ++k) {
      const CostRow& row = t.rows[k];
      const auto& tokens = t.by_key && p_.cross ? p_.context_tokens : p_.tokens;
      std::string label = page_text(tokens[row.batch][row.index]);
      if (p_.h > 1) label = fmt::format("head {}, {}", row.head, label);
      if (p_.batched) label = fmt::format("batch {}, {}", row.batch, label);
      costs += fmt::format("<tr><th>{}</th>", label);
      for (std::size_t m = 0; m < t.measures.size(); ++m)
        costs +=
            fmt::format("<td>{}</td><td>{}</td>", format_value(row.intended[m], 4), format_value(row.mistaken[m], 4));
      costs += "</tr>";
    }
    costs += "</tbody></table>";
    if (t.rows.size() > most)
      costs +=
          note(fmt::format("The table shows the first {} of {} rows; <code>attn-trace run --mistake {} "
                           "--json OUT</code> writes them all.",
                           most, t.rows.size(), info.name));
  }
  return fmt::format(
      "<section id=\"mistake\" class=\"mistake\"><h2><a class=\"anchor\" href=\"#mistake\">mistake: {}</a></h2>"
      "<p class=\"meaning\">{}</p><p class=\"formula\">intended: {}</p><p class=\"formula\">mistaken: {}</p>"
      "<p class=\"meaning\">{}</p><table class=\"numbers mistake-steps\"><caption>the largest |intended − "
      "mistaken| of each step</caption><tbody>{}</tbody></table>{}<h3>what it costs, measured</h3>{}</section>\n",
      info.name, page_text(info.summary), page_text(info.intended), page_text(info.mistaken), page_text(info.why),
      steps, first, costs);
}

std::string ReportSections::notes_html() const {
  std::string out;
  for (const std::string& line : plan_.notes) out += note(line);
  for (const std::string& warning : t_.warnings)
    out += fmt::format("<p class=\"note warning\">{}</p>", page_text(warning));
  return out.empty() ? out : "<div class=\"notes\" id=\"notes\">" + out + "</div>";
}

std::string ReportSections::tokens_html() const {
  std::string out = fmt::format("<p class=\"tokens\">queries: {}</p>", token_line(p_.tokens[0]));
  if (p_.cross) out += fmt::format("<p class=\"tokens\">keys: {}</p>", token_line(p_.context_tokens[0]));
  return out;
}

std::string ReportSections::nav() const {
  const auto links = [&](Pass pass) {
    std::string line;
    for (const StepView& view : plan_.views) {
      const std::string_view name = step_info(view.rec->step).name;
      if (step_info(view.rec->step).pass == pass) line += fmt::format(" <a href=\"#step-{}\">{}</a>", name, name);
    }
    return line;
  };
  std::string out = "<a href=\"#pipeline\">pipeline</a>" + links(Pass::forward);
  if (t_.flash) out += " <a href=\"#flash\">tile walk</a>";
  if (plan_.difference) out += " <a href=\"#naive-vs-flash\">naive vs flash</a>";
  if (t_.decode) out += " <a href=\"#decode\">decoding</a>";
  if (t_.backward) {
    out += " <a href=\"#backward\">backward</a>" + links(Pass::backward);
    if (t_.flash_backward) out += " <a href=\"#flash-backward\">backward tile walk</a>";
  }
  if (o_.mistake != nullptr) out = "<a href=\"#mistake\">mistake</a> " + out;
  return out;
}

}  // namespace attn::report_detail
