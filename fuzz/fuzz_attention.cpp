// libFuzzer target: any bytes through the loader; whatever it accepts through both engines, compare,
// the fast path (held to compare's rule), and a trace written and read back. Bytes that claim to be a saved trace go
// through the trace reader and, when it accepts them, the terminal printer (what `show` does). Bytes that look like a
// tensor dump go to its reader instead: the .npy magic to read_npy (with and without bfloat16), a small
// little-endian length then '{' to read_safetensors, a leading '[' to read_json_dump (the loader refuses
// a list at once, so it loses nothing). Any exception other than InputError, any sanitizer report, a
// crash or a hang is a bug.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "engine/compare.hpp"
#include "engine/fast.hpp"
#include "engine/flash.hpp"
#include "engine/naive.hpp"
#include "formats/json_dump.hpp"
#include "formats/npy.hpp"
#include "formats/safetensors.hpp"
#include "io/load.hpp"
#include "io/trace_json.hpp"
#include "render/pages/trace/terminal.hpp"
#include "render/draw/text.hpp"
#include "trace/record.hpp"
#include "trace/trace.hpp"

namespace {

// Keeps each input fast: the fuzzer is after wrong code paths, not big matrices.
bool small_enough(const attn::Problem& p) {
  const std::size_t work = p.B * p.h * p.n * p.m * (p.d_k + p.d_v) + p.B * (p.n + p.m) * (p.d_model + p.d_context);
  return work <= 200000;
}

[[noreturn]] void bug(const std::string& what) { throw std::logic_error(what); }

// The terminal trace in a width, a view and a character set chosen by the input: no line may be wider
// than the width, and with ASCII asked for no byte may be anything else.
void check_render(const attn::Trace& trace, std::size_t seed, bool compare_only) {
  attn::RenderOptions options;
  options.max_rows = 1 + seed % 4;
  options.max_cols = seed % 3;
  options.width = 1 + seed % 131;
  options.unicode = seed % 2 == 0;
  options.color = seed % 3 == 0;
  options.truecolor = seed % 5 == 0;
  options.view = static_cast<attn::View>(seed % 3);
  options.compare_only = compare_only;
  const std::string text = attn::render_trace(trace, options);
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line(text.data() + begin, end - begin);
    if (attn::display_width(line) > options.width)
      bug(fmt::format("a line of {} columns in a width of {}", attn::display_width(line), options.width));
    begin = end + 1;
  }
  if (!options.unicode)
    for (const char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) bug("a byte that is not ASCII in ASCII output");
}

// A tensor a reader accepted must hold as many values as its shape says.
void check_dump(const attn::DumpTensor& t) {
  if (t.values.size() != attn::element_count(t.shape)) bug("a dump tensor whose values do not fill its shape");
}

// Whether `text` is a dump for one of the readers; if so, it has been through that reader.
bool read_as_dump(std::string_view text) {
  if (text.starts_with("\x93NUMPY")) {
    for (const bool bfloat16 : {false, true}) {
      try {
        check_dump(attn::read_npy(text, "fuzz.npy", bfloat16));
      } catch (const attn::InputError&) {}
    }
    return true;
  }
  if (text.size() > 8 && text[8] == '{') {
    std::uint64_t n = 0;
    for (std::size_t i = 8; i-- > 0;) n = (n << 8) | static_cast<unsigned char>(text[i]);
    if (n <= text.size() - 8) {
      try {
        for (const auto& [name, t] : attn::read_safetensors(text, "fuzz.safetensors")) check_dump(t);
      } catch (const attn::InputError&) {}
      return true;
    }
  }
  if (const std::size_t first = text.find_first_not_of(" \t\r\n");
      first != std::string_view::npos && text[first] == '[') {
    try {
      check_dump(attn::read_json_dump(text, "fuzz.json"));
    } catch (const attn::InputError&) {}
    return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (read_as_dump(text)) return 0;
  if (text.find("attn-trace.trace") != std::string_view::npos) {
    try {
      const attn::Trace trace = attn::trace_from_json(text, "fuzz.json");
      check_render(trace, size, false);
      check_render(trace, size / 7, true);
    } catch (const attn::InputError&) {}
    return 0;
  }
  std::shared_ptr<const attn::Problem> problem;
  try {
    problem = std::make_shared<const attn::Problem>(attn::load_problem(text, "fuzz.json"));
  } catch (const attn::InputError&) {
    return 0;  // refused cleanly: what bad input should get
  }
  if (!small_enough(*problem)) return 0;

  // Both engines, traced, in float64; the tiles vary with the input so every tiling gets tried.
  attn::RunRequest request;
  request.dtype = attn::DType::float64;
  request.tile_size = {1 + size % 5, 1 + (size / 5) % 7};
  request.backward = size % 2 == 0;  // every other input: the backward passes too, held to the same kind of rule
  const attn::Trace trace = attn::record_compare(problem, request);
  const attn::CompareRecord& record = *trace.compare;
  const attn::TileSize blocks = request.tile_size;

  // Where naive and the reference stay finite (huge inputs can overflow double's range but not the
  // reference's), flash must agree with them by the tolerance rule.
  bool finite = true;
  for (const double x : record.reference.values()) finite = finite && std::isfinite(x);
  for (const double x : record.naive.values()) finite = finite && std::isfinite(x);
  if (finite && !record.pass) {
    const std::string why = fmt::format(
        "flash and naive disagree beyond the tolerance rule: tiles {} x {}, max|flash - ref| = {}, "
        "max|naive - ref| = {}, noise = {}",
        blocks.Br, blocks.Bc, record.flash_vs_ref.max_abs, record.naive_vs_ref.max_abs, record.noise);
    bug(why.c_str());
  }
  // The same for each gradient: where naive's backward overflows double's range too (d_W_q = Xᵀ·dQ with X
  // near 1e154 and dQ near 1e308 sums inf - inf), the gradient is no test of flash's.
  for (const attn::GradientCheck& g : record.gradients) {
    if (!finite || !std::isfinite(g.max_ref) || !std::isfinite(g.naive_vs_ref.max_abs) || g.pass) continue;
    const std::string why =
        fmt::format("flash's {} disagrees beyond the rule: tiles {} x {}, max|flash - ref| = {}, bound = {}",
                    attn::step_info(g.step).name, blocks.Br, blocks.Bc, g.flash_vs_ref.max_abs, g.bound);
    bug(why.c_str());
  }

  check_render(trace, size, false);

  // Every trace must read back.
  const std::string json = attn::trace_to_json(trace, "attn-trace fuzz");
  try {
    const attn::Trace back = attn::trace_from_json(json, "trace.json");
    if (back.steps.size() != trace.steps.size()) bug("a trace read back with a different number of steps");
  } catch (const attn::InputError& e) {
    bug("a trace written by the program was refused when read back");
  }

  // float32 where the values fit.
  try {
    attn::check_range(*problem, "fuzz.json", attn::DType::float32);
  } catch (const attn::InputError&) {
    return 0;
  }
  attn::NullObserver none;
  const attn::AttentionResult<float> naive32 = attn::run_naive<float>(*problem, none);
  (void)attn::run_flash<float>(*problem, none, blocks);

  // The fast path (engine/fast.hpp), both engines, with the fuzzer's tiles and the default ones, on two
  // threads: where the traced naive and the reference stay finite, it must pass compare's rule too.
  for (const attn::TileSize tiles : {blocks, attn::fast_tiles()})
    for (const attn::Engine engine : {attn::Engine::naive, attn::Engine::flash}) {
      const attn::AttentionResult<float> fast = attn::run_fast<float>(*problem, engine, {tiles, 2});
      if (fast.output.shape() != naive32.output.shape()) bug("the fast path's output has another shape");
      const attn::CompareRecord judged = attn::judge_flash<float>(*problem, tiles, naive32, fast);
      bool fits = true;
      for (const double x : judged.reference.values()) fits = fits && std::isfinite(x);
      for (const double x : judged.naive.values()) fits = fits && std::isfinite(x);
      if (fits && !judged.pass) {
        const std::string why = fmt::format(
            "the fast {} disagrees with the traced naive beyond the tolerance rule: tiles {} x {}, max|fast - ref| "
            "= {}, max|naive - ref| = {}, noise = {}",
            attn::name_of(engine), tiles.Br, tiles.Bc, judged.flash_vs_ref.max_abs, judged.naive_vs_ref.max_abs,
            judged.noise);
        bug(why.c_str());
      }
    }
  return 0;
}
