// The Llama layer of tests/data/models imported and run: it needs the input format's "rope" key, which
// the RoPE work teaches the loader and the engines. Until that is merged, `run` refuses the imported
// file ("unknown key rope") and these tests fail; everything about the Llama import that does not need
// a run (the rope key written, the heads read from the shapes) is in import_test.cpp.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "import_golden.hpp"
#include "run_binary.hpp"

using namespace attn;
using namespace attn::test;

TEST_CASE("The imported Llama layer (GQA 4 over 2, RoPE theta 100, causal) runs within the bound of its golden",
          "[cli][import][rope]") {
  const TempDir dir;
  const std::string file = import_to(dir,
                                     {model_path("llama/model.safetensors"), "--style", "llama", "--prefix",
                                      "model.layers.0.self_attn.", "--x", model_path("x_6x16.npy")},
                                     "llama");
  const Problem problem = load_problem_file(file);
  CHECK(problem.h == 4);
  CHECK(problem.g == 2);
  const auto golden = read_golden("llama");
  for (const std::string dtype : {"float32", "float64"}) {
    const Bounds bounds = error_bounds(problem, golden, unit_roundoff_of(dtype), RopeAngles{100.0});
    // The projections before RoPE are the trace's q, k and v only if the RoPE work reports them there,
    // so the weights and the output are what is judged.
    for (const std::string engine : {"naive", "flash"})
      check_run(run_trace(file, engine, dtype), golden, bounds, fmt::format("llama {} {}", engine, dtype),
                {"weights", "output"});
  }
}
