// The loader: docs/input-format.md's defaults and conversions on valid texts, and on invalid ones the JSON
// Pointer (RFC 6901) of the value that is wrong. Expected values are read off the texts by hand.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "io/load.hpp"
#include "support.hpp"

using namespace attn;
using attn::test::check_close;

namespace {

// A valid document (X 3 × 2, identity weights) with some keys replaced, added or (value "") removed.
std::string doc(std::initializer_list<std::pair<std::string, std::string>> changes = {}) {
  std::vector<std::pair<std::string, std::string>> fields = {{"X", "[[1, 0], [0, 1], [1, 1]]"},
                                                             {"W_q", "[[1, 0], [0, 1]]"},
                                                             {"W_k", "[[1, 0], [0, 1]]"},
                                                             {"W_v", "[[1, 0], [0, 1]]"}};
  for (const auto& change : changes) {
    const auto& [key, value] = change;
    auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == change.first; });
    if (it != fields.end() && value.empty()) fields.erase(it);
    else if (it != fields.end()) it->second = value;
    else fields.emplace_back(key, value);
  }
  std::vector<std::string> parts;
  for (const auto& [key, value] : fields) parts.push_back(fmt::format("\"{}\": {}", key, value));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

// The JSON Pointer of the InputError that loading `text` raises, or a note that it raised none.
std::string error_pointer(const std::string& text) {
  try {
    (void)load_problem(text, "test.json");
  } catch (const InputError& e) {
    CHECK(e.file() == "test.json");
    CHECK_FALSE(e.message().empty());
    return e.pointer();
  }
  return "<no error>";
}

std::string error_message(const std::string& text) {
  try {
    (void)load_problem(text, "test.json");
  } catch (const InputError& e) {
    return e.message();
  }
  return "<no error>";
}

}  // namespace

// ------------------------------------------------------------------------------------------ valid input

TEST_CASE("The loader fills in the defaults of tokens t0.., one head, n_kv_heads = n_heads, scale 1/sqrt(d_k)",
          "[loader]") {
  const Problem p = load_problem(doc(), "test.json");
  CHECK_FALSE(p.batched);
  CHECK_FALSE(p.cross);
  CHECK(p.B == 1);
  CHECK(p.n == 3);
  CHECK(p.m == 3);
  CHECK(p.d_model == 2);
  CHECK(p.d_context == 2);
  CHECK(p.h == 1);
  CHECK(p.g == 1);
  CHECK(p.d_k == 2);
  CHECK(p.d_v == 2);
  CHECK(p.d_out == 2);  // no W_o: the concatenated heads, h·d_v
  CHECK_FALSE(p.has_output_projection());
  CHECK(p.b_q.empty());
  CHECK(p.b_o.empty());
  CHECK(p.tokens == std::vector<std::vector<std::string>>{{"t0", "t1", "t2"}});
  CHECK(p.scale == Approx(1 / std::sqrt(2.0)).epsilon(1e-15));
  CHECK_FALSE(p.scale_given);
  CHECK(p.mask.kind == MaskKind::none);
  CHECK(p.layout == Layout::in_out);
  CHECK(p.X.shape() == Shape{1, 3, 2});
  CHECK(p.C == p.X);  // self-attention: keys and values come from X
  check_close("X", p.X, {1, 3, 2}, {1, 0, 0, 1, 1, 1}, 0);
}

TEST_CASE("n_kv_heads defaults to n_heads and d_k is W_q's width over n_heads", "[loader]") {
  // W_q 2 × 8 with 2 heads: d_k = 4, scale 1/sqrt(4) = 0.5; W_k and W_v 2 × 8: g = 2, d_v = 4
  const std::string w = "[[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0]]";
  const Problem p = load_problem(doc({{"W_q", w}, {"W_k", w}, {"W_v", w}, {"n_heads", "2"}}), "test.json");
  CHECK(p.h == 2);
  CHECK(p.g == 2);
  CHECK(p.d_k == 4);
  CHECK(p.d_v == 4);
  CHECK(p.scale == 0.5);
}

TEST_CASE("With GQA, n_kv_heads sets the key/value heads and d_v may differ from d_k", "[loader]") {
  // h = 4, g = 2; W_q 2 × 4: d_k = 1; W_k 2 × (g·d_k) = 2 × 2; W_v 2 × 6: d_v = 3; W_o (h·d_v) × 1 = 12 × 1
  const std::string W_o = "[[1], [1], [1], [1], [1], [1], [1], [1], [1], [1], [1], [1]]";
  const Problem p = load_problem(doc({{"W_q", "[[1, 0, 0, 0], [0, 1, 0, 0]]"},
                                      {"W_v", "[[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]]"},
                                      {"W_o", W_o},
                                      {"b_o", "[3]"},
                                      {"n_heads", "4"},
                                      {"n_kv_heads", "2"}}),
                                 "test.json");
  CHECK(p.h == 4);
  CHECK(p.g == 2);
  CHECK(p.d_k == 1);
  CHECK(p.d_v == 3);
  CHECK(p.d_out == 1);
  CHECK(p.has_output_projection());
  CHECK(p.b_o == std::vector<double>{3});
}

TEST_CASE("A given scale, description, tokens and biases are kept as written", "[loader]") {
  const Problem p = load_problem(doc({{"scale", "0.25"},
                                      {"description", "\"hello\""},
                                      {"tokens", R"(["a", "b", "c"])"},
                                      {"b_q", "[1, 2]"},
                                      {"b_k", "[3, 4]"},
                                      {"b_v", "[5, 6]"}}),
                                 "test.json");
  CHECK(p.scale == 0.25);
  CHECK(p.scale_given);
  CHECK(p.description == "hello");
  CHECK(p.tokens == std::vector<std::vector<std::string>>{{"a", "b", "c"}});
  CHECK(p.b_q == std::vector<double>{1, 2});
  CHECK(p.b_k == std::vector<double>{3, 4});
  CHECK(p.b_v == std::vector<double>{5, 6});
}

TEST_CASE("A 3-D X is a batch of B items of n rows, with per-item, shared or default tokens", "[loader]") {
  const std::string X = "[[[1, 0], [0, 1]], [[2, 0], [0, 2]], [[3, 0], [0, 3]]]";
  SECTION("default tokens") {
    const Problem p = load_problem(doc({{"X", X}}), "test.json");
    CHECK(p.batched);
    CHECK(p.B == 3);
    CHECK(p.n == 2);
    CHECK(p.d_model == 2);
    CHECK(p.X.shape() == Shape{3, 2, 2});
    CHECK(p.X(2, 1, 1) == 3);
    CHECK(p.tokens == std::vector<std::vector<std::string>>(3, {"t0", "t1"}));
  }
  SECTION("a list of tokens per item") {
    const Problem p = load_problem(doc({{"X", X}, {"tokens", R"([["a", "b"], ["c", "d"], ["e", "f"]])"}}), "t.json");
    CHECK(p.tokens == std::vector<std::vector<std::string>>{{"a", "b"}, {"c", "d"}, {"e", "f"}});
  }
  SECTION("one list shared by all items") {
    const Problem p = load_problem(doc({{"X", X}, {"tokens", R"(["a", "b"])"}}), "t.json");
    CHECK(p.tokens == std::vector<std::vector<std::string>>(3, {"a", "b"}));
  }
  SECTION("a 1 × n × d X is a batch of one") {
    const Problem p = load_problem(doc({{"X", "[[[1, 0], [0, 1]]]"}}), "t.json");
    CHECK(p.batched);
    CHECK(p.B == 1);
    CHECK(p.n == 2);
  }
}

TEST_CASE("Layout out_in transposes every weight into in × out", "[loader]") {
  // X 2 × 3 (d_model 3); W_q stored out × in = 2 × 3, W_o stored d_model_out × (h·d_v) = 1 × 2
  const Problem p = load_problem(doc({{"X", "[[1, 2, 3], [4, 5, 6]]"},
                                      {"layout", "\"out_in\""},
                                      {"W_q", "[[1, 2, 3], [4, 5, 6]]"},
                                      {"W_k", "[[1, 0, 0], [0, 1, 0]]"},
                                      {"W_v", "[[0, 0, 1], [7, 8, 9]]"},
                                      {"W_o", "[[10, 20]]"}}),
                                 "test.json");
  CHECK(p.layout == Layout::out_in);
  // W_q (in_out) = transpose: [[1, 4], [2, 5], [3, 6]]
  check_close("W_q", p.W_q, {3, 2}, {1, 4, 2, 5, 3, 6}, 0);
  check_close("W_k", p.W_k, {3, 2}, {1, 0, 0, 1, 0, 0}, 0);
  check_close("W_v", p.W_v, {3, 2}, {0, 7, 0, 8, 1, 9}, 0);
  check_close("W_o", p.W_o, {2, 1}, {10, 20}, 0);
  CHECK(p.d_out == 1);
  CHECK(p.d_k == 2);  // W_q stores 2 outputs, one head
  CHECK(p.d_v == 2);
}

TEST_CASE("Layout out_in transposes a W_o of 2 × 3, where a reshape would give other numbers", "[loader]") {
  // out_in W_v stored 3 × 2 (three value features of d_model 2), so h·d_v = 3; W_o stored d_out × (h·d_v) = 2 × 3.
  // In in_out, W_o is its transpose, 3 × 2:  [[1, 4], [2, 5], [3, 6]]
  // (the same six numbers reshaped to 3 × 2 would be [[1, 2], [3, 4], [5, 6]])
  const Problem p = load_problem(doc({{"layout", "\"out_in\""},
                                      {"W_v", "[[1, 0], [0, 1], [1, 1]]"},
                                      {"W_o", "[[1, 2, 3], [4, 5, 6]]"},
                                      {"b_o", "[7, 8]"}}),
                                 "test.json");
  check_close("W_o", p.W_o, {3, 2}, {1, 4, 2, 5, 3, 6}, 0);
  check_close("W_v", p.W_v, {2, 3}, {1, 0, 1, 0, 1, 1}, 0);
  CHECK(p.d_v == 3);
  CHECK(p.d_out == 2);
  CHECK(p.b_o == std::vector<double>{7, 8});  // one per row of the stored W_o
}

TEST_CASE("A context makes it cross-attention, with m and the keys' width from context X", "[loader]") {
  const Problem p = load_problem(
      doc({{"context", R"({"X": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], "tokens": ["w", "x", "y", "z"]})"},
           {"W_k", "[[1, 0], [0, 1], [1, 1]]"},
           {"W_v", "[[1, 0], [0, 1], [1, 1]]"}}),
      "test.json");
  CHECK(p.cross);
  CHECK(p.n == 3);
  CHECK(p.m == 4);
  CHECK(p.d_context == 3);
  CHECK(p.C.shape() == Shape{1, 4, 3});
  CHECK(p.context_tokens == std::vector<std::vector<std::string>>{{"w", "x", "y", "z"}});
  CHECK(p.mask.n == 3);
  CHECK(p.mask.m == 4);
}

TEST_CASE("Masks load into their resolved form", "[loader][mask]") {
  SECTION("\"causal\" as a string") {
    const Problem p = load_problem(doc({{"mask", "\"causal\""}}), "t.json");
    CHECK(p.mask.kind == MaskKind::causal);
    CHECK(p.mask.align == Align::top_left);
    CHECK(p.mask.n == 3);
    CHECK(p.mask.m == 3);
  }
  SECTION("a causal object with bottom_right") {
    const Problem p = load_problem(doc({{"mask", R"({"type": "causal", "align": "bottom_right"})"}}), "t.json");
    CHECK(p.mask.kind == MaskKind::causal);
    CHECK(p.mask.align == Align::bottom_right);
  }
  SECTION("a sliding window") {
    const Problem p = load_problem(doc({{"mask", R"({"type": "sliding_window", "window": 2})"}}), "t.json");
    CHECK(p.mask.kind == MaskKind::sliding_window);
    CHECK(p.mask.window == 2);
    // query 2 sees keys 1, 2 (2 - 2 < j <= 2)
    CHECK_FALSE(p.mask.allows(0, 2, 0));
    CHECK(p.mask.allows(0, 2, 1));
    CHECK(p.mask.allows(0, 2, 2));
  }
  SECTION("padding") {
    const Problem p = load_problem(doc({{"mask", R"({"type": "padding", "keep": [1, 1, 0]})"}}), "t.json");
    CHECK(p.mask.kind == MaskKind::padding);
    CHECK(p.mask.allows(0, 0, 1));
    CHECK_FALSE(p.mask.allows(0, 0, 2));
  }
  SECTION("padding per batch item") {
    const Problem p = load_problem(doc({{"X", "[[[1, 0], [0, 1]], [[2, 0], [0, 2]]]"},
                                        {"mask", R"({"type": "padding", "keep": [[1, 0], [0, 1]]})"}}),
                                   "t.json");
    CHECK(p.mask.allows(0, 0, 0));
    CHECK_FALSE(p.mask.allows(0, 0, 1));
    CHECK_FALSE(p.mask.allows(1, 0, 0));
    CHECK(p.mask.allows(1, 0, 1));
  }
  SECTION("custom") {
    const Problem p = load_problem(
        doc({{"mask",
              R"({"type": "custom", "allow": [[true, false, false], [false, false, false], [true, true, true]]})"}}),
        "t.json");
    CHECK(p.mask.kind == MaskKind::custom);
    CHECK(p.mask.allows(0, 0, 0));
    CHECK_FALSE(p.mask.allows(0, 0, 1));
    CHECK_FALSE(p.mask.allows(0, 1, 0));
    CHECK(p.mask.allows(0, 2, 2));
  }
}

TEST_CASE("Whole numbers may be written 2.0", "[loader]") {
  const std::string w = "[[1, 0, 0, 0], [0, 1, 0, 0]]";
  const Problem p = load_problem(doc({{"W_q", w}, {"W_k", w}, {"W_v", w}, {"n_heads", "2.0"}}), "t.json");
  CHECK(p.h == 2);
}

// ---------------------------------------------------------------------------------------- invalid input

TEST_CASE("A W_q whose rows do not match X's width is refused at /W_q", "[loader]") {
  // X is 3 × 2 (d_model 2); an in_out W_q must have 2 rows, this one has 3
  CHECK(error_pointer(doc({{"W_q", "[[1, 0], [0, 1], [1, 1]]"}})) == "/W_q");
  CHECK_THAT(error_message(doc({{"W_q", "[[1, 0], [0, 1], [1, 1]]"}})),
             Catch::Contains("expected 2 rows") && Catch::Contains("found 3"));
  CHECK(error_pointer(doc({{"W_q", "[[1, 0]]"}})) == "/W_q");  // too few rows as well
}

TEST_CASE("A W_k whose rows do not match X's width is refused at /W_k", "[loader]") {
  CHECK(error_pointer(doc({{"W_k", "[[1, 0], [0, 1], [1, 1]]"}})) == "/W_k");
}

TEST_CASE("A W_k whose width is not n_kv_heads · d_k is refused at /W_k", "[loader]") {
  CHECK(error_pointer(doc({{"W_k", "[[1, 0, 0], [0, 1, 0]]"}})) == "/W_k");
}

TEST_CASE("A row of X of another length is refused at /X/1", "[loader]") {
  CHECK(error_pointer(doc({{"X", "[[1, 0], [0], [1, 1]]"}})) == "/X/1");
}

TEST_CASE("A value that is not a number is refused at its own pointer", "[loader]") {
  CHECK(error_pointer(doc({{"X", R"([[1, 0], [0, "one"], [1, 1]])"}})) == "/X/1/1");
  CHECK(error_pointer(doc({{"W_v", "[[1, 0], [null, 1]]"}})) == "/W_v/1/0");
  CHECK(error_pointer(doc({{"b_q", "[1, true]"}})) == "/b_q/1");
}

TEST_CASE("A number too large to be finite is refused with an InputError, not a JSON library exception", "[loader]") {
  // 1e999 is valid JSON grammar but not a finite double ("Every number must be finite"). The refusal
  // must be the one error type main turns into a one-line input error; its pointer is the number's
  // ("/X/1/1") or, if the parser cannot tell, the whole document ("").
  const std::string text = doc({{"X", "[[1, 0], [0, 1e999], [1, 1]]"}});
  REQUIRE_THROWS_AS(load_problem(text, "test.json"), InputError);
  const std::string pointer = error_pointer(text);
  CHECK((pointer == "/X/1/1" || pointer.empty()));
}

TEST_CASE("A sliding window of 0, or none at all, is refused at /mask/window", "[loader][mask]") {
  CHECK(error_pointer(doc({{"mask", R"({"type": "sliding_window", "window": 0})"}})) == "/mask/window");
  CHECK(error_pointer(doc({{"mask", R"({"type": "sliding_window", "window": 1.5})"}})) == "/mask/window");
  CHECK(error_pointer(doc({{"mask", R"({"type": "sliding_window"})"}})) == "/mask/window");
}

TEST_CASE("n_heads of 1.5 or 0, or one that does not divide W_q's width, is refused", "[loader]") {
  CHECK(error_pointer(doc({{"n_heads", "1.5"}})) == "/n_heads");
  CHECK(error_pointer(doc({{"n_heads", "0"}})) == "/n_heads");
  CHECK(error_pointer(doc({{"n_heads", "\"2\""}})) == "/n_heads");
  // W_q has 2 columns; 3 heads do not split them
  CHECK(error_pointer(doc({{"n_heads", "3"}})) == "/W_q");
}

TEST_CASE("n_heads that is not a multiple of n_kv_heads is refused at /n_kv_heads", "[loader]") {
  CHECK(error_pointer(doc({{"n_heads", "2"}, {"n_kv_heads", "3"}})) == "/n_kv_heads");
}

TEST_CASE("A missing required key is refused at its pointer", "[loader]") {
  CHECK(error_pointer(doc({{"W_v", ""}})) == "/W_v");
  CHECK(error_pointer(doc({{"X", ""}})) == "/X");
}

TEST_CASE("An unknown key is refused at its pointer, with the nearest valid key", "[loader]") {
  CHECK(error_pointer(doc({{"W_qq", "[[1]]"}})) == "/W_qq");
  CHECK_THAT(error_message(doc({{"W_qq", "[[1]]"}})), Catch::Contains("\"W_q\""));
  // RFC 6901 escapes "/" as "~1" and "~" as "~0"
  CHECK(error_pointer(doc({{"a/b~c", "1"}})) == "/a~1b~0c");
}

TEST_CASE("A bias of the wrong length, or b_o without W_o, is refused at its key", "[loader]") {
  CHECK(error_pointer(doc({{"b_q", "[1, 2, 3]"}})) == "/b_q");
  CHECK(error_pointer(doc({{"b_o", "[1, 2]"}})) == "/b_o");
}

TEST_CASE("Bad tokens, layout and mask values are refused at their pointers", "[loader][mask]") {
  CHECK(error_pointer(doc({{"tokens", R"(["a", "b"])"}})) == "/tokens");
  CHECK(error_pointer(doc({{"tokens", R"(["a", 2, "c"])"}})) == "/tokens/1");
  CHECK(error_pointer(doc({{"layout", "\"row_major\""}})) == "/layout");
  CHECK(error_pointer(doc({{"mask", "\"casual\""}})) == "/mask");
  CHECK(error_pointer(doc({{"mask", R"({"type": "causal", "align": "middle"})"}})) == "/mask/align");
  CHECK(error_pointer(doc({{"mask", R"({"type": "causal", "window": 2})"}})) == "/mask/window");
  CHECK(error_pointer(doc({{"mask", R"({"type": "padding", "keep": [1, 0]})"}})) == "/mask/keep");
  CHECK(error_pointer(doc({{"mask", R"({"type": "padding", "keep": [1, 2, 0]})"}})) == "/mask/keep/1");
  CHECK(error_pointer(doc(
            {{"mask", R"({"type": "custom", "allow": [[true, true, true], [1, true, true], [true, true, true]]})"}})) ==
        "/mask/allow/1/0");
  CHECK(error_pointer(doc(
            {{"mask", R"({"type": "custom", "allow": [[true, true, true], [true, true], [true, true, true]]})"}})) ==
        "/mask/allow/1");
}

TEST_CASE("Batch items of different lengths are refused at the item that differs", "[loader]") {
  CHECK(error_pointer(doc({{"X", "[[[1, 0], [0, 1]], [[2, 0]]]"}})) == "/X/1");
}

TEST_CASE("Layout out_in checks the stored (transposed) shape", "[loader]") {
  // out_in: W_q must have d_model = 2 columns; [[1, 0, 0]] has 3
  CHECK(error_pointer(doc({{"layout", "\"out_in\""}, {"W_q", "[[1, 0, 0]]"}})) == "/W_q");
}

TEST_CASE("A context whose width does not match W_k's rows is refused at /W_k", "[loader]") {
  CHECK(error_pointer(doc({{"context", R"({"X": [[1, 0, 0]]})"}})) == "/W_k");
  CHECK(error_pointer(doc({{"context", R"({"X": [[1, 0]], "extra": 1})"}})) == "/context/extra");
}

TEST_CASE("Text that is not JSON is an InputError saying so, a document that is not an object is refused at \"\"",
          "[loader]") {
  // where a syntax error points (the whole document, or the place the parser stopped) is the
  // loader's choice; that it is an InputError about invalid JSON is not
  const std::string truncated = "{\"X\": [[1, 0]";
  REQUIRE_THROWS_AS(load_problem(truncated, "test.json"), InputError);
  CHECK_THAT(error_message(truncated), Catch::Contains("invalid JSON"));
  CHECK(error_pointer("[1, 2]") == "");
  CHECK(error_pointer("3") == "");
}

TEST_CASE("A file that cannot be read is an InputError naming the file", "[loader]") {
  try {
    (void)load_problem_file("/nonexistent/attn-trace/no.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.file() == "/nonexistent/attn-trace/no.json");
    CHECK(e.pointer().empty());
  }
}

TEST_CASE("model holds the model's layer count and context length, each optional, and refuses anything else",
          "[loader]") {
  const Problem both = load_problem(doc({{"model", R"({"layers": 32, "context_length": 4096})"}}), "test.json");
  CHECK(both.model.layers == std::optional<std::size_t>(32));
  CHECK(both.model.context_length == std::optional<std::size_t>(4096));
  const Problem layers = load_problem(doc({{"model", R"({"layers": 2})"}}), "test.json");
  CHECK(layers.model.layers == std::optional<std::size_t>(2));
  CHECK_FALSE(layers.model.context_length);
  const Problem none = load_problem(doc(), "test.json");
  CHECK_FALSE(none.model.layers);
  CHECK_FALSE(none.model.context_length);

  CHECK(error_pointer(doc({{"model", "32"}})) == "/model");
  CHECK(error_pointer(doc({{"model", R"({"layers": 0})"}})) == "/model/layers");
  CHECK(error_pointer(doc({{"model", R"({"layers": 1.5})"}})) == "/model/layers");
  CHECK(error_pointer(doc({{"model", R"({"context_length": -1})"}})) == "/model/context_length");
  CHECK(error_pointer(doc({{"model", R"({"layer": 2})"}})) == "/model/layer");
  CHECK_THAT(error_message(doc({{"model", R"({"layer": 2})"}})), Catch::Contains("\"layers\""));
}
