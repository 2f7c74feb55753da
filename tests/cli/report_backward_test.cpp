// attn-trace report --backward (docs/cli.md, "report"; docs/backward.md): the page gains the backward
// pass, and without --backward it is the page it was. tests/report/browser_test.py walks it in a browser.

#include <cmath>
#include <cstdint>
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

// FNV-1a, 64 bits: a digest of a page that the test can keep.
std::uint64_t digest(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325U;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3U;
  }
  return h;
}

// The page with the program's version written as VERSION, so that a new version is the same page.
std::string without_version(std::string page) {
  const std::string version = run_binary({"--version"}).out;  // "attn-trace 0.1.0\n"
  const std::string name = version.substr(0, version.find('\n'));
  for (std::size_t at = page.find(name); at != std::string::npos; at = page.find(name, at))
    page.replace(at, name.size(), "attn-trace VERSION");
  return page;
}

// The page's data: the JSON of <script id="trace-data">.
nlohmann::json page_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"trace-data\">";
  const std::size_t from = page.find(open) + open.size();
  return nlohmann::json::parse(page.substr(from, page.find("</script>", from) - from));
}

const nlohmann::json* named(const nlohmann::json& list, const std::string& name) {
  for (const nlohmann::json& s : list)
    if (s.at("name") == name) return &s;
  return nullptr;
}

void flat(const nlohmann::json& j, std::vector<double>& out) {
  if (j.is_number()) out.push_back(j.get<double>());
  else
    for (const nlohmann::json& x : j) flat(x, out);
}

std::vector<double> flat(const nlohmann::json& j) {
  std::vector<double> out;
  flat(j, out);
  return out;
}

// The page keeps 7 significant digits of the trace's numbers.
void check_close(const std::vector<double>& page, const std::vector<double>& trace, const std::string& where) {
  INFO(where);
  REQUIRE(page.size() == trace.size());
  for (std::size_t k = 0; k < page.size(); ++k) {
    INFO("entry " << k << ": page " << page[k] << ", trace " << trace[k]);
    CHECK(std::abs(page[k] - trace[k]) <= 1e-6 * std::abs(trace[k]) + 1e-30);
  }
}

}  // namespace

TEST_CASE("report without --backward is byte for byte the page it was before the backward pass came to it",
          "[cli][report][backward]") {
  // The digests of these pages as report wrote them before --backward existed (with the version written
  // as VERSION), and since, with report.js's colour position halved before it subtracts (a span past the
  // largest double), and with the tile walk's state table built from the trace's tile fields (the page
  // data's flash.state: the same table drawn, tests/report/browser_test.py). A deliberate change to the
  // forward page changes them: then write the new ones here.
  const std::vector<std::pair<std::vector<std::string>, std::uint64_t>> pages = {
      {{"report", cat_sat}, 0x049fbf6f113660c8U},
      {{"report", gpt}, 0xe7101e79155ff44fU},
      {{"report", source_path("data/gqa.json"), "--engine", "flash"}, 0x0827683f4d612834U},
      {{"report", source_path("data/llama_layer.json")}, 0xcda6a960f5353c79U},
      {{"report", source_path("data/padded_batch.json")}, 0x76b641c20293afb8U},
      {{"report", source_path("data/cross_attention.json"), "--engine", "naive"}, 0x2eb6649e7e4ad7b4U},
  };
  for (const auto& [args, expected] : pages) {
    const RunResult r = run_binary(args);
    check_success(r);
    CHECK(digest(without_version(r.out)) == expected);
    CHECK_FALSE(contains(r.out, "id=\"backward\""));
    CHECK_FALSE(contains(r.out, "\"backward\":"));
  }
}

TEST_CASE(
    "report --backward on \"The cat sat\": d_weights all 2, d_scores 0, and the page says why in the terminal's words",
    "[cli][report][backward]") {
  const RunResult r = run_binary({"report", cat_sat, "--backward"});
  check_success(r);
  for (const std::string id : {"backward", "step-d_output", "step-d_weights", "step-d_masked", "step-d_scores",
                               "step-d_X", "step-d_W_q", "flash-backward", "backward-tile-state"})
    CHECK(contains(r.out, "id=\"" + id + "\""));
  // By hand: dY = 1 and no W_o, so dO = 1; every row of V is [1, 1], so dA = 1 + 1 = 2; the weights of a
  // row sum to 1, so D = 2 and dS = A ⊙ (2 − 2) = 0.
  const nlohmann::json data = page_data(r.out);
  const std::vector<double> dA = flat(named(data.at("steps"), "d_weights")->at("panels").at(0).at("values"));
  REQUIRE(dA.size() == 9);
  for (const double x : dA) CHECK(x == 2.0);
  for (const std::string step : {"d_masked", "d_scaled", "d_scores"})
    for (const double x : flat(named(data.at("steps"), step)->at("panels").at(0).at("values")))
      CHECK(std::abs(x) < 1e-6);
  CHECK(data.at("backward").at("dY") == "ones");
  // The note is the terminal's: the same sentence under run --backward's d_masked.
  const std::string why = "Every row of d_weights holds one number c, so D = rowsum(dA ⊙ A) = c (the weights sum to 1)";
  CHECK(contains(r.out, "<p class=\"note why-zero\">" + why));
  const RunResult terminal = run_binary({"run", cat_sat, "--backward", "--color", "never"});
  CHECK(contains(terminal.out, "Every row of d_weights holds one number c, so D = rowsum(dA ⊙ A) = c"));
  // D = rowsum(dO ⊙ O) = 1·1 + 1·1 = 2 for every row, O being [1, 1] (the average of V's rows).
  for (const double x : flat(data.at("backward").at("flash").at("D").at(0).at("values"))) CHECK(x == Approx(2.0));
}

TEST_CASE("report --backward's diagram has one box per gradient step of the input, each a link to its section",
          "[cli][report][backward]") {
  for (const std::string input : {"the_cat_sat", "llama_layer", "bert_bias", "cross_attention", "pytorch_layout"}) {
    const std::string file = source_path("data/" + input + ".json");
    const RunResult page = run_binary({"report", file, "--backward"});
    check_success(page);
    const nlohmann::json trace = nlohmann::json::parse(run_binary({"run", file, "--backward", "--json", "-"}).out);
    const std::string svg = page.out.substr(page.out.find("<svg class=\"pipeline backward-pipeline\""));
    const std::string diagram = svg.substr(0, svg.find("</svg>"));
    std::size_t gradients = 0;
    for (const nlohmann::json& step : trace.at("steps")) {
      const std::string name = step.at("name");
      if (name.rfind("d_", 0) != 0) continue;
      ++gradients;
      INFO(input << ": " << name);
      CHECK(contains(diagram, "<a href=\"#step-" + name + "\" class=\"node"));
      CHECK(contains(page.out, "<section class=\"step\" id=\"step-" + name + "\""));
    }
    // and no box for a gradient the input does not have (d_W_o without W_o, d_q_rot without rope)
    std::size_t boxes = 0;
    for (std::size_t at = diagram.find("<a href=\"#step-d_"); at != std::string::npos;
         at = diagram.find("<a href=\"#step-d_", at + 1))
      ++boxes;
    CHECK(boxes == gradients);
  }
}

TEST_CASE("report --backward's tile walk holds the trace's flash backward tiles, skipped ones included",
          "[cli][report][backward][flash]") {
  const RunResult page = run_binary({"report", gpt, "--backward", "--grad-seed", "7"});
  check_success(page);
  const nlohmann::json trace =
      nlohmann::json::parse(
          run_binary({"run", gpt, "--backward", "--grad-seed", "7", "--engine", "both", "--json", "-"}).out)
          .at("flash_backward");
  const nlohmann::json walk = page_data(page.out).at("backward").at("flash");
  CHECK(walk.at("tiles_total") == trace.at("tiles").size());
  std::size_t k = 0, skipped = 0;
  for (const nlohmann::json& key_tile : walk.at("walk"))
    for (const nlohmann::json& tile : key_tile.at("tiles")) {
      const nlohmann::json& want = trace.at("tiles").at(k++);
      INFO("tile " << k - 1);
      CHECK(key_tile.at("j") == want.at("j"));
      CHECK(key_tile.at("head") == want.at("head"));
      CHECK(key_tile.at("cols") == want.at("cols"));
      CHECK(tile.at("i") == want.at("i"));
      CHECK(tile.at("skipped") == want.at("skipped"));
      if (want.at("skipped")) {
        ++skipped;
        continue;
      }
      for (const std::string part : {"P", "dP", "dS", "dQ_add", "dK_j", "dV_j"})
        check_close(flat(tile.at(part)), flat(want.at(part)), part);
    }
  CHECK(k == trace.at("tiles").size());
  CHECK(skipped > 0);  // the causal mask rules out the tiles above the diagonal
}

TEST_CASE("report of a trace saved by run --backward is the report of its input with --backward, and refuses another",
          "[cli][report][backward]") {
  const TempDir dir;
  check_success(
      run_binary({"run", gpt, "--backward", "--grad-seed", "3", "--engine", "both", "--json", dir / "backward.json"}));
  const RunResult saved = run_binary({"report", dir / "backward.json"});
  check_success(saved);
  CHECK(saved.out == run_binary({"report", gpt, "--backward", "--grad-seed", "3"}).out);
  CHECK(run_binary({"report", dir / "backward.json", "--backward", "--grad-seed", "3"}).out == saved.out);
  check_usage_error(run_binary({"report", dir / "backward.json", "--grad-seed", "4"}),
                    {"--grad-seed 4", "saved trace", "--grad-seed 3"});
  check_success(run_binary({"run", gpt, "--engine", "both", "--json", dir / "forward.json"}));
  check_usage_error(run_binary({"report", dir / "forward.json", "--backward"}),
                    {"--backward", "saved trace", "no backward pass"});
  check_usage_error(run_binary({"report", gpt, "--grad-seed", "3"}), {"--grad-seed", "add --backward"});
  check_usage_error(run_binary({"report", gpt, "--steps", "d_weights"}), {"--steps d_weights", "add --backward"});
}

TEST_CASE("report --backward --engine naive has the gradients and says how to get the backward tile walk",
          "[cli][report][backward]") {
  const RunResult r = run_binary({"report", gpt, "--backward", "--engine", "naive"});
  check_success(r);
  CHECK(contains(r.out, "id=\"step-d_scores\""));
  CHECK_FALSE(contains(r.out, "id=\"backward-tile-state\""));
  CHECK(contains(r.out, "This trace has no flash backward pass"));
  // With flash alone the n × m gradients are only in tiles, and their sections say where.
  const RunResult flash = run_binary({"report", gpt, "--backward", "--engine", "flash"});
  check_success(flash);
  CHECK(contains(flash.out, "The flash backward never forms this n × m matrix whole"));
}

TEST_CASE("report --help lists --backward and --grad-seed", "[cli][report][backward]") {
  const RunResult r = run_binary({"report", "--help"});
  check_success(r);
  CHECK(contains(r.out, "--backward"));
  CHECK(contains(r.out, "--grad-seed"));
}
