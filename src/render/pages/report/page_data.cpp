#include "render/pages/report/page_data.hpp"

#include <iterator>
#include <span>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "render/draw/escape.hpp"
#include "render/pages/report/writer.hpp"

namespace attn::report_detail {

namespace {

class PageData {
 public:
  PageData(const Trace& trace, const ReportOptions& options, const ReportPlan& plan)
      : t_(trace), p_(*trace.problem), o_(options), plan_(plan) {}

  std::string data() const {
    std::string out = fmt::format(
        "{{\"format\":\"attn-trace.report\",\"version\":1,\"generator\":{},\"description\":{},\"config\":{{\"n\":{},"
        "\"m\":{},\"batch\":{},\"d_model\":{},\"d_k\":{},\"d_v\":{},\"d_out\":{},\"n_heads\":{},\"n_kv_heads\":{},"
        "\"scale\":",
        json_string(fmt::format("attn-trace {}", o_.version)), data_text(p_.description), p_.n, p_.m,
        p_.batched ? std::to_string(p_.B) : "null", p_.d_model, p_.d_k, p_.d_v, p_.d_out, p_.h, p_.g);
    put_number(out, p_.scale);
    out += fmt::format(",\"mask\":{},\"dtype\":\"{}\",\"engine\":\"{}\",\"head\":{}}}", data_text(p_.mask.summary()),
                       name_of(t_.dtype), name_of(t_.engine), t_.head ? std::to_string(*t_.head) : "null");
    out += fmt::format(",\"budget\":{{\"step_numbers\":{},\"tile_numbers\":{},\"tiles\":{}}}", o_.max_step_numbers,
                       o_.max_tile_numbers, o_.max_tiles);
    for (const auto& [key, tokens] :
         {std::pair{"tokens", &p_.tokens}, std::pair{"context_tokens", &p_.context_tokens}}) {
      fmt::format_to(std::back_inserter(out), ",\"{}\":[", key);
      for (std::size_t b = 0; b < tokens->size(); ++b) {
        if (b > 0) out += ',';
        put_texts(out, (*tokens)[b]);
      }
      out += ']';
    }
    // The colours of colormap.hpp, so the page's heatmaps are those of every other picture.
    constexpr int lut = 256;
    out += ",\"colors\":{";
    for (const ColorScale scale : {ColorScale::sequential, ColorScale::diverging}) {
      out += fmt::format("\"{}\":[", scale_name(scale));
      for (int k = 0; k < lut; ++k)
        out += fmt::format("{}\"{}\"", k > 0 ? "," : "", hex(color_at(scale, k / static_cast<double>(lut - 1))));
      out += "],";
    }
    out += fmt::format("\"removed\":\"{}\"}},\"steps\":[", hex(removed_color));
    for (std::size_t s = 0; s < plan_.views.size(); ++s) {
      if (s > 0) out += ',';
      put_step(out, plan_.views[s]);
    }
    out += "],\"flash\":";
    put_flash(out);
    out += ",\"diff\":";
    put_difference(out);
    out += ",\"mistake\":";
    put_mistake(out);
    out += ",\"notes\":[";
    for (std::size_t k = 0; k < plan_.notes.size(); ++k) {
      if (k > 0) out += ',';
      out += json_string(plan_.notes[k]);
    }
    out += ']';
    if (t_.backward) {  // report --backward only, so that a forward page keeps its data as it was
      out += ",\"backward\":";
      put_backward(out);
    }
    out += '}';
    return out;
  }

 private:
  void put_step(std::string& out, const StepView& view) const {
    const StepRecord& rec = *view.rec;
    fmt::format_to(
        std::back_inserter(out),
        "{{\"name\":\"{}\",\"formula\":{},\"description\":{},\"shape\":[{}],\"dims\":", step_info(rec.step).name,
        data_text(rec.formula), data_text(rec.description), fmt::join(rec.value.shape(), ","));
    put_texts(out, dim_names(rec.step, p_.batched, p_.layout));
    out += ',';
    put_range(out, view.range);
    out += ",\"panels\":[";
    const std::vector<Panel> all = panels(t_, rec);  // made again, one step at a time (StepView)
    for (std::size_t k = 0; k < all.size(); ++k) {
      if (k > 0) out += ',';
      put_panel(out, all[k], view.embedded[k], o_.max_step_numbers);
    }
    out += "]}";
  }

  void put_flash(std::string& out) const {
    if (!t_.flash) {
      out += "null";
      return;
    }
    const FlashRecord& f = *t_.flash;
    // the running state's fields, the columns of the walk's state table (trace/trace.hpp)
    std::string state;
    for (const TileField<FlashTile>& field : tile_fields())
      if (field.state) state += fmt::format("{}\"{}\"", state.empty() ? "" : ",", field.name);
    fmt::format_to(std::back_inserter(out),
                   "{{\"block_q\":{},\"block_k\":{},\"d_v\":{},\"tiles_total\":{},\"query_tiles_total\":{},"
                   "\"state\":[{}],\"walk\":[",
                   f.tile_size.Br, f.tile_size.Bc, p_.d_v, f.tiles.size(), plan_.query_tiles_total, state);
    for (std::size_t q = 0; q < plan_.walk.size(); ++q) {
      const QueryTile& qt = plan_.walk[q];
      fmt::format_to(std::back_inserter(out), "{}{{\"batch\":{},\"head\":{},\"i\":{},\"rows\":[{},{}],\"tiles\":[",
                     q > 0 ? "," : "", qt.batch, qt.head, qt.i, qt.row_begin, qt.row_end);
      for (std::size_t k = 0; k < qt.tiles.size(); ++k) {
        const FlashTile& tile = *qt.tiles[k];
        fmt::format_to(std::back_inserter(out), "{}{{\"j\":{},\"cols\":[{},{}],\"skipped\":{}", k > 0 ? "," : "",
                       tile.j, tile.col_begin, tile.col_end, tile.skipped ? "true" : "false");
        if (!tile.skipped)
          for (const TileField<FlashTile>& field : tile_fields()) {
            if (!has_field(field, p_)) continue;
            fmt::format_to(std::back_inserter(out), ",\"{}\":", field.name);
            put_numbers(out, (tile.*field.member).values());
          }
        out += '}';
      }
      out += "],\"final\":";
      if (qt.final != nullptr) {
        out += "{\"O\":";
        put_numbers(out, qt.final->O.values());
        out += ",\"lse\":";
        put_numbers(out, qt.final->lse.values());
        out += '}';
      } else {
        out += "null";
      }
      out += '}';
    }
    out += "]}";
  }

  // Where dY came from, and the flash backward's walk: D of each (batch item, head) it walks, then whole
  // key tiles, each with its query tiles.
  void put_backward(std::string& out) const {
    const std::string_view upstream = p_.upstream == Upstream::seeded  ? "seeded"
                                      : p_.upstream == Upstream::input ? "input"
                                                                       : "ones";
    fmt::format_to(std::back_inserter(out), "{{\"dY\":\"{}\",\"grad_seed\":{},\"flash\":", upstream,
                   p_.upstream == Upstream::seeded ? std::to_string(p_.grad_seed) : "null");
    if (!t_.flash_backward) {
      out += "null}";
      return;
    }
    const FlashBackwardRecord& f = *t_.flash_backward;
    fmt::format_to(std::back_inserter(out),
                   "{{\"block_q\":{},\"block_k\":{},\"d_k\":{},\"d_v\":{},\"tiles_total\":{},\"key_tiles_total\":{},"
                   "\"D\":[",
                   f.tile_size.Br, f.tile_size.Bc, p_.d_k, p_.d_v, f.tiles.size(), plan_.key_tiles_total);
    const Tensor<double> D = with_batch_axis(f.D, 3);  // (B, h, n)
    bool first = true;
    for (std::size_t b = 0; b < D.dim(0); ++b)
      for (std::size_t hd = 0; hd < D.dim(1); ++hd) {
        fmt::format_to(std::back_inserter(out), "{}{{\"batch\":{},\"head\":{},\"values\":", first ? "" : ",", b,
                       head_at(t_, false, hd));
        first = false;
        put_numbers(out, std::span<const double>(&D(b, hd, 0), p_.n));
        out += '}';
      }
    out += "],\"walk\":[";
    for (std::size_t k = 0; k < plan_.backward_walk.size(); ++k) {
      const KeyTile& kt = plan_.backward_walk[k];
      fmt::format_to(std::back_inserter(out), "{}{{\"batch\":{},\"head\":{},\"j\":{},\"cols\":[{},{}],\"tiles\":[",
                     k > 0 ? "," : "", kt.batch, kt.head, kt.j, kt.col_begin, kt.col_end);
      for (std::size_t q = 0; q < kt.tiles.size(); ++q) {
        const FlashBackwardTile& tile = *kt.tiles[q];
        fmt::format_to(std::back_inserter(out), "{}{{\"i\":{},\"rows\":[{},{}],\"skipped\":{}", q > 0 ? "," : "",
                       tile.i, tile.row_begin, tile.row_end, tile.skipped ? "true" : "false");
        if (!tile.skipped)
          for (const TileField<FlashBackwardTile>& field : backward_tile_fields()) {
            fmt::format_to(std::back_inserter(out), ",\"{}\":", field.name);
            put_numbers(out, (tile.*field.member).values());
          }
        out += '}';
      }
      out += "]}";
    }
    out += "]}}";
  }

  void put_mistake(std::string& out) const {
    if (o_.mistake == nullptr) {
      out += "null";
      return;
    }
    const MistakeResult& r = *o_.mistake;
    fmt::format_to(std::back_inserter(out), "{{\"name\":{},\"first_difference\":{}",
                   json_string(mistake_info(r.mistake).name),
                   r.first_difference ? json_string(step_info(*r.first_difference).name) : "null");
    if (!plan_.mistake_panels.empty()) {
      out += ',';
      put_range(out, plan_.mistake_range);
      out += ",\"panels\":[";
      put_panel(out, plan_.mistake_panels[0], plan_.mistake_embedded, o_.max_step_numbers / 4);
      out += ',';
      put_panel(out, plan_.mistake_panels[1], plan_.mistake_embedded, o_.max_step_numbers / 4);
      out += ']';
    }
    out += '}';
  }

  void put_difference(std::string& out) const {
    if (!plan_.difference) {
      out += "null";
      return;
    }
    out += '{';
    put_range(out, plan_.diff_range);
    out += ",\"max_abs\":";
    put_number(out, plan_.max_diff);
    out += ",\"unit\":" + json_string(plan_.diff_unit) + ",\"neutral\":";
    put_number(out, plan_.diff_neutral);
    out += ",\"panels\":[";
    for (std::size_t k = 0; k < plan_.diff_map_panels.size(); ++k) {
      if (k > 0) out += ',';
      put_panel(out, plan_.diff_map_panels[k], plan_.diff_embedded, o_.max_step_numbers / 4);
    }
    out += "]}";
  }

  const Trace& t_;
  const Problem& p_;
  const ReportOptions& o_;
  const ReportPlan& plan_;
};

}  // namespace

std::string page_data(const Trace& trace, const ReportOptions& options, const ReportPlan& plan) {
  return PageData(trace, options, plan).data();
}

}  // namespace attn::report_detail
