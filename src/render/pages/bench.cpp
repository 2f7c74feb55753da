#include "render/pages/bench.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "render/draw/page.hpp"
#include "render/draw/text.hpp"

namespace attn {

std::string bench_bytes(double bytes) {
  constexpr double KiB = 1024.0, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;
  if (bytes >= TiB) return fmt::format("{:.1f} TiB", bytes / TiB);
  if (bytes >= GiB) return fmt::format("{:.1f} GiB", bytes / GiB);
  if (bytes >= MiB) return fmt::format("{:.1f} MiB", bytes / MiB);
  if (bytes >= KiB) return fmt::format("{:.1f} KiB", bytes / KiB);
  return fmt::format("{:.0f} B", bytes);
}

std::string bench_seconds(double seconds, bool unicode) {
  if (seconds >= 100) return fmt::format("{:.0f} s", seconds);
  if (seconds >= 1) return fmt::format("{:.2f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.1f} ms", seconds * 1e3);
  if (seconds >= 1e-5) return fmt::format("{:.0f} {}s", seconds * 1e6, unicode ? "µ" : "u");
  return fmt::format("{:.2f} {}s", seconds * 1e6, unicode ? "µ" : "u");
}

namespace {

std::string repeat(std::string_view piece, std::size_t count) {
  std::string s;
  for (std::size_t i = 0; i < count; ++i) s += piece;
  return s;
}

std::string error_text(double e) { return std::isnan(e) ? "nan" : fmt::format("{:.1e}", e); }

// Growth from the previous size of the same engine: "×3.9".
std::string growth(double now, double before, bool unicode) {
  if (!(before > 0) || !(now > 0)) return "";
  return fmt::format("{}{:.1f}", unicode ? "×" : "x", now / before);
}

struct Column {
  std::string header;
  bool right = true;
  int drop = 0;  // 0: always shown; otherwise left out first when smaller, if the table is too wide
  std::vector<std::string> cells;
  std::size_t width = 0;
};

// The previous measured run of the same engine, for the growth columns.
const BenchRun* previous_of(const BenchResult& r, std::size_t k) {
  for (std::size_t j = k; j-- > 0;)
    if (r.runs[j].engine == r.runs[k].engine && !r.runs[j].refused) return &r.runs[j];
  return nullptr;
}

// Each column's width, then columns left out, least needed first, until the table fits `width`; the
// headers of those whose loss is worth saying.
std::vector<std::string> fit_columns(std::vector<Column>& cols, std::size_t width) {
  for (Column& c : cols) {
    c.width = display_width(c.header);
    for (const std::string& cell : c.cells) c.width = std::max(c.width, display_width(cell));
  }
  const auto total = [&] {
    std::size_t w = 0;
    for (const Column& c : cols) w += c.width + (w > 0 ? 2 : 0);
    return w;
  };
  std::vector<std::string> left_out;
  for (int drop = 1; drop <= 5 && total() > width; ++drop)
    for (auto it = cols.begin(); it != cols.end();)
      if (it->drop == drop) {
        if (drop != 1) left_out.push_back(it->header);  // m == n everywhere: nothing lost
        it = cols.erase(it);
      } else {
        ++it;
      }
  return left_out;
}

// `gflops` as a share of the FMA peak measured in the run, or "-" when there is none.
std::string peak_share(const BenchResult& r, double gflops) {
  return r.fma_peak_gflops > 0 ? fmt::format("{:.0f}%", 100 * gflops / r.fma_peak_gflops) : std::string("-");
}

// The forward's columns: one row per engine and size; a refused run's row says what it would have needed.
std::vector<Column> forward_columns(const BenchResult& r, const RenderOptions& o,
                                    std::vector<std::optional<std::string>>& spans) {
  const bool u = o.unicode;
  const bool same_m = std::all_of(r.runs.begin(), r.runs.end(), [](const BenchRun& x) { return x.m == x.n; });
  std::vector<Column> cols = {{"engine", false, 0, {}},
                              {"n", true, 0, {}},
                              {"m", true, same_m ? 1 : 0, {}},
                              {"attention", true, 0, {}},
                              {u ? "min–max" : "min-max", true, 2, {}},
                              {"projections", true, 5, {}},
                              {"GFLOP/s", true, 0, {}},
                              {"% peak", true, 0, {}},
                              {"proj. GFLOP/s", true, 3, {}},
                              {"proj. %", true, 3, {}},
                              {"peak RSS", true, 0, {}},
                              {"scores held", true, 5, {}},
                              {"max error", true, 4, {}}};
  if (r.sweep) {
    cols.push_back({u ? "time ×" : "time x", true, 3, {}});
    cols.push_back({u ? "RSS ×" : "RSS x", true, 3, {}});
  }
  for (std::size_t k = 0; k < r.runs.size(); ++k) {
    const BenchRun& run = r.runs[k];
    std::vector<std::string> cells = {std::string(name_of(run.engine)), fmt::format("{}", run.n),
                                      fmt::format("{}", run.m)};
    if (run.refused) {
      spans.emplace_back(fmt::format("refused: needs about {}, over --max-memory {}",
                                     bench_bytes(double(run.estimated_bytes)), bench_bytes(double(r.max_memory))));
      cells.resize(cols.size());
    } else {
      spans.emplace_back();
      cells.push_back(bench_seconds(run.attention_s.median, u));
      cells.push_back(fmt::format("{}{}{}", bench_seconds(run.attention_s.min, u), u ? "–" : "-",
                                  bench_seconds(run.attention_s.max, u)));
      cells.push_back(bench_seconds(run.projection_s.median, u));
      cells.push_back(fmt::format("{:.2f}", run.attention_gflops));
      cells.push_back(peak_share(r, run.attention_gflops));
      cells.push_back(fmt::format("{:.1f}", run.projection_gflops));
      cells.push_back(peak_share(r, run.projection_gflops));
      cells.push_back(bench_bytes(double(run.peak_rss_bytes)));
      cells.push_back(bench_bytes(double(run.score_bytes)));
      cells.push_back(error_text(run.max_error));
      if (r.sweep) {
        const BenchRun* before = previous_of(r, k);
        cells.push_back(before ? growth(run.attention_s.median, before->attention_s.median, u) : "");
        cells.push_back(before ? growth(double(run.peak_rss_bytes), double(before->peak_rss_bytes), u) : "");
      }
    }
    for (std::size_t c = 0; c < cols.size(); ++c) cols[c].cells.push_back(cells[c]);
  }
  return cols;
}

// --backward's columns: flash's forward and backward per size, their ratio, GFLOP/s and the share of
// the FMA peak measured in this run, the peak resident memory and how much of it the runs added.
std::vector<Column> backward_columns(const BenchResult& r, const RenderOptions& o,
                                     std::vector<std::optional<std::string>>& spans) {
  const bool u = o.unicode;
  std::vector<Column> cols = {{"n", true, 0, {}},           {"forward", true, 0, {}},
                              {"backward", true, 0, {}},    {u ? "bwd ÷ fwd" : "bwd / fwd", true, 0, {}},
                              {"fwd GFLOP/s", true, 3, {}}, {"bwd GFLOP/s", true, 0, {}},
                              {"% of peak", true, 0, {}},   {"projections", true, 4, {}},
                              {"peak RSS", true, 2, {}},    {"beyond start", true, 0, {}},
                              {"max error", true, 5, {}}};
  for (const BenchRun& run : r.runs) {
    std::vector<std::string> cells = {fmt::format("{}", run.n)};
    if (run.refused) {
      spans.emplace_back(fmt::format("refused: needs about {}, over --max-memory {}",
                                     bench_bytes(double(run.estimated_bytes)), bench_bytes(double(r.max_memory))));
      cells.resize(cols.size());
    } else {
      spans.emplace_back();
      const double ratio = run.attention_s.median > 0 ? run.backward_s.median / run.attention_s.median : 0;
      const double beyond = double(run.peak_rss_bytes) - double(std::min(run.rss_before_bytes, run.peak_rss_bytes));
      cells.insert(cells.end(), {bench_seconds(run.attention_s.median, u), bench_seconds(run.backward_s.median, u),
                                 fmt::format("{:.2f}", ratio), fmt::format("{:.1f}", run.attention_gflops),
                                 fmt::format("{:.1f}", run.backward_gflops), peak_share(r, run.backward_gflops),
                                 bench_seconds(run.projection_s.median, u), bench_bytes(double(run.peak_rss_bytes)),
                                 bench_bytes(beyond), error_text(run.max_error)});
    }
    for (std::size_t c = 0; c < cols.size(); ++c) cols[c].cells.push_back(cells[c]);
  }
  return cols;
}

void table(Page& page, const BenchResult& r, const RenderOptions& o) {
  std::vector<std::optional<std::string>> spans;  // a refused run: what it would have needed
  std::vector<Column> cols = r.backward ? backward_columns(r, o, spans) : forward_columns(r, o, spans);
  const std::vector<std::string> left_out = fit_columns(cols, o.width);

  const auto cell = [](const Column& c, const std::string& text) {
    const std::size_t pad = c.width - std::min(c.width, display_width(text));
    return c.right ? std::string(pad, ' ') + text : text + std::string(pad, ' ');
  };
  const auto line = [&](const auto& text_of, const std::optional<std::string>& span) {
    std::string s;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (span && cols[c].header != "engine" && cols[c].header != "n" && cols[c].header != "m") {
        s += "  " + *span;
        break;
      }
      if (c > 0) s += "  ";
      s += cell(cols[c], text_of(cols[c]));
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    page.line(s);
  };
  line([](const Column& c) { return c.header; }, std::nullopt);
  for (std::size_t k = 0; k < r.runs.size(); ++k) line([k](const Column& c) { return c.cells[k]; }, spans[k]);
  if (!left_out.empty())
    page.paragraph(fmt::format("(left out to fit {} columns: {}; --json keeps everything)", o.width,
                               fmt::format("{}", fmt::join(left_out, ", "))));
  page.line("");
}

// log(y2/y1) / log(n2/n1) between the first and the last measured run of `engine`.
std::optional<std::string> exponents(const BenchResult& r, Engine engine) {
  const BenchRun* first = nullptr;
  const BenchRun* last = nullptr;
  for (const BenchRun& run : r.runs)
    if (run.engine == engine && !run.refused) {
      if (first == nullptr) first = &run;
      last = &run;
    }
  if (first == nullptr || first == last || last->n == first->n) return std::nullopt;
  const double span = std::log(double(last->n) / double(first->n));
  const auto power = [&](double a, double b) {
    return a > 0 && b > 0 ? fmt::format("n^{:.2f}", std::log(b / a) / span) : std::string("-");
  };
  return fmt::format(
      "{}: from n = {} to {}, the attention's time grew as {}, the peak resident memory as {}, "
      "the score memory held as {}.",
      name_of(engine), first->n, last->n, power(first->attention_s.median, last->attention_s.median),
      power(double(first->peak_rss_bytes), double(last->peak_rss_bytes)),
      power(double(first->score_bytes), double(last->score_bytes)));
}

// Horizontal bars on a log scale from a power of `base` to a power of `base` (10 for times, 2 for bytes,
// so that the ends read as round figures): one row per engine and n.
void chart(Page& page, const BenchResult& r, const RenderOptions& o, const std::string& title, double base,
           double (*value)(const BenchRun&), std::string (*label)(double, bool)) {
  const auto log_base = [base](double x) { return std::log(x) / std::log(base); };
  double lo = 0, hi = 0;
  bool any = false;
  for (const BenchRun& run : r.runs) {
    const double v = run.refused ? 0 : value(run);
    if (!(v > 0)) continue;
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
  if (!any) return;
  // a hair of slack, so that an exact power (1 MiB) is its own end and not the one below
  const double from = std::floor(log_base(lo) + 1e-9), to = std::max(from + 1, std::ceil(log_base(hi) - 1e-9));
  const std::size_t lead = 14, tail = 12;
  const std::size_t bar = std::max<std::size_t>(10, o.width > lead + tail + 1 ? o.width - lead - tail - 1 : 0);
  const auto columns = [&](double v) {
    if (!(v > 0)) return std::size_t{0};
    const double at = std::clamp((log_base(v) - from) / (to - from), 0.0, 1.0);
    return std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(at * static_cast<double>(bar))));
  };
  const std::string_view naive_block = o.unicode ? "█" : "#", flash_block = o.unicode ? "▒" : "=";
  page.paragraph(fmt::format("{}, log scale from {} to {} ({} naive, {} flash)", title,
                             label(std::pow(base, from), o.unicode), label(std::pow(base, to), o.unicode), naive_block,
                             flash_block));
  std::size_t shown_n = 0;
  for (const BenchRun& run : r.runs) {
    const std::string n = run.n == shown_n ? "" : fmt::format("{}", run.n);
    shown_n = run.n;
    const std::string head = fmt::format("{:>7} {:<6}", n, name_of(run.engine));
    if (run.refused) {
      page.line(fmt::format("{}refused (needs about {})", head, bench_bytes(double(run.estimated_bytes))));
      continue;
    }
    const double v = value(run);
    const std::size_t k = columns(v);
    page.line(fmt::format("{}{}{} {:>{}}", head, repeat(run.engine == Engine::naive ? naive_block : flash_block, k),
                          std::string(bar - k, ' '), label(v, o.unicode), tail));
  }
  const std::string left = label(std::pow(base, from), o.unicode), right = label(std::pow(base, to), o.unicode);
  const std::size_t gap =
      bar > display_width(left) + display_width(right) ? bar - display_width(left) : display_width(right) + 1;
  page.line(fmt::format("{:{}}{}{:>{}}", "", lead, left, right, gap));
  page.line("");
}

double attention_time(const BenchRun& r) { return r.attention_s.median; }
double peak_rss(const BenchRun& r) { return double(r.peak_rss_bytes); }
std::string time_label(double s, bool unicode) { return bench_seconds(s, unicode); }
std::string bytes_label(double b, bool) { return bench_bytes(b); }

std::string method_text(const BenchResult& r) {
  switch (r.peak_method) {
    case PeakMethod::clear_refs:
      return "the process's VmHWM, reset before each engine's runs (5 to /proc/self/clear_refs)";
    case PeakMethod::fork: return "ru_maxrss of a forked child making one more run (clear_refs was not permitted)";
    case PeakMethod::none: return "not measured (no /proc on this system)";
  }
  return "?";
}

// "AVX-512" for "avx512": how the instruction sets are written.
std::string kernels_text(const std::string& name) {
  if (name == "avx512") return "AVX-512";
  if (name == "avx2") return "AVX2 + FMA";
  return name;
}

}  // namespace

std::string render_bench(const BenchResult& r, const RenderOptions& o) {
  Page page(o);
  page.heading(r.backward ? "bench: flash's forward and backward, unwatched"
               : r.sweep  ? "bench: time and memory against n, both engines unwatched"
                          : "bench: the engines unwatched");
  if (!r.runs.empty()) {
    const BenchRun& run = r.runs.front();
    const std::size_t d_k = run.heads == 0 ? 0 : run.d_model / run.heads;
    page.paragraph(
        fmt::format("input: {}; d_model {}, {} heads of d_k {}{}, mask {}, {}.", r.input, run.d_model, run.heads, d_k,
                    run.kv_heads == run.heads ? "" : fmt::format(" sharing {} key/value heads", run.kv_heads), run.mask,
                    name_of(r.dtype)));
  }
  const bool traced = !r.runs.empty() && r.runs.front().kernels == "traced";
  page.paragraph(fmt::format(
      "{} repeat{} each: the median, and the fastest and slowest; {} GFLOP/s counts 4·d per allowed query-key pair "
      "and head.",
      r.repeats, r.repeats == 1 ? "" : "s",
      traced ? "the attention is the engine's whole call less the projections run alone (inputs in the dtype, q, k, v, "
               "heads, merge, output)."
             : "the attention is timed between the projections (inputs in the dtype, q, k, v, heads) and the output "
               "projection (merge, output), which make the projections' time."));
  if (!r.runs.empty()) {
    const BenchRun& run = r.runs.front();
    page.paragraph(traced
                       ? fmt::format("path: the traced engines, unwatched, on one thread: {} rounds every stored step, "
                                     "which the fast kernels do not.",
                                     name_of(r.dtype))
                       : fmt::format("path: the fast kernels ({}), on {} thread{}; the matrix products in {}.",
                                     kernels_text(run.kernels), run.threads, run.threads == 1 ? "" : "s", r.products));
  }
  if (r.backward)
    page.paragraph(fmt::format(
        "backward: flash's forward keeps Q, K, V, O and lse; FlashAttention-2's backward from dO to dQ, dK, dV is "
        "timed alone (dY = {}; the products around both attentions make the projections' time). Its work is 2.5 × "
        "the forward's, as FlashAttention counts it: five products of 2·d per pair and head where the forward has "
        "two; % of peak is the backward's share of the peak below.",
        r.random ? "1 everywhere" : "the input's, or 1 everywhere"));
  page.paragraph(fmt::format("peak RSS: {}{}. max error: against float64 on {} sampled rows.", method_text(r),
                             r.backward ? "; beyond start: the peak less what the process held before the runs "
                                          "(the program and the input)"
                                        : "",
                             r.sample_rows));
  page.paragraph(fmt::format(
      "machine: {}, {} core{}; FP32 FMA peak, measured in this run by a loop of independent FMAs in registers: "
      "{:.1f} GFLOP/s on {} thread{} ({}). A % beside a GFLOP/s figure is its share of it{}.",
      r.cpu.empty() ? "unknown processor" : r.cpu, r.cores, r.cores == 1 ? "" : "s", r.fma_peak_gflops,
      r.fma_peak_threads, r.fma_peak_threads == 1 ? "" : "s", kernels_text(r.fma_peak_kernels),
      r.backward ? "" : "; proj.: the projections' GFLOP/s (every product of X, the weights and the heads)"));
  page.line("");
  table(page, r, o);
  if (r.sweep && !r.backward) {
    chart(page, r, o, "attention time", 10, attention_time, time_label);
    chart(page, r, o, "peak resident memory", 2, peak_rss, bytes_label);
    for (const Engine e : {Engine::naive, Engine::flash})
      if (const std::optional<std::string> text = exponents(r, e)) page.paragraph(*text);
  }
  return page.text();
}

}  // namespace attn
