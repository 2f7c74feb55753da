// attn-trace import through the real binary (docs/models.md): each style's layer of tests/data/models
// imported, run by both engines in float32 and float64, and judged against goldens made without
// attn-trace (tests/models/README.md) within the bound of import_golden.hpp; the numbers of the file read
// back exactly; X drawn the same way every time; and each thing that cannot be imported refused in one
// line with exit 2. The Llama layer, whose input needs RoPE, is tested in import_rope_test.cpp.

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_checks.hpp"
#include "formats/dump_folder.hpp"
#include "formats/npy.hpp"
#include "import_golden.hpp"
#include "io/load.hpp"
#include "run_binary.hpp"
#include "tensor/half.hpp"

using namespace attn;
using namespace attn::test;
namespace fs = std::filesystem;

namespace {

struct Case {
  std::string name;                // the golden's
  std::vector<std::string> args;   // after "import"
  std::vector<std::string> steps;  // what the golden holds, as the trace names it
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"gpt2",
       {model_path("gpt2/model.safetensors"), "--style", "gpt2", "--prefix", "transformer.h.0.attn.", "--x",
        model_path("x_5x8.npy")},
       {"q", "k", "v", "weights", "output"}},
      {"bert",
       {model_path("bert"), "--style", "bert", "--prefix", "bert.encoder.layer.0.attention.", "--x",
        model_path("x_2x4x8.npy")},
       {"q", "k", "v", "weights", "output"}},
      {"torch_mha",
       {model_path("torch_mha/model.safetensors"), "--style", "torch-mha", "--prefix", "", "--heads", "2", "--x",
        model_path("x_5x8.npy")},
       {"q", "k", "v", "weights", "output"}},
      {"torch_mha_f16",
       {model_path("torch_mha_f16/model.safetensors"), "--style", "torch-mha", "--prefix", "", "--heads", "2", "--x",
        model_path("x_5x8.npy")},
       {"q", "k", "v", "weights", "output"}},
  };
  return all;
}

}  // namespace

TEST_CASE("Each imported layer runs on both engines in float32 and float64 within the derived bound of its golden",
          "[cli][import]") {
  const TempDir dir;
  for (const Case& c : cases()) {
    const std::string file = import_to(dir, c.args, c.name);
    const Problem problem = load_problem_file(file);
    const auto golden = read_golden(c.name);
    for (const std::string dtype : {"float32", "float64"}) {
      const Bounds bounds = error_bounds(problem, golden, unit_roundoff_of(dtype));
      for (const std::string engine : {"naive", "flash"})
        check_run(run_trace(file, engine, dtype), golden, bounds, fmt::format("{} {} {}", c.name, engine, dtype),
                  c.steps);
    }
  }
}

TEST_CASE("A wrong head count moves the output past the bound, so the bound can fail", "[cli][import]") {
  const TempDir dir;
  const Case& c = cases().front();  // gpt2, 2 heads
  const auto golden = read_golden(c.name);
  std::vector<std::string> one_head = c.args;
  one_head.insert(one_head.end(), {"--heads", "1"});
  const std::string file = import_to(dir, one_head, "one_head");
  const Problem problem = load_problem_file(file);
  const Bounds bounds = error_bounds(load_problem_file(import_to(dir, c.args, "right")), golden, std::ldexp(1.0, -24));
  const Trace trace = run_trace(file, "naive", "float32");
  std::size_t beyond = 0;
  for (const StepRecord& s : trace.steps) {
    if (step_info(s.step).name != "output") continue;
    for (std::size_t i = 0; i < s.value.values().size(); ++i)
      beyond += std::abs(s.value.values()[i] - golden.at("output").values[i]) > bounds.of.at("output")[i];
  }
  CHECK(problem.h == 1);
  CHECK(beyond > 0);
}

TEST_CASE("Imported weights read back bit for bit: float32 and float16 values are exact in the written text",
          "[cli][import]") {
  const TempDir dir;
  const MemoryLimit no_limit;
  {
    const Problem p = load_problem_file(import_to(dir, cases()[2].args, "mha"));
    const auto tensors = read_dumps(model_path("torch_mha/model.safetensors"), false, no_limit);
    const auto in_proj_at =
        std::find_if(tensors.begin(), tensors.end(), [](const NamedDump& t) { return t.name == "in_proj_weight"; });
    REQUIRE(in_proj_at != tensors.end());
    const DumpTensor& in_proj = in_proj_at->tensor;
    // W_q is rows 0..d of in_proj_weight (out × in), so W_q[a][c] (in × out) is in_proj[c][a].
    const std::size_t d = p.d_model;
    for (std::size_t a = 0; a < d; ++a)
      for (std::size_t c = 0; c < d; ++c) CHECK(p.W_q.values()[a * d + c] == in_proj.values[c * d + a]);
  }
  {
    const Problem p = load_problem_file(import_to(dir, cases()[3].args, "mha16"));
    const auto tensors = read_dumps(model_path("torch_mha_f16/model.safetensors"), false, no_limit);
    for (const NamedDump& t : tensors) {
      CHECK(t.tensor.dtype == DumpDType::float16);
      if (t.name != "out_proj.weight") continue;
      // W_o (in × out) is out_proj.weight transposed; every value is a float16 value, widened.
      const std::size_t d = p.d_model;
      for (std::size_t a = 0; a < d; ++a)
        for (std::size_t c = 0; c < d; ++c) {
          const double w = p.W_o.values()[a * d + c];
          CHECK(w == t.tensor.values[c * d + a]);
          CHECK(static_cast<double>(float16_to_float(double_to_float16(w))) == w);
        }
    }
  }
  {
    const Problem p = load_problem_file(import_to(dir, cases()[0].args, "gpt2"));
    const DumpTensor x = read_npy(read_file(model_path("x_5x8.npy")), "x_5x8.npy", false);
    REQUIRE(x.values.size() == p.X.values().size());
    for (std::size_t i = 0; i < x.values.size(); ++i) CHECK(p.X.values()[i] == x.values[i]);
  }
}

TEST_CASE("import writes the style's mask, heads, layout and a description saying where the layer came from",
          "[cli][import]") {
  const TempDir dir;
  const std::string gpt2 = read_file(import_to(dir, cases()[0].args, "gpt2"));
  CHECK(contains(gpt2, "\"mask\": \"causal\""));
  CHECK(contains(gpt2, "\"layout\": \"in_out\""));
  CHECK(contains(gpt2, "\"n_heads\": 2"));  // from config.json's n_head
  CHECK(
      contains_in_order(gpt2, "the gpt2 attention layer transformer.h.0.attn. of ...gpt2/model.safetensors (float32)"));
  CHECK(contains(gpt2, "\"tokens\": [\"t0\", \"t1\", \"t2\", \"t3\", \"t4\"]"));

  const std::string bert = read_file(import_to(dir, cases()[1].args, "bert"));
  CHECK(contains(bert, "\"mask\": \"none\""));
  CHECK(contains(bert, "\"layout\": \"out_in\""));
  CHECK(contains_in_order(bert, "X from ...x_2x4x8.npy"));
  CHECK_FALSE(contains(bert, "\"rope\""));

  std::vector<std::string> args = cases()[2].args;
  args.insert(args.end(), {"--mask", "sliding_window:2", "--tokens", "a rose is a rose"});
  const Problem p = load_problem_file(import_to(dir, args, "window"));
  CHECK(p.mask.kind == MaskKind::sliding_window);
  CHECK(p.tokens.at(0) == std::vector<std::string>{"a", "rose", "is", "a", "rose"});
}

TEST_CASE("Without --x, import draws X from --seed: the same text every time, another for another seed",
          "[cli][import]") {
  const std::vector<std::string> base = {
      "import", model_path("torch_mha/model.safetensors"), "--style", "torch-mha", "--prefix", "", "--heads", "2"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run_binary(args);
    check_success(r);
    return r.out;
  };
  const std::string a = with({}), b = with({"--seed", "0"}), c = with({"--seed", "1"});
  CHECK(a == b);
  CHECK(a != c);
  const Problem p = load_problem(a, "import");
  CHECK(p.n == 8);
  CHECK(p.d_model == 8);
  // Standard normal numbers to two places, from scaling's NormalSampler (Box–Muller) seeded 0.
  CHECK(contains(a, "X: 8 tokens of standard normal numbers, seed 0"));
  for (const double x : p.X.values()) CHECK(std::abs(x * 100 - std::round(x * 100)) < 1e-9);
  CHECK(load_problem(with({"--tokens", "The cat sat"}), "import").n == 3);
  CHECK(load_problem(with({"--n", "2"}), "import").n == 2);

  // And run takes it straight from a pipe.
  const RunResult traced = run_binary({"run", "-", "--color", "never"}, RunOptions().input(a));
  check_success(traced);
}

TEST_CASE("import refuses what it cannot import: one line naming the tensor, the shape or the option, exit 2",
          "[cli][import]") {
  const TempDir dir;
  const std::string gpt2 = model_path("gpt2/model.safetensors"), mha = model_path("torch_mha/model.safetensors");
  // A layer with a malformed file, a wrong shape, and heads from a config that do not divide.
  const std::string broken = dir / "broken.safetensors";
  {
    std::ofstream out(broken, std::ios::binary);
    out << std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}", 15);
  }
  fs::create_directory(dir / "shapes");
  fs::copy_file(model_path("bert/bert.encoder.layer.0.attention.self.query.weight.npy"),
                dir / "shapes/self.query.weight.npy");
  fs::copy_file(model_path("bert/bert.encoder.layer.0.attention.self.key.bias.npy"),
                dir / "shapes/self.key.weight.npy");
  fs::copy_file(model_path("bert/bert.encoder.layer.0.attention.self.value.weight.npy"),
                dir / "shapes/self.value.weight.npy");
  fs::copy_file(model_path("bert/bert.encoder.layer.0.attention.output.dense.weight.npy"),
                dir / "shapes/output.dense.weight.npy");
  {
    std::ofstream config(dir / "shapes/config.json");
    config << R"({"num_attention_heads": 2})";
  }

  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{gpt2, "--style", "gpt2", "--prefix", "transformer.h.0."},
       "model.safetensors: no tensor transformer.h.0.c_attn.weight for --style gpt2 (the nearest is "
       "transformer.h.0.attn.c_attn.weight: --prefix \"transformer.h.0.attn.\"?)"},
      {{gpt2, "--style", "llama", "--prefix", "transformer.h.0.attn."},
       "no tensor transformer.h.0.attn.q_proj.weight for --style llama (the nearest is"},
      {{mha, "--style", "gpt2", "--prefix", ""}, "no tensor c_attn.weight"},
      {{dir / "shapes", "--style", "bert", "--prefix", ""},
       "shapes: self.key.weight has shape (8,), but --style bert stores it as (out, in)"},
      {{gpt2, "--style", "gpt2", "--prefix", "transformer.h.0.attn.", "--heads", "3"},
       "--heads 3 does not divide the queries' width 8 (transformer.h.0.attn.c_attn.weight (columns 0 to d))"},
      {{gpt2, "--style", "gpt2", "--prefix", "transformer.h.0.attn.", "--kv-heads", "1"},
       "--kv-heads 1 does not fit transformer.h.0.attn.c_attn.weight (columns d to 2d): it holds 2 key heads of d_k 4"},
      {{mha, "--style", "torch-mha", "--prefix", ""},
       "nn.MultiheadAttention's state_dict keeps no head count: give --heads H"},
      {{mha, "--style", "gtp2", "--prefix", ""},
       "--style gtp2: unknown style (did you mean gpt2?); expected one of gpt2, llama, bert, torch-mha"},
      {{broken, "--style", "gpt2", "--prefix", ""}, "broken.safetensors: "},
      {{mha, "--style", "torch-mha", "--prefix", "", "--heads", "2", "--x", model_path("x_6x16.npy")},
       "x_6x16.npy: X has shape (6, 16), but the layer takes (n, d_model) or (batch, n, d_model) with d_model = 8"},
      {{mha, "--style", "torch-mha", "--prefix", "", "--heads", "2", "--tokens", "a b", "--n", "3"},
       "--tokens gives 2 labels, but X has 3 tokens"},
      {{mha, "--style", "torch-mha", "--prefix", "", "--heads", "2", "--rope-theta", "100"},
       "--rope-theta: --style torch-mha has no RoPE; only llama and gemma2 do"},
      {{mha, "--style", "torch-mha", "--prefix", "", "--heads", "2", "--mask", "padding"},
       "--mask padding: import writes none, causal or sliding_window:W"},
      {{mha, "--style", "torch-mha", "--prefix", "", "--heads", "0"}, "--heads: expected at least 1, found 0"},
      {{mha, "--style", "torch-mha", "--prefix", "", "--heads", "2", "--x", model_path("x_5x8.npy"), "--seed", "1"},
       "--x excludes --seed"},
      {{mha, "--style", "torch-mha"}, "--prefix is required"},
      {{model_path("x_5x8.npy"), "--style", "torch-mha", "--prefix", ""},
       "WEIGHTS must be a folder of <tensor>.npy files, or a .safetensors file"},
  };
  for (const auto& [args, fragment] : bad) {
    std::vector<std::string> command = {"import", "-o", dir / "out.json"};
    command.insert(command.end(), args.begin(), args.end());
    const RunResult r = run_binary(command);
    check_usage_error(r, {fragment});
    CHECK_FALSE(fs::exists(dir / "out.json"));
  }
}

TEST_CASE("import --help shows its options and examples", "[cli][import]") {
  const RunResult r = run_binary({"import", "--help"});
  check_success(r);
  for (const std::string option :
       {"WEIGHTS", "--style", "--prefix", "--x", "--seed", "--n", "--heads", "--kv-heads", "--tokens", "--mask",
        "--rope-theta", "-o,--output", "--max-memory", "attn-trace import gpt2-layer0.safetensors --style gpt2"})
    CHECK(contains(r.out, option));
}

TEST_CASE("The Llama layer imports with its RoPE, and its key/value heads read from the shapes", "[cli][import]") {
  const TempDir dir;
  const std::vector<std::string> args = {model_path("llama/model.safetensors"),
                                         "--style",
                                         "llama",
                                         "--prefix",
                                         "model.layers.0.self_attn.",
                                         "--x",
                                         model_path("x_6x16.npy")};
  const std::string text = read_file(import_to(dir, args, "llama"));
  CHECK(contains(text, "\"rope\": {\"theta\": 100, \"style\": \"half\"}"));  // config.json's rope_theta
  CHECK(contains(text, "\"n_heads\": 4,\n  \"n_kv_heads\": 2,"));
  CHECK(contains(text, "\"mask\": \"causal\""));
  CHECK(contains(text, "\"layout\": \"out_in\""));
  CHECK(contains(text, "4 heads of d_k 4, sharing 2 key/value heads, causal mask, RoPE (rotate-half) with theta 100"));

  std::vector<std::string> theta = args;
  theta.insert(theta.end(), {"--rope-theta", "500000"});
  CHECK(contains(read_file(import_to(dir, theta, "theta")), "\"rope\": {\"theta\": 500000, \"style\": \"half\"}"));

  // Without config.json: the heads from --heads, the key/value heads from k_proj's rows, theta 10000.
  fs::create_directory(dir / "bare");
  fs::copy_file(model_path("llama/model.safetensors"), dir / "bare/model.safetensors");
  const std::string bare = read_file(import_to(
      dir,
      {dir / "bare/model.safetensors", "--style", "llama", "--prefix", "model.layers.0.self_attn.", "--heads", "4"},
      "bare"));
  CHECK(contains(bare, "\"n_kv_heads\": 2,"));
  CHECK(contains(bare, "\"rope\": {\"theta\": 10000, \"style\": \"half\"}"));
  const RunResult wrong = run_binary({"import", dir / "bare/model.safetensors", "--style", "llama", "--prefix",
                                      "model.layers.0.self_attn.", "--heads", "4", "--kv-heads", "4"});
  check_usage_error(
      wrong, {"--kv-heads 4 does not fit model.layers.0.self_attn.k_proj.weight: it holds 2 key heads of d_k 4"});
  const RunResult none = run_binary(
      {"import", dir / "bare/model.safetensors", "--style", "llama", "--prefix", "model.layers.0.self_attn."});
  check_usage_error(none, {"how many heads? give --heads H (there is no config.json beside WEIGHTS)"});
}
