// attn-trace bench: time and memory of both engines, unwatched, as n grows (docs/cli.md, "bench";
// docs/performance.md).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

#include <fmt/format.h>

#include "bench/bench_run.hpp"
#include "bench/decode_bench.hpp"
#include "bench/sweep.hpp"
#include "command.hpp"
#include "io/bench_json.hpp"
#include "io/load.hpp"
#include "io/output.hpp"
#include "io/read.hpp"
#include "kernel/kernels.hpp"
#include "options.hpp"
#include "render/pages/bench.hpp"

namespace attn::cli {

namespace {

struct BenchOptions {
  std::uint64_t n = 1024;
  std::optional<std::uint64_t> m;
  std::uint64_t d_model = 512;
  std::uint64_t heads = 8;
  std::optional<std::uint64_t> kv_heads;
  std::string mask = "none";
  std::string engine = "both";
  std::uint64_t repeat = 3;
  std::uint64_t threads = 0;  // all cores
  std::uint64_t seed = 0;
  std::string sweep;
  bool backward = false;
  bool decode = false;
  std::optional<std::uint64_t> split_kv;
  TraceOptions common;  // FILE, --dtype, --json, --max-memory, --color
};

// The options that make the random input, which a FILE replaces.
constexpr const char* random_only[] = {"--n",        "--m",    "--d-model", "--heads",
                                       "--kv-heads", "--mask", "--seed",    "--sweep"};

// What the user asked, checked: every mistake a UsageError of one line.
BenchRequest request_of(const BenchOptions& o, const CLI::App& cmd) {
  BenchRequest r;
  r.naive = o.engine != "flash";
  r.flash = o.engine != "naive";
  r.dtype = o.common.dtype;
  r.max_memory = memory_limit(o.common).bytes;
  if (o.repeat == 0) throw UsageError("--repeat 0: each run needs at least one repeat");
  r.backward = o.backward;
  if (o.backward && o.engine == "naive")
    throw UsageError("--backward: the fast path's backward is flash's (FlashAttention-2's); leave --engine out");
  if (o.backward && is_half(o.common.dtype))
    throw UsageError(
        fmt::format("--backward: the fast backward runs float32 and float64, not {}", name_of(o.common.dtype)));
  r.repeats = o.repeat;
  r.threads = o.threads == 0 ? kernel::all_cores() : o.threads;
  if (!o.common.file.empty()) {
    for (const char* name : random_only)
      if (cmd.count(name) > 0)
        throw UsageError(fmt::format("{}: FILE gives the input; {} is for the random input, without FILE", name, name));
    return r;
  }
  if (!o.sweep.empty()) {
    if (cmd.count("--n") > 0) throw UsageError("--n: --sweep gives the lengths; leave --n out");
    const SweepSpec sweep = parse_sweep(o.sweep);
    if (!sweep.error.empty()) throw UsageError(fmt::format("--sweep {}: {}", o.sweep, sweep.error));
    r.lengths = sweep.lengths;
    r.sweep = true;
  } else {
    if (o.n == 0) throw UsageError("--n 0: a bench needs at least one query");
    r.lengths = {o.n};
  }
  if (o.m && *o.m == 0) throw UsageError("--m 0: a bench needs at least one key");
  r.m = o.m;
  if (o.d_model == 0) throw UsageError("--d-model 0: the tokens need at least one feature");
  if (o.heads == 0 || o.d_model % o.heads != 0)
    throw UsageError(fmt::format("--heads {}: the heads must split --d-model {} evenly", o.heads, o.d_model));
  const std::uint64_t kv = o.kv_heads.value_or(o.heads);
  if (kv == 0 || o.heads % kv != 0) throw UsageError(fmt::format("--kv-heads {}: must divide --heads {}", kv, o.heads));
  r.shape.d_model = o.d_model;
  r.shape.heads = o.heads;
  r.shape.kv_heads = kv;
  r.shape.mask = o.mask == "causal" ? MaskKind::causal : MaskKind::none;
  r.shape.seed = o.seed;
  return r;
}

// One line on stderr, written over itself, once the bench has run for a second; only on a terminal.
class Progress {
 public:
  Progress() : on_(isatty(STDERR_FILENO) != 0) {}
  ~Progress() {
    if (shown_) write_stderr("\r\x1b[K");
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  ProgressFn callback() {
    if (!on_) return {};
    return [this](const BenchProgress& p) {
      if (p.elapsed_s < 1.0) return;
      shown_ = true;
      const std::string text = fmt::format("bench: {} n = {}, repeat {} of {} ({:.0f} s so far)", name_of(p.engine),
                                           p.n, p.repeat, p.repeats, p.elapsed_s);
      write_stderr(fmt::format("\r{}\x1b[K", text));
    };
  }

 private:
  bool on_;
  bool shown_ = false;
};

// bench --decode: what the user asked, checked, then measured and printed.
int run_decode_bench(const BenchOptions& o, const CLI::App& cmd) {
  if (!o.common.file.empty())
    throw UsageError("FILE: bench --decode times random caches of every length; leave FILE out");
  for (const char* name : {"--m", "--mask", "--engine", "--backward"})
    if (cmd.count(name) > 0)
      throw UsageError(
          fmt::format("{}: bench --decode times one causal row of new queries against a cache; leave {} "
                      "out",
                      name, name));
  if (is_half(o.common.dtype))
    throw UsageError(fmt::format("--dtype {}: the fast decode path runs float32 and float64", name_of(o.common.dtype)));
  const BenchRequest shape = request_of(o, cmd);  // the sizes and lengths, checked as bench checks them
  DecodeBenchRequest r;
  r.lengths =
      cmd.count("--n") > 0 || !o.sweep.empty() ? shape.lengths : std::vector<std::size_t>{1024, 4096, 16384, 65536};
  r.shape = shape.shape;
  r.dtype = o.common.dtype;
  r.repeats = o.repeat;
  r.threads = shape.threads;
  r.split = o.split_kv.value_or(4);
  if (r.split == 0) throw UsageError("--split-kv 0: a cache is cut into at least one chunk");
  r.max_memory = memory_limit(o.common).bytes;
  const DecodeBenchResult result = run_decode_bench(r);
  if (!o.common.json_out.empty()) {
    write_result(o.common.json_out, decode_bench_to_json(result));
    if (o.common.json_out == "-") return 0;
  }
  write_result("", render_decode_bench(result, render_options(o.common)));
  return 0;
}

int run(const BenchOptions& o, const CLI::App& cmd) {
  if (o.decode) return run_decode_bench(o, cmd);
  if (o.split_kv) throw UsageError("--split-kv: it cuts a decode step's cache into chunks; add --decode");
  BenchRequest request = request_of(o, cmd);
  std::unique_ptr<const Problem> file;
  if (!o.common.file.empty()) {
    file = std::make_unique<const Problem>(load_problem_file(o.common.file, memory_limit(o.common)));
    check_range(*file, display_name(o.common.file), o.common.dtype);
    request.file = file.get();
    request.file_name = display_name(o.common.file);
  }
  BenchResult result;
  {
    Progress progress;
    result = run_bench(request, progress.callback());
  }
  if (!o.common.json_out.empty()) {
    write_result(o.common.json_out, bench_to_json(result));
    if (o.common.json_out == "-") return 0;
  }
  write_result("", render_bench(result, render_options(o.common)));
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "time and memory of both engines as n grows, measured on this machine (the O(n²) claim, measured)");
  BenchOptions& o = *options;
  cmd->add_option("FILE", o.common.file, "an input to measure instead of the random one (docs/input-format.md)");
  cmd->add_option("--n", o.n, "queries of the random input")->check(whole_number)->default_str("1024");
  cmd->add_option("--m", o.m, "keys (cross-attention when it differs from n)")->check(whole_number)->default_str("n");
  cmd->add_option("--d-model", o.d_model, "width of the tokens")->check(whole_number)->default_str("512");
  cmd->add_option("--heads", o.heads, "query heads; they split d_model evenly")->check(whole_number)->default_str("8");
  cmd->add_option("--kv-heads", o.kv_heads, "key/value heads, dividing --heads (fewer: GQA, 1: MQA)")
      ->check(whole_number)
      ->default_str("heads");
  cmd->add_option("--mask", o.mask, "none or causal")->check(CLI::IsMember({"none", "causal"}))->default_str("none");
  cmd->add_option("--engine", o.engine, "naive, flash or both")
      ->check(CLI::IsMember({"naive", "flash", "both"}))
      ->default_str("both");
  add_dtype_option(*cmd, o.common.dtype, true, "the arithmetic");
  cmd->add_option("--repeat", o.repeat, "runs of each engine and size; the table shows their median, min and max")
      ->type_name("R")
      ->check(whole_number)
      ->default_str("3");
  cmd->add_option("--threads", o.threads,
                  "threads for float32 and float64 (the fast kernels): query tiles × heads and the projections' rows "
                  "spread over them; 0 is every core (the half types run on one)")
      ->type_name("T")
      ->check(whole_number)
      ->default_str("0");
  cmd->add_option("--seed", o.seed, "where the random input's numbers start (SplitMix64)")
      ->type_name("S")
      ->check(whole_number)
      ->default_str("0");
  cmd->add_option("--sweep", o.sweep,
                  "n=FIRST..LAST: every power of two between, both ends included; prints how time and memory "
                  "grow, with charts")
      ->type_name("n=A..B");
  cmd->add_option("--json", o.common.json_out,
                  "also write the measurements as JSON to this file; - writes the JSON to stdout instead of the text")
      ->type_name("OUT");
  cmd->add_option("--max-memory", o.common.max_memory,
                  "a run estimated to need more than this is not run but listed as refused, with its estimate "
                  "(bytes, or with K, M, G: 512M, 4G)")
      ->default_str("4G");
  cmd->add_flag("--backward", o.backward,
                "flash's forward and FlashAttention-2's backward on the fast path, timed apart: their ratio, GFLOP/s "
                "(the backward's work 2.5 × the forward's) and their share of the FP32 FMA peak, measured first "
                "(float32, float64)");
  cmd->add_flag("--decode", o.decode,
                "one new token's attention against a KV cache of n tokens on the fast path (default n = 1024, 4096, "
                "16384, 65536), on 1 thread and on --threads, unsplit and with --split-kv: time per token, cache GB/s "
                "beside the memory bandwidth of a copy loop (docs/decode.md)");
  cmd->add_option("--split-kv", o.split_kv, "with --decode: the chunks of the split rows (flash-decoding)")
      ->type_name("S")
      ->check(whole_number)
      ->default_str("4");
  add_color_option(*cmd, o.common);
  cmd->footer(
      "Runs the engines as they are, watched by nobody, on seeded random inputs (or FILE). Per engine: the\n"
      "attention's time (the whole call less the projections, timed alone), the projections', GFLOP/s of the\n"
      "work the mask leaves, the process's peak resident memory, the score memory held, and the error against\n"
      "float64 on 8 sampled rows. A progress line goes to stderr, on a terminal only. docs/performance.md.\n"
      "Examples:\n"
      "  attn-trace bench --n 2048\n"
      "  attn-trace bench --sweep n=256..4096 --d-model 256 --heads 4\n"
      "  attn-trace bench --sweep n=512..16384 --engine flash --json bench.json\n"
      "  attn-trace bench --backward --n 4096 --threads 1\n"
      "  attn-trace bench --decode --kv-heads 2 --split-kv 8");
  return [cmd, options] { return cmd->parsed() ? run(*options, *cmd) : -1; };
}

}  // namespace attn::cli
