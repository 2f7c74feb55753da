// attn-trace decode (docs/cli.md, "decode"): every decode step printed with a passing verdict, unsplit, split
// and paged; the trace's output step holds every token's row and equals run's; each decode step's row is its
// output step's; the refusals of inputs that cannot be decoded. run --json is the independent computation of
// the rows; the cache's sizes are worked out here from the input's shapes.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "render/draw/text.hpp"
#include "run_binary.hpp"

using namespace attn::test;
using json = nlohmann::json;

namespace {

const std::string gpt = source_path("data/gpt_causal.json");  // 4 tokens, 2 heads of 2, W_o

json trace_of(const std::vector<std::string>& args) {
  const RunResult r = run_binary(args);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++count;
  return count;
}

// The step called `name` among a list of step objects.
const json& step_named(const json& steps, const std::string& name) {
  for (const json& s : steps)
    if (s["name"] == name) return s;
  FAIL("no step " << name);
  return steps;
}

}  // namespace

TEST_CASE("decode, --split-kv 3 and --page-size 2 print every step of data/gpt_causal.json and pass", "[cli][decode]") {
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{}, {"--split-kv", "3"}, {"--page-size", "2"}}) {
    std::vector<std::string> args = {"decode", gpt, "--color", "never"};
    args.insert(args.end(), extra.begin(), extra.end());
    // At 80 columns every line fits; at 1000 no sentence is wrapped, so that its words can be found.
    const RunResult narrow = run_binary(args, RunOptions().set_env("COLUMNS", "80"));
    CHECK(narrow.exit_code == 0);
    for (const std::string& line : split_lines(narrow.out)) CHECK(attn::display_width(line) <= 80);
    const RunResult r = run_binary(args, RunOptions().set_env("COLUMNS", "1000"));
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    // The prompt (The) and the three decoded tokens, each with its cache growing by one.
    CHECK(contains(r.out, "━━ prefill: 1 token"));
    CHECK(contains_in_order(r.out,
                            "━━ decode step: cat (position 1, cache 1 → 2)...━━ k_cache...━━ v_cache..."
                            "━━ decode step: sat (position 2, cache 2 → 3)..."
                            "━━ decode step: down (position 3, cache 3 → 4)...━━ check...verdict: PASS"));
    // 2 key/value heads of d_k = d_v = 2 in float32: 2 · 2 · 2 · 4 = 32 bytes a token.
    CHECK(contains(r.out, "cache: 32 bytes per token and layer = 2 · 2 · 2 · 4"));
    CHECK(contains(r.out, "The cache now holds 4 tokens = 128 bytes."));
    if (extra.empty()) {
      CHECK(contains(r.out, "down               4     128 bytes  bit for bit"));
      CHECK(count_of(r.out, "━━ weights") == 4);  // the prefill's and each decode step's
    }
    if (!extra.empty() && extra[0] == "--split-kv") {
      CHECK(contains(r.out, "the cache of 4 cut into 3 chunks: The | cat | sat…down."));
      CHECK(count_of(r.out, "━━ weights") == 1);  // the prefill's: the split never forms them whole
    }
    if (!extra.empty() && extra[0] == "--page-size")
      CHECK(contains_in_order(r.out,
                              "━━ pages...block table (logical page → physical page): 0→...pool: 2 of 4 pages in "
                              "use; reserved 128 bytes, used 128 bytes"));
  }
}

TEST_CASE("decode --json holds every token's output row, equal to run's, and each decode step's own",
          "[cli][decode][json]") {
  const json run = trace_of({"run", gpt, "--json", "-"});
  const json& run_output = step_named(run["steps"], "output")["data"];
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {}, {"--split-kv", "3"}, {"--page-size", "2", "--page-seed", "5"}, {"--prompt", "0"}}) {
    std::vector<std::string> args = {"decode", gpt, "--json", "-"};
    args.insert(args.end(), extra.begin(), extra.end());
    INFO(fmt::format("{}", fmt::join(args, " ")));
    const json t = trace_of(args);
    REQUIRE(t["steps"].size() == 1);
    const json& output = t["steps"][0];
    CHECK(output["name"] == "output");
    CHECK(output["shape"] == json::array({4, 4}));
    const json& d = t["decode"];
    const std::size_t prompt = d["prompt"];
    CHECK(prompt == (extra == std::vector<std::string>{"--prompt", "0"} ? 0U : 1U));
    REQUIRE(d["steps"].size() == 4 - prompt);
    for (const json& s : d["steps"]) {
      const std::size_t t_at = s["position"];
      CHECK(s["cache_length"] == t_at + 1);
      // its output row is the trace's row t, and its caches hold g = 2 heads of every key so far
      CHECK(step_named(s["steps"], "output")["data"][0] == output["data"][t_at]);
      CHECK(step_named(s["steps"], "k_cache")["shape"] == json::array({2, t_at + 1, 2}));
      CHECK(step_named(s["steps"], "v_cache")["shape"] == json::array({2, t_at + 1, 2}));
      CHECK(step_named(s["steps"], "scores")["shape"] == json::array({2, 1, t_at + 1}));
      if (extra.empty()) CHECK(output["data"][t_at] == run_output[t_at]);  // bit for bit, unsplit
      CHECK(s["check"]["bit_exact"] == (output["data"][t_at] == run_output[t_at]));
    }
    CHECK(d["check"]["tolerance"]["pass"] == true);
    if (extra.empty()) CHECK(d["check"]["bit_exact"] == true);
    if (!extra.empty() && extra[0] == "--split-kv") {
      const json& split = d["steps"][2]["split"];  // down: 4 keys in chunks of 1, 1, 2
      CHECK(split["chunks"] == json::array({json::array({0, 1}), json::array({1, 2}), json::array({2, 4})}));
      CHECK(split["lse"]["shape"] == json::array({2, 3}));
    }
    if (!extra.empty() && extra[0] == "--page-size") {
      const json& pages = d["steps"][2]["pages"];
      CHECK(pages["page_size"] == 2);
      CHECK(pages["pool_pages"] == 4);
      CHECK(pages["block_tables"][0].size() == 2);
      CHECK(pages["reserved_bytes"] == 128);
    }
  }
}

TEST_CASE("decode refuses an input that is not causal self-attention, and a prompt that leaves nothing",
          "[cli][decode][errors]") {
  check_usage_error(run_binary({"decode", source_path("data/the_cat_sat.json")}),
                    {"data/the_cat_sat.json: decode needs a causal mask", "this input's mask is none"});
  check_usage_error(run_binary({"decode", source_path("data/cross_attention.json")}), {"decode needs self-attention"});
  check_usage_error(run_binary({"decode", source_path("data/explainer_dropout.json")}), {"applies no dropout"});
  check_usage_error(run_binary({"decode", gpt, "--prompt", "4"}),
                    {"--prompt 4: the input has 4 tokens", "(--prompt 0 … 3)"});
  check_usage_error(run_binary({"decode", gpt, "--split-kv", "0"}), {"--split-kv: expected at least 1, found 0"});
  check_usage_error(run_binary({"decode", gpt, "--page-seed", "1"}), {"--page-seed", "add --page-size P"});
  check_usage_error(run_binary({"decode", gpt, "--max-memory", "1K"}), {"more than --max-memory 1K"});
}

TEST_CASE("decode counts the cache of GQA against h heads, and of the whole model with --layers", "[cli][decode]") {
  // data/gqa.json: 4 query heads sharing 2 key/value heads of d_k = d_v = 2 (its W_k and W_v are 4 wide).
  const RunResult r = run_binary({"decode", source_path("data/gqa.json"), "--layers", "32", "--color", "never"},
                                 RunOptions().set_env("COLUMNS", "1000"));
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  // 2 · 2 · 2 · 4 = 32 bytes a token; 4 heads would keep 64; 32 layers · 4 tokens · 32 bytes = 4 KiB.
  CHECK(contains(r.out, "cache: 32 bytes per token and layer = 2 · 2 · 2 · 4"));
  CHECK(contains(r.out,
                 "grouped-query attention keeps 2 key/value heads for 4 query heads: 32 bytes per token "
                 "where 4 heads would keep 64 bytes, 2× less"));
  CHECK(contains(r.out, "the whole model, 32 layers: 1.0 KiB per token; 4 tokens need 4.0 KiB"));
  const json t =
      trace_of({"decode", source_path("data/gqa.json"), "--layers", "32", "--dtype", "float16", "--json", "-"});
  CHECK(t["decode"]["cache"]["bytes_per_value"] == 2);
  CHECK(t["decode"]["cache"]["bytes_per_token"] == 16);
  CHECK(t["decode"]["cache"]["bytes_per_token_all_heads"] == 32);
  CHECK(t["decode"]["cache"]["bytes_whole_model"] == 16 * 32 * 4);
}

TEST_CASE("An imported layer carries its model's layer count and context length into the cache's whole size",
          "[cli][decode][import]") {
  // The Llama layer of tests/data/models beside a config.json that says 32 layers and 4096 positions.
  const TempDir dir;
  std::filesystem::create_directories(dir / "llama");
  std::filesystem::copy_file(source_path("tests/data/models/llama/model.safetensors"), dir / "llama/model.safetensors");
  std::ofstream(dir / "llama/config.json")
      << R"({"num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 100.0, "num_hidden_layers": 32,
             "max_position_embeddings": 4096})";
  const std::string input = dir / "llama.json";
  const RunResult imported = run_binary({"import", dir / "llama/model.safetensors", "--style", "llama", "--prefix",
                                         "model.layers.0.self_attn.", "--n", "6", "-o", input});
  INFO(imported.describe());
  REQUIRE(imported.exit_code == 0);
  const json in = json::parse(read_file(input));
  CHECK(in["model"] == json({{"layers", 32}, {"context_length", 4096}}));

  // 2 key/value heads of d_k = d_v = 4 (hidden 16 over 4 heads) in float32: 2 · 2 · 4 · 4 = 64 bytes a token.
  const json t = trace_of({"decode", input, "--json", "-"});
  const json& cache = t["decode"]["cache"];
  CHECK(cache["bytes_per_token"] == 64);
  CHECK(cache["layers"] == 32);
  CHECK(cache["context_length"] == 4096);
  CHECK(cache["bytes_whole_model"] == 64 * 32 * 6);
  CHECK(cache["bytes_whole_model_at_context"] == 64 * 32 * 4096);  // 8 MiB
  CHECK(t["input"]["model"] == in["model"]);
  const RunResult text = run_binary({"decode", input, "--color", "never"}, RunOptions().set_env("COLUMNS", "1000"));
  CHECK(contains(text.out, "the whole model, 32 layers: 2.0 KiB per token; 6 tokens need 12.0 KiB"));
  CHECK(contains(text.out, "at its context length of 4096 tokens: 8.0 MiB"));

  // --layers says better than the config: it wins
  const json two = trace_of({"decode", input, "--layers", "2", "--json", "-"});
  CHECK(two["decode"]["cache"]["layers"] == 2);
  CHECK(two["decode"]["cache"]["bytes_whole_model_at_context"] == 64 * 2 * 4096);
}

TEST_CASE("explain --decode explains a weight as the query's decode step computes it, against its cache",
          "[cli][decode][explain]") {
  // down's decode step in data/gpt_causal.json: its weight on cat is the decode trace's, and run's, bit for bit.
  const json e =
      trace_of({"explain", gpt, "--query", "down", "--key", "cat", "--head", "1", "--decode", "--json", "-"});
  const json d = trace_of({"decode", gpt, "--json", "-"});
  const json& down = d["decode"]["steps"][2];
  REQUIRE(down["token"] == "down");
  CHECK(e["query_token"] == "down");
  CHECK(e["key_token"] == "cat");
  // both float32 values: explain writes them as doubles, the trace in float32's shortest form
  CHECK(static_cast<float>(e["softmax"]["weight"].get<double>()) ==
        static_cast<float>(step_named(down["steps"], "weights")["data"][1][0][1].get<double>()));
  const RunResult text = run_binary({"explain", gpt, "--query", "3", "--key", "1", "--decode", "--color", "never"},
                                    RunOptions().set_env("COLUMNS", "1000"));
  CHECK(text.exit_code == 0);
  CHECK(contains(text.out, "the decode step of down (its row against a cache of 4 keys)"));
  check_usage_error(run_binary({"explain", gpt, "--query", "cat", "--key", "down", "--decode"}),
                    {"--key down: it comes after --query cat", "(keys 0 … 1)"});
  check_usage_error(
      run_binary({"explain", source_path("data/the_cat_sat.json"), "--query", "cat", "--key", "The", "--decode"}),
      {"decode needs a causal mask"});
  check_usage_error(run_binary({"explain", gpt, "--grad", "d_weights", "--index", "0,1,0", "--decode"}),
                    {"--decode: a decode step runs no backward pass"});
}

TEST_CASE("decode --report writes a page with the cache, each step's chunks, the block table and the verdict",
          "[cli][decode][report]") {
  const TempDir dir;
  const std::string page = dir / "decode.html";
  const RunResult r = run_binary({"decode", gpt, "--split-kv", "3", "--page-size", "2", "--report", page});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "verdict: PASS"));  // the text still goes to stdout
  const std::string html = read_file(page);
  CHECK(contains(html, "<section id=\"decode\" class=\"decode\"><h2>decoding with a KV cache</h2>"));
  CHECK(contains_in_order(html,
                          "cat (position 1, cache 1 → 2)...sat (position 2, cache 2 → 3)..."
                          "down (position 3, cache 3 → 4)"));
  CHECK(contains(html, "<h4>the chunks: each one's output o_s, lse_s and its share exp(lse_s − lse)</h4>"));
  CHECK(contains(html, "<h4>block table</h4>"));
  CHECK(contains(html, "<b class=\"pass\">pass</b>"));
  CHECK(contains(html, "<a href=\"#decode\">decoding</a>"));
  CHECK_FALSE(contains(html, "flash: the tile walk</a></h2>"));
  check_usage_error(run_binary({"decode", gpt, "--report", "-"}), {"--report -"});
}

TEST_CASE("show and report of a saved decode trace print what decode printed, byte for byte", "[cli][decode][show]") {
  const TempDir dir;
  const std::string llama = source_path("data/llama_layer.json");  // RoPE and GQA
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"decode", gpt},
           {"decode", gpt, "--split-kv", "3", "--page-size", "2", "--page-seed", "5"},
           {"decode", gpt, "--prompt", "0", "--dtype", "bfloat16"},
           {"decode", llama, "--split-kv", "2", "--dtype", "float64", "--layers", "32"},
           {"decode", source_path("data/sinks.json"), "--page-size", "1"}}) {
    check_round_trip(args, dir / "decode.json");
    std::vector<std::string> with_report = args;
    with_report.insert(with_report.end(), {"--report", dir / "decoded.html"});
    check_success(run_binary(with_report));
    const RunResult report = run_binary({"report", dir / "decode.json", "-o", dir / "shown.html"});
    INFO(report.describe());
    CHECK(report.exit_code == 0);
    const std::string page = read_file(dir / "decoded.html");
    CHECK(page == read_file(dir / "shown.html"));
    // the pipeline's boxes lead to sections the page has: the output's, or the first decode step's
    for (std::size_t at = page.find("href=\"#"); at != std::string::npos; at = page.find("href=\"#", at + 1)) {
      const std::string target = page.substr(at + 7, page.find('"', at + 7) - at - 7);
      INFO(target);
      if (target != "flash") CHECK(contains(page, "id=\"" + target + "\""));  // flash: faded, as in any naive page
    }
  }
}

TEST_CASE("A saved decode trace whose decode object does not fit its input is refused at its pointer",
          "[cli][decode][show]") {
  const TempDir dir;
  const json good = trace_of({"decode", gpt, "--split-kv", "2", "--page-size", "2", "--json", "-"});
  const auto refused = [&](const std::function<void(json&)>& harm, const std::vector<std::string>& fragments) {
    json broken = good;
    harm(broken);
    const std::string file = dir / "broken.json";
    std::ofstream(file) << broken.dump();
    check_error(run_binary({"show", file}), "attn-trace: error: " + file + ": ", fragments);
  };
  // 4 tokens, a prompt of 1: three decode steps at positions 1, 2 and 3
  refused([](json& t) { t["decode"]["prompt"] = 4; }, {"/decode/prompt", "0 to 3 tokens"});
  refused([](json& t) { t["decode"]["steps"].erase(2); }, {"/decode/steps", "expected 3 decode steps"});
  refused([](json& t) { t["decode"]["steps"][1]["position"] = 3; },
          {"/decode/steps/1/position", "expected the position 2"});
  refused([](json& t) { t["decode"]["steps"][0]["cache_length"] = 5; }, {"/decode/steps/0/cache_length", "expected 2"});
  refused(
      [](json& t) {
        json& steps = t["decode"]["steps"][0]["steps"];
        for (std::size_t k = 0; k < steps.size(); ++k)
          if (steps[k]["name"] == "k_cache") steps.erase(k);
      },
      {"/decode/steps/0/steps", "k_cache and v_cache"});
  refused(
      [](json& t) {
        t["decode"]["steps"][2]["split"]["chunks"][0] = {0, 3};
      },
      {"/decode/steps/2/split/chunks/0", "expected [0, 2]"});
  refused(
      [](json& t) {
        t["decode"]["steps"][0]["split"]["lse"]["shape"] = {2, 3};
      },
      {"/decode/steps/0/split/lse/shape", "expected the shape"});
  refused([](json& t) { t["decode"]["steps"][0]["pages"]["block_tables"][0][0] = 99; },
          {"/decode/steps/0/pages/block_tables/0/0", "a page of the pool"});
  refused([](json& t) { t["decode"]["steps"][0].erase("pages"); }, {"/decode/steps/0/pages", "missing"});
  refused([](json& t) { t["decode"]["check"]["tolerance"].erase("pass"); },
          {"/decode/check/tolerance/pass", "true or false"});
  refused([](json& t) { t["input"]["mask"] = "none"; }, {"/decode", "cannot be decoded"});

  // a decode trace is shown whole: no filter, no document
  const std::string saved = dir / "decode.json";
  std::ofstream(saved) << good.dump();
  for (const std::vector<std::string>& option :
       std::vector<std::vector<std::string>>{{"--steps", "weights"}, {"--head", "1"}, {"--format", "markdown"}}) {
    std::vector<std::string> args = {"show", saved};
    args.insert(args.end(), option.begin(), option.end());
    check_usage_error(run_binary(args), {option[0] + ": this is a decode trace, which show prints whole"});
  }
}
