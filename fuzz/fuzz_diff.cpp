// libFuzzer target for `attn-trace diff`: any bytes as a folder of dumped tensors against one of the
// bundled examples, through what the command runs: the dumps read (.npy or JSON by their first bytes),
// named and checked against the problem (formats/dumped_steps.hpp), judged step by step (diff_dump),
// printed and written as JSON. Any exception other than InputError, any sanitizer report, a crash or a
// hang is a bug. diff once crashed on its own dumps of a softcap input (tests/diff/own_dumps_test.py).
//
// The bytes: the example (its index among those below), then dumps, each
//   [name length: 1 byte][name][payload length: 2 bytes, little-endian][payload: .npy or JSON]
// until the bytes run out. scripts/fuzz.sh seeds it with every step of these examples' own traces.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "check/diff.hpp"
#include "formats/dumped_steps.hpp"
#include "formats/json_dump.hpp"
#include "formats/npy.hpp"
#include "io/diff_json.hpp"
#include "io/examples.hpp"
#include "io/load.hpp"
#include "render/pages/diff_page.hpp"

namespace {

// Small examples that between them have every kind of step: RoPE, ALiBi, softcap, sinks, dropout,
// cross-attention, W_o, biases, GQA, a batch with padding, the out_in layout.
constexpr std::string_view examples[] = {
    "the-cat-sat",  "gpt-causal",     "bert-bias",      "gqa",     "mqa",   "cross-attention",  "kv-cache",
    "padded-batch", "sliding-window", "pytorch-layout", "softcap", "sinks", "explainer-dropout"};

// One dump from the bytes at `at`, or false when they have run out.
bool next_dump(std::string_view bytes, std::size_t& at, std::vector<attn::NamedDump>& dumps) {
  if (at >= bytes.size()) return false;
  const std::size_t name_length = static_cast<unsigned char>(bytes[at++]);
  if (at + name_length + 2 > bytes.size()) return false;
  std::string name(bytes.substr(at, name_length));
  at += name_length;
  const std::size_t length = static_cast<unsigned char>(bytes[at]) | (static_cast<unsigned char>(bytes[at + 1]) << 8);
  at += 2;
  const std::string_view payload = bytes.substr(at, length);
  at += payload.size();
  const bool npy = payload.starts_with("\x93NUMPY");
  const std::string source = name + (npy ? ".npy" : ".json");
  attn::DumpTensor tensor = npy ? attn::read_npy(payload, source, false) : attn::read_json_dump(payload, source);
  dumps.push_back({std::move(name), source, std::move(tensor)});
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.empty()) return 0;
  const std::string_view name = examples[static_cast<unsigned char>(bytes[0]) % std::size(examples)];
  const attn::Problem problem = attn::load_problem(std::string(attn::find_example(name)->text), "fuzz.json");
  try {
    std::vector<attn::NamedDump> dumps;
    std::size_t at = 1;
    while (next_dump(bytes, at, dumps)) {}
    if (dumps.empty()) return 0;  // diff refuses a dump of no tensor before this (formats/dump_folder.hpp)
    const attn::Dumped dumped = attn::dumped_steps(problem, std::move(dumps), {}, "fuzz", "fuzz.json");
    attn::check_range(problem, "fuzz.json", dumped.least);
    const attn::DiffResult result = attn::diff_dump(problem, dumped.steps, dumped.least);
    attn::RenderOptions options;
    options.width = 1 + size % 120;
    (void)attn::render_diff(result, "fuzz", options);
    (void)attn::diff_to_json(result, "attn-trace fuzz", "fuzz.json", "fuzz");
  } catch (const attn::InputError&) {
    // refused cleanly: what a bad dump should get
  }
  return 0;
}
