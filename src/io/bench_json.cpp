#include "io/bench_json.hpp"

#include <nlohmann/json.hpp>

#include "json/json_number.hpp"

namespace attn {

namespace {

using ordered = nlohmann::ordered_json;

ordered timing(const Timing& t) {
  return {{"median", json_number(t.median)}, {"min", json_number(t.min)}, {"max", json_number(t.max)}};
}

// bench --backward's figures of one run: the backward's time and work, its ratio to the forward's time,
// and its share of the FMA peak measured in the run (`peak`, GFLOP/s; null when not measured).
void backward_json(ordered& j, const BenchRun& r, double peak) {
  j["backward_s"] = timing(r.backward_s);
  j["backward_flops"] = r.backward_flops;
  j["backward_gflops"] = json_number(r.backward_gflops);
  j["backward_over_forward"] =
      r.attention_s.median > 0 ? json_number(r.backward_s.median / r.attention_s.median) : ordered(nullptr);
  j["backward_peak_share"] = peak > 0 ? json_number(r.backward_gflops / peak) : ordered(nullptr);
}

ordered run_json(const BenchRun& r, double peak) {
  ordered j = {{"engine", std::string(name_of(r.engine))},
               {"n", r.n},
               {"m", r.m},
               {"d_model", r.d_model},
               {"heads", r.heads},
               {"kv_heads", r.kv_heads},
               {"mask", r.mask},
               {"dtype", std::string(name_of(r.dtype))},
               {"threads", r.threads},
               {"kernels", r.kernels}};
  if (r.engine == Engine::flash) {
    j["block_q"] = r.tiles.Br;
    j["block_k"] = r.tiles.Bc;
  }
  j["backward"] = r.backward;
  if (r.backward) {
    j["backward_block_q"] = r.backward_tiles.Br;
    j["backward_block_k"] = r.backward_tiles.Bc;
  }
  j["refused"] = r.refused;
  j["estimated_bytes"] = r.estimated_bytes;
  if (r.refused) return j;
  j["repeat"] = r.repeats;
  j["attention_s"] = timing(r.attention_s);
  j["projection_s"] = timing(r.projection_s);
  j["total_s"] = timing(r.total_s);
  j["attention_flops"] = r.attention_flops;
  j["attention_gflops"] = json_number(r.attention_gflops);
  j["attention_peak_share"] = peak > 0 ? json_number(r.attention_gflops / peak) : ordered(nullptr);
  j["projection_flops"] = r.projection_flops;
  j["projection_gflops"] = json_number(r.projection_gflops);
  j["projection_peak_share"] = peak > 0 ? json_number(r.projection_gflops / peak) : ordered(nullptr);
  j["rss_before_bytes"] = r.rss_before_bytes;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["score_bytes"] = r.score_bytes;
  j["max_error"] = json_number(r.max_error);
  if (r.backward) backward_json(j, r, peak);
  return j;
}

}  // namespace

std::string bench_to_json(const BenchResult& result) {
  ordered runs = ordered::array();
  for (const BenchRun& r : result.runs) runs.push_back(run_json(r, result.fma_peak_gflops));
  ordered machine = {{"cpu", result.cpu}, {"cores", result.cores}};
  machine["fma_peak"] = {{"gflops", json_number(result.fma_peak_gflops)},
                         {"threads", result.fma_peak_threads},
                         {"kernels", result.fma_peak_kernels}};
  machine["products"] = result.products;
  const ordered j = {{"format", "attn-trace.bench"},
                     {"version", 1},
                     {"input", result.input},
                     {"seed", result.random ? ordered(result.seed) : ordered(nullptr)},
                     {"repeat", result.repeats},
                     {"threads", result.threads},
                     {"dtype", std::string(name_of(result.dtype))},
                     {"memory_method", std::string(name_of(result.peak_method))},
                     {"sample_rows", result.sample_rows},
                     {"backward", result.backward},
                     {"machine", std::move(machine)},
                     {"runs", std::move(runs)}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

// The copy bandwidth measured on `threads` threads, or 0.
double bandwidth_of(const DecodeBenchResult& r, std::size_t threads) {
  for (const CopyBandwidth& b : r.bandwidth)
    if (b.threads == threads) return b.gbytes_per_s;
  return 0;
}

}  // namespace

std::string decode_bench_to_json(const DecodeBenchResult& result) {
  ordered bandwidth = ordered::array();
  for (const CopyBandwidth& b : result.bandwidth)
    bandwidth.push_back({{"threads", b.threads}, {"bytes", b.bytes}, {"gbytes_per_s", json_number(b.gbytes_per_s)}});
  ordered runs = ordered::array();
  for (const DecodeBenchRow& r : result.rows) {
    ordered j = {{"cache_length", r.length}, {"threads", r.threads}, {"split", r.split}, {"refused", r.refused}};
    if (r.refused) {
      j["refusal"] = r.refusal;
      runs.push_back(std::move(j));
      continue;
    }
    const double bw = bandwidth_of(result, r.threads);
    j["cache_bytes"] = r.cache_bytes;
    j["flops"] = json_number(r.flops);
    j["seconds"] = timing(r.seconds);
    j["gbytes_per_s"] = json_number(r.gbytes_per_s());
    j["bandwidth_share"] = bw > 0 ? json_number(r.gbytes_per_s() / bw) : ordered(nullptr);
    j["gflops"] = json_number(r.seconds.median > 0 ? r.flops / r.seconds.median / 1e9 : 0);
    j["flops_per_byte"] = json_number(r.flops / static_cast<double>(r.cache_bytes));
    runs.push_back(std::move(j));
  }
  const ordered j = {{"format", "attn-trace.bench-decode"},
                     {"version", 1},
                     {"dtype", std::string(name_of(result.dtype))},
                     {"heads", result.h},
                     {"kv_heads", result.g},
                     {"d_k", result.d_k},
                     {"d_v", result.d_v},
                     {"split", result.split},
                     {"machine",
                      {{"cpu", result.cpu},
                       {"kernels", result.kernels},
                       {"fma_peak_gflops", json_number(result.fma_peak_gflops)},
                       {"copy_bandwidth", std::move(bandwidth)}}},
                     {"runs", std::move(runs)}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace attn
