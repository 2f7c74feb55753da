// What docs/input-format.md promises about how values may be written, checked on the loader.

#include <string>

#include <catch2/catch.hpp>

#include "io/load.hpp"

using namespace attn;

namespace {

std::string with_keep(const std::string& keep) {
  return R"({"X": [[1], [2]], "W_q": [[1]], "W_k": [[1]], "W_v": [[1]], "mask": {"type": "padding", "keep": )" + keep +
         "}}";
}

}  // namespace

TEST_CASE("Padding flags are the numbers 0 and 1, written 1 or 1.0, true, 0.5 and \"1\" are refused", "[loader]") {
  const Problem p = load_problem(with_keep("[1, 1.0]"), "keep.json");
  CHECK(p.mask.allows(0, 0, 0));
  CHECK(p.mask.allows(0, 0, 1));
  const Problem q = load_problem(with_keep("[1, 0.0]"), "keep.json");
  CHECK_FALSE(q.mask.allows(0, 0, 1));
  for (const std::string bad : {"[1, true]", "[1, 0.5]", "[1, \"1\"]"}) {
    INFO(bad);
    CHECK_THROWS_AS(load_problem(with_keep(bad), "keep.json"), InputError);
  }
}
