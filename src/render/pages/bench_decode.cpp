// bench --decode in the terminal (render/pages/bench.hpp).

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "render/draw/text.hpp"
#include "render/pages/bench.hpp"

namespace attn {

namespace {

double bandwidth_on(const DecodeBenchResult& r, std::size_t threads) {
  for (const CopyBandwidth& b : r.bandwidth)
    if (b.threads == threads) return b.gbytes_per_s;
  return 0;
}

// `s` right-aligned in `width` columns.
std::string pad(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  std::string out(width > w ? width - w : 0, ' ');
  out.append(s);
  return out;
}

}  // namespace

std::string render_decode_bench(const DecodeBenchResult& r, const RenderOptions& o) {
  std::vector<std::string> lines;
  const auto para = [&](const std::string& text, std::string_view indent = "    ") {
    for (std::string& l : wrap(text, o.width, indent)) lines.push_back(std::move(l));
  };
  para(fmt::format("attn-trace {} · bench --decode · fast path ({}) · {}", o.version, r.kernels, name_of(r.dtype)), "");
  if (!r.cpu.empty()) para(r.cpu, "");
  lines.emplace_back("");
  para(
      fmt::format("one new token's attention against a cache of L tokens: {} query heads on {} key/value head{} of "
                  "d_k = {}, d_v = {}; the split rows cut the cache into {} chunks (flash-decoding)",
                  r.h, r.g, r.g == 1 ? "" : "s", r.d_k, r.d_v, r.split));
  for (const CopyBandwidth& b : r.bandwidth)
    para(fmt::format("memory bandwidth, {} thread{}: {:.1f} GB/s (a copy loop of {}, bytes read + written)", b.threads,
                     b.threads == 1 ? "" : "s", b.gbytes_per_s, bench_bytes(static_cast<double>(b.bytes))));
  lines.emplace_back("");

  const std::vector<std::string> header = {"cache L",    "cache read", "threads", "split",
                                           "time/token", "GB/s",       "of bw",   "GFLOP/s"};
  std::vector<std::vector<std::string>> rows;
  for (const DecodeBenchRow& row : r.rows) {
    if (row.refused) {
      rows.push_back({fmt::format("{}", row.length), "refused:", row.refusal});
      continue;
    }
    const double bw = bandwidth_on(r, row.threads);
    rows.push_back({fmt::format("{}", row.length), bench_bytes(static_cast<double>(row.cache_bytes)),
                    fmt::format("{}", row.threads), fmt::format("{}", row.split),
                    bench_seconds(row.seconds.median, o.unicode), fmt::format("{:.1f}", row.gbytes_per_s()),
                    bw > 0 ? fmt::format("{:.0f}%", 100 * row.gbytes_per_s() / bw) : "",
                    fmt::format("{:.1f}", row.flops / row.seconds.median / 1e9)});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = display_width(header[c]);
  for (const auto& row : rows)
    if (row.size() == header.size())
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], display_width(row[c]));
  const auto line_of = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      s += "  ";
      s += pad(cells[c], width[c]);
    }
    return s;
  };
  lines.push_back(line_of(header));
  for (const auto& row : rows)
    lines.push_back(row.size() == header.size() ? line_of(row)
                                                : fmt::format("  {} {}", pad(row[0], width[0]), row[1] + " " + row[2]));
  lines.emplace_back("");
  // What the FLOP per byte say: a decode step does 2·h·(d_k + d_v) FLOP for every g·(d_k + d_v) values it reads.
  const double per_byte = 2.0 * static_cast<double>(r.h) /
                          (static_cast<double>(r.g) * static_cast<double>(r.dtype == DType::float64 ? 8 : 4));
  const double balance = r.bandwidth.empty() ? 0 : r.fma_peak_gflops / r.bandwidth.front().gbytes_per_s;
  const double bandwidth = r.bandwidth.empty() ? 0.0 : r.bandwidth.front().gbytes_per_s;
  const std::string verdict =
      per_byte < balance / 2
          ? "Past the caches, the time is the bytes over the bandwidth: decoding is bound by memory, not arithmetic."
          : "So many query heads share each key/value head that every byte read feeds several of them: arithmetic "
            "starts to count beside memory.";
  para(fmt::format("A decode step does {:.2g} FLOP per byte of cache it reads ({} query head{} per key/value head); "
                   "one core here does {:.0f} GFLOP/s (its FP32 FMA peak, measured) against {:.1f} GB/s: {:.0f} FLOP a "
                   "byte. {} Times are medians of the samples (each a batch of steps of at least 10 ms).",
                   per_byte, r.h / r.g, r.h / r.g == 1 ? "" : "s", r.fma_peak_gflops, bandwidth, balance, verdict),
       "");
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace attn
