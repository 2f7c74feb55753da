// attn-trace explain (docs/cli.md, "explain"): the worked example's operations through the real binary,
// tokens by name and by index, flash, --output, the errors, and output that fits the terminal.

#include <algorithm>
#include <fstream>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cat_sat = source_path("data/the_cat_sat.json");
const std::string gpt = source_path("data/gpt_causal.json");
const std::string gqa = source_path("data/gqa.json");

bool ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

TEST_CASE("explain follows cat to The through every operation to the weight 0.7679", "[cli][explain]") {
  const RunResult r = run_binary({"explain", cat_sat, "--query", "cat", "--key", "The"});
  check_success(r);
  INFO(r.out);
  for (const std::string heading : {"1. the inputs", "2. the query", "3. the key", "4. the score", "5. the scale",
                                    "6. the mask", "7. the softmax of row 1", "8. the output of head 0"})
    CHECK(contains(r.out, "━━ " + heading));
  CHECK(contains(r.out, "x = X[1], the query \"cat\": [0, 1, 0, 1]"));
  CHECK(contains(r.out, "q[1] = x·W_q[:,1] = 0·0 + 1·1 + 0·0 + 1·1 = 2"));
  CHECK(contains(r.out, "k[1] = c·W_k[:,1] = 1·1 + 0·0 + 1·1 + 0·0 = 2"));
  CHECK(contains(r.out, "q·k = 0·0 + 2·2 = 4"));
  CHECK(contains(r.out, "s = q·k / √2 = 4·0.7071 = 2.8284"));
  CHECK(contains(r.out, "No mask"));
  CHECK(contains(r.out, "max = 2.8284"));
  CHECK(contains(r.out, "sum = 1 + 0.0591 + 0.2431 = 1.3022"));
  CHECK(contains(r.out, "a = exp(s − max) / sum = 1 / 1.3022 = 0.7679"));
  CHECK(contains(r.out, "o[0] = 0.7679·1 + 0.0454·1 + 0.1867·1 = 1"));
  CHECK(contains(r.out, "this key's share"));
}

TEST_CASE("explain takes tokens by index as well as by name, with the same result", "[cli][explain]") {
  const RunResult by_name = run_binary({"explain", cat_sat, "--query", "cat", "--key", "The"});
  const RunResult by_index = run_binary({"explain", cat_sat, "--query", "1", "--key", "0"});
  check_success(by_index);
  CHECK(by_index.out == by_name.out);
  const RunResult mixed =
      run_binary({"explain", cat_sat, "--query", "1", "--key", "The", "--batch", "0", "--head", "0"});
  CHECK(mixed.out == by_name.out);
}

TEST_CASE("explain with the flash engine walks the key tiles and ends at naive's weight", "[cli][explain][flash]") {
  const RunResult r = run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--engine", "flash"});
  check_success(r);
  INFO(r.out);
  CHECK(contains(r.out, "7. the flash pass"));
  CHECK(contains(r.out, "Tiles of 2 × 1"));
  CHECK(contains(r.out, "key tile 0, key 0 \"The\": this key enters"));
  CHECK(contains(r.out, "this key: p = exp(2.8284 − 2.8284) = 1"));
  CHECK(contains(r.out, "alpha = exp(2.8284 − 2.8284) = 1"));
  CHECK(contains(r.out, "a = p·(later alphas) / l = 1 / 1.3022 = 0.7679"));
  CHECK(contains(r.out, "Naive's a = 0.7679"));
  CHECK(contains(r.out, ", within "));
  CHECK_FALSE(contains(r.out, "7. the softmax"));

  // a later tile that raises the max rescales the key: The's own weight on itself
  const RunResult rescaled =
      run_binary({"explain", cat_sat, "--query", "The", "--key", "The", "--engine", "flash", "--dtype", "float64"});
  check_success(rescaled);
  CHECK(contains(rescaled.out, "alpha = exp(0 − 2.8284) = 0.0591"));
  CHECK(contains(rescaled.out, "this key's p times the later alphas: 1 · 0.0591 · 1 = 0.0591"));
  CHECK(contains(rescaled.out, "= 0.0454"));

  const RunResult tiles = run_binary(
      {"explain", gpt, "--query", "down", "--key", "The", "--engine", "flash", "--block-q", "4", "--block-k", "3"});
  check_success(tiles);
  CHECK(contains(tiles.out, "Tiles of 4 × 3"));
}

TEST_CASE("explain --output explains one output number from concat and W_o, or from the head without W_o",
          "[cli][explain][output]") {
  const RunResult r = run_binary({"explain", gpt, "--query", "cat", "--output", "0"});
  check_success(r);
  INFO(r.out);
  CHECK(contains(r.out, "Y[1][0] = concat·W_o[:,0] ="));
  CHECK(contains(r.out, "each head's share"));
  CHECK(contains(r.out, "head 0 (features 0 to 1)"));
  CHECK(contains(r.out, "the largest terms"));

  const RunResult plain = run_binary({"explain", cat_sat, "--query", "cat", "--output", "0"});
  check_success(plain);
  CHECK(contains(plain.out, "no W_o"));
  CHECK(contains(plain.out, "Y[1][0] = 0.7679·1 + 0.0454·1 + 0.1867·1 = 1"));

  const RunResult flash = run_binary({"explain", gpt, "--query", "cat", "--output", "3", "--engine", "flash"});
  check_success(flash);
  CHECK(contains(flash.out, "flash engine"));
}

TEST_CASE("explain --json writes every stage's numbers as attn-trace.explain, to a file or to stdout",
          "[cli][explain][json]") {
  const RunResult r = run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--json", "-"});
  check_success(r);
  nlohmann::json j;
  REQUIRE_NOTHROW(j = nlohmann::json::parse(r.out));
  CHECK(j.at("format") == "attn-trace.explain");
  CHECK(j.at("version") == 1);
  CHECK(j.at("kind") == "weight");
  CHECK(j.at("dtype") == "float32");
  CHECK(j.at("query_token") == "cat");
  CHECK(j.at("key_token") == "The");
  CHECK(j.at("q").at(1).at("terms") == nlohmann::json::array({0, 1, 0, 1}));
  CHECK(j.at("score").at("value") == 4);
  CHECK(j.at("softmax").at("weight").get<double>() == Approx(0.76791).margin(1e-5));
  CHECK(j.at("softmax").at("sum").get<double>() == Approx(1.30223).margin(1e-5));
  CHECK(j.at("softmax").at("keys").size() == 3);
  CHECK(j.at("flash").is_null());
  CHECK(j.at("output").at("o").size() == 2);

  const TempDir dir;
  const RunResult both = run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--json", dir / "e.json"});
  check_success(both);
  CHECK(contains(both.out, "0.7679"));
  CHECK(read_file(dir / "e.json") == r.out);

  const RunResult flash =
      run_binary({"explain", gpt, "--query", "down", "--key", "cat", "--engine", "flash", "--json", "-"});
  check_success(flash);
  const nlohmann::json f = nlohmann::json::parse(flash.out).at("flash");
  CHECK(f.at("within") == true);
  CHECK(f.at("tiles").size() == 2);  // 4 keys in tiles of √4 = 2
  CHECK(f.at("weight").get<double>() == Approx(f.at("naive_weight").get<double>()).margin(1e-6));

  const RunResult output = run_binary({"explain", gpt, "--query", "cat", "--output", "1", "--json", "-"});
  check_success(output);
  const nlohmann::json o = nlohmann::json::parse(output.out);
  CHECK(o.at("kind") == "output");
  CHECK(o.at("output_projection") == true);
  CHECK(o.at("y").at("terms").size() == 4);
  CHECK(o.at("head_sums").size() == 2);
}

TEST_CASE(
    "explain --engine flash gives the key its share p = exp(s − m) in its own tile, then rescales it by each alpha",
    "[cli][explain][flash]") {
  // Worked again from each tile's own numbers, for every query and key of a causal and a sliding-window
  // input at three tilings: before the key's tile its share is 0; in it, exp(s_key − m_new), which is
  // the tile's p at the key (0 for a key the mask removes); after it, the share before times the tile's
  // alpha; and the weight, the last share over l, is naive's within the tolerance explain states.
  for (const auto& [file, tiles] : std::vector<std::pair<std::string, std::string>>{
           {gpt, "1"}, {gpt, "3"}, {source_path("data/sliding_window.json"), "2"}}) {
    const nlohmann::json input = nlohmann::json::parse(read_file(file));
    const std::size_t n = input.at("X").size();
    for (std::size_t query = 0; query < n; ++query) {
      for (std::size_t key = 0; key < n; ++key) {
        const RunResult r = run_binary({"explain", file, "--query", std::to_string(query), "--key", std::to_string(key),
                                        "--engine", "flash", "--block-k", tiles, "--json", "-"});
        INFO(file << " --block-k " << tiles << ", query " << query << ", key " << key);
        REQUIRE(r.exit_code == 0);
        const nlohmann::json j = nlohmann::json::parse(r.out);
        const nlohmann::json& f = j.at("flash");
        // -inf (a key the mask removes, a row not started) is written "-inf", as in a trace
        const auto number = [](const nlohmann::json& x) {
          return x.is_string() ? std::stod(x.get<std::string>()) : x.get<double>();
        };
        double share = 0;
        for (const nlohmann::json& t : f.at("tiles")) {
          const auto begin = t.at("col_begin").get<std::size_t>(), end = t.at("col_end").get<std::size_t>();
          if (key >= begin && key < end && t.at("skipped").get<bool>()) {
            share = 0;  // a tile the mask removes whole is never computed
          } else if (key >= begin && key < end) {
            const double s_key = number(t.at("s").at(key - begin));
            share = s_key == -INFINITY ? 0 : std::exp(s_key - number(t.at("m_new")));
            CHECK(number(t.at("p").at(key - begin)) == Approx(share).epsilon(1e-6));
          } else if (!t.at("skipped").get<bool>()) {
            share *= number(t.at("alpha"));
          }
          CHECK(number(t.at("share")) == Approx(share).epsilon(1e-6).margin(1e-30));
        }
        const double weight = share / number(f.at("l"));
        CHECK(number(f.at("weight")) == Approx(weight).epsilon(1e-6).margin(1e-30));
        CHECK(std::abs(weight - number(f.at("naive_weight"))) <= number(f.at("tolerance")));
      }
    }
  }
}

TEST_CASE("explain refuses what it cannot explain in one line, exit 2, nothing printed", "[cli][explain]") {
  check_usage_error(run_binary({"explain", cat_sat, "--query", "dog", "--key", "The"}),
                    {"--query dog: no query token \"dog\"", "\"The\", \"cat\", \"sat\"", "0 to 2"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "mat"}), {"--key mat", "\"The\""});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "7", "--key", "The"}), {"--query 7", "0 to 2"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--head", "1"}),
                    {"--head 1: the input has one head, 0"});
  check_usage_error(run_binary({"explain", gqa, "--query", "tea", "--key", "I", "--head", "4"}),
                    {"--head 4: the input has 4 heads, 0 to 3"});
  check_usage_error(
      run_binary({"explain", source_path("data/padded_batch.json"), "--query", "0", "--key", "0", "--batch", "2"}),
      {"--batch 2: the input has 2 batch items, 0 to 1"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--batch", "1"}),
                    {"--batch 1: the input has one batch item, 0"});
  // "a rose is a rose": two tokens are called "rose"
  check_usage_error(run_binary({"explain", source_path("data/sliding_window.json"), "--query", "rose", "--key", "a"}),
                    {"--query rose", "2 query tokens (1, 4)", "index"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat"}), {"--key is needed", "--output"});
  check_usage_error(run_binary({"explain", cat_sat, "--key", "cat"}), {"--query is needed"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--output", "0"}), {"--key"});
  check_usage_error(run_binary({"explain", gpt, "--query", "cat", "--output", "0", "--head", "1"}), {"--head"});
  check_usage_error(run_binary({"explain", gpt, "--query", "cat", "--output", "4"}),
                    {"--output 4: the output has 4 columns, 0 to 3"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--engine", "both"}),
                    {"--engine"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--block-q", "2"}),
                    {"--block-q", "--engine flash"});
  check_usage_error(run_binary({"explain", source_path("data/no_such_file.json"), "--query", "cat", "--key", "The"}),
                    {"no_such_file.json"});
  check_usage_error(run_binary({"explain", cat_sat, "--query", "cat", "--key", "The", "--max-memory", "1K"}),
                    {"--max-memory"});
}

TEST_CASE("explain runs on every bundled example, with both engines", "[cli][explain]") {
  for (const std::string& file : data_files())
    for (const std::string engine : {"naive", "flash"}) {
      check_success(run_binary({"explain", file, "--query", "0", "--key", "0", "--engine", engine}));
      check_success(run_binary({"explain", file, "--query", "0", "--output", "0", "--engine", engine}));
    }
}

TEST_CASE("explain fits COLUMNS=40 and is ASCII when the locale is not UTF-8", "[cli][explain]") {
  const std::vector<std::vector<std::string>> commands = {
      {"explain", cat_sat, "--query", "cat", "--key", "The"},
      {"explain", cat_sat, "--query", "cat", "--key", "The", "--engine", "flash"},
      {"explain", gpt, "--query", "The", "--key", "down", "--head", "1"},
      {"explain", gpt, "--query", "cat", "--output", "2"},
      {"explain", gqa, "--query", "tea", "--key", "green", "--head", "2", "--engine", "flash", "--precision", "8"},
      {"explain", source_path("data/bert_bias.json"), "--query", "[SEP]", "--key", "[CLS]", "--head", "1"},
      {"explain", source_path("data/cross_attention.json"), "--query", "dort", "--key", "sleeping"}};
  for (const std::vector<std::string>& args : commands)
    for (const std::string columns : {"40", "100"}) {
      const RunResult r = run_binary(args, RunOptions().set_env("COLUMNS", columns).set_env("LC_ALL", "C"));
      check_success(r);
      for (const std::string& line : split_lines(r.out)) {
        INFO(r.describe() << "\n" << line);
        CHECK(line.size() <= std::stoul(columns));
        CHECK(ascii(line));
      }
    }
  const RunResult help = run_binary({"explain", "--help"}, RunOptions().set_env("LC_ALL", "C"));
  CHECK(help.exit_code == 0);
  CHECK(contains(help.out, "attn-trace explain data/the_cat_sat.json --query cat --key The"));
  CHECK(ascii(help.out));
}

TEST_CASE("explain shows control characters of a token instead of sending them to the terminal", "[cli][explain]") {
  const TempDir dir;
  const std::string input = dir / "escape.json";
  std::ofstream(input) << R"({"tokens": ["a\u001b[2Jb", "c"], "X": [[1, 0], [0, 1]], "W_q": [[1, 0], [0, 1]], )"
                       << R"("W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [0, 1]]})";
  const RunResult r = run_binary({"explain", input, "--query", "0", "--key", "c"});
  check_success(r);
  CHECK_FALSE(contains(r.out, "\x1b"));
  CHECK(contains(r.out, "a\\x1b[2Jb"));
  const RunResult bad = run_binary({"explain", input, "--query", "z", "--key", "c"});
  check_usage_error(bad, {"a\\x1b[2Jb"});
  CHECK_FALSE(contains(bad.err, "\x1b"));
}
