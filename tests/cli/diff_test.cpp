// attn-trace diff (docs/diff.md) through the real binary: every case of tests/data/diff, made by PyTorch
// (tests/diff/make_dumps.py) with the expected first step and diagnosis of what was planted, and the
// errors of bad dumps.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "render/draw/text.hpp"
#include "run_binary.hpp"

using namespace attn::test;

namespace {

const std::string cases_dir = source_path("tests/data/diff");
const std::string fused_dir = source_path("tests/data/diff_fused");
const std::string cat_sat = source_path("data/the_cat_sat.json");

// A row's figures are those its verdict was judged by: over the tolerance exactly when it does not agree.
void check_figures_match_verdicts(const nlohmann::json& findings) {
  for (const auto& s : findings["steps"]) {
    INFO("step " << s["step"] << ": " << s.dump());
    const nlohmann::json& judged = s["judged"];
    REQUIRE(judged.is_object());
    CHECK(judged["against"] == (s["verdict"] == "follows" ? "input" : "dump"));
    const bool over =
        judged["max_abs"].is_string() || judged["max_abs"].get<double>() > judged["tolerance"].get<double>();
    CHECK(over == (s["verdict"] != "agrees"));
  }
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

void copy(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace

TEST_CASE("diff names the planted first step and diagnosis of every PyTorch-made case and passes the correct ones",
          "[cli][diff]") {
  const nlohmann::json cases = nlohmann::json::parse(read_file(cases_dir + "/cases.json"));
  REQUIRE(cases.size() >= 27);
  for (const nlohmann::json& c : cases) {
    DYNAMIC_SECTION(c["name"].get<std::string>()) {
      TempDir dir;
      std::vector<std::string> args = {"diff", cases_dir + "/" + c["input"].get<std::string>(),
                                       cases_dir + "/" + c["dumps"].get<std::string>()};
      for (const auto& a : c["args"]) args.push_back(a.get<std::string>());
      std::vector<std::string> with_json = args;
      with_json.insert(with_json.end(), {"--json", dir / "findings.json"});
      const RunResult r = run_binary(with_json);
      INFO(r.describe());
      INFO("why: " << c["why"].get<std::string>());
      CHECK(r.exit_code == c["exit"].get<int>());
      CHECK(r.err.empty());
      const nlohmann::json findings = nlohmann::json::parse(read_file(dir / "findings.json"));
      CHECK(findings["format"] == "attn-trace.diff");
      CHECK(findings["version"] == 1);
      if (c["first_step"].is_null()) {
        CHECK(findings["first_divergence"].is_null());
        CHECK(contains(r.out, "Every dumped step agrees with ours within tolerance"));
        for (const auto& s : findings["steps"]) CHECK(s["verdict"] == "agrees");
      } else {
        const nlohmann::json& d = findings["first_divergence"];
        REQUIRE(d.is_object());
        CHECK(d["step"] == c["first_step"]);
        CHECK(d["diagnosis"] == c["diagnosis"]);
        CHECK(contains(r.out, "first divergence: " + c["first_step"].get<std::string>()));
        // Every step before the first divergence agrees.
        for (const auto& s : findings["steps"]) {
          if (s["step"] == d["step"]) break;
          CHECK(s["verdict"] == "agrees");
        }
      }
      check_figures_match_verdicts(findings);
      // --json - writes the same findings to stdout and no text.
      args.insert(args.end(), {"--json", "-"});
      const RunResult json_only = run_binary(args);
      CHECK(json_only.exit_code == r.exit_code);
      CHECK(nlohmann::json::parse(json_only.out) == findings);
    }
  }
}

TEST_CASE("diff reads each PyTorch-made fused dump as the step it holds, says so in one note, and walks on",
          "[cli][diff]") {
  // tests/diff/make_fused_dumps.py: PyTorch in float32, several steps in one line (scores = q·kᵀ/√d_k,
  // scores scaled and masked, scaled masked, weights before the division, q split and turned by RoPE);
  // the planted cases put one mistake after the fusion, and the manifest names where it first shows.
  const nlohmann::json cases = nlohmann::json::parse(read_file(fused_dir + "/cases.json"));
  REQUIRE(cases.size() >= 15);
  RunOptions wide;
  wide.env = {{"COLUMNS", "400"}};  // each note on one line
  for (const nlohmann::json& c : cases) {
    DYNAMIC_SECTION(c["name"].get<std::string>()) {
      TempDir dir;
      const RunResult r = run_binary({"diff", fused_dir + "/" + c["input"].get<std::string>(),
                                      fused_dir + "/" + c["dumps"].get<std::string>(), "--json", dir / "f.json"},
                                     wide);
      INFO(r.describe());
      INFO("why: " << c["why"].get<std::string>());
      CHECK(r.exit_code == c["exit"].get<int>());
      CHECK(r.err.empty());
      const nlohmann::json findings = nlohmann::json::parse(read_file(dir / "f.json"));
      // The note, once, in the text and in the JSON.
      const std::string note = c["note"].get<std::string>();
      CHECK(contains(r.out, "note: " + note));
      std::size_t notes = 0;
      for (const auto& n : findings["notes"]) notes += n.get<std::string>().find(note) != std::string::npos ? 1 : 0;
      CHECK(notes == 1);
      // Each fused file is judged as the step it holds.
      for (const auto& [file, held] : c["holds"].items()) {
        bool found = false;
        for (const auto& s : findings["steps"])
          if (s["named"] == file && s["step"] == held) found = s["fusion"] != "none";
        CHECK(found);
      }
      check_figures_match_verdicts(findings);
      if (c["first_step"].is_null()) {
        CHECK(findings["first_divergence"].is_null());
        CHECK_FALSE(contains(r.out, "DIFFERS"));
        for (const auto& s : findings["steps"]) CHECK(s["verdict"] == "agrees");
      } else {
        const nlohmann::json& d = findings["first_divergence"];
        REQUIRE(d.is_object());
        CHECK(d["step"] == c["first_step"]);
        CHECK(d["diagnosis"] == c["diagnosis"]);
        for (const auto& s : findings["steps"]) {
          if (s["step"] == d["step"]) break;
          CHECK(s["verdict"] == "agrees");
        }
      }
    }
  }
}

TEST_CASE("diff's row of a step out of tolerance shows the value that is out, by hand on the worked example",
          "[cli][diff]") {
  // scores dumped as zeros, scaled dumped right: given the dump's scores, scaled must be 0, so scaled
  // differs, by 4/√2 = 2.828427 at (The, cat), with a tolerance of 0 (0 sums no terms). Its row once
  // showed max |Δ| 0 against ours from the input beside DIFFERS; now its figures are those it was
  // judged by.
  TempDir dir;
  std::filesystem::create_directory(dir / "dumps");
  write(dir / "dumps/scores.json", "[[0, 0, 0], [0, 0, 0], [0, 0, 0]]");
  write(dir / "dumps/scaled.json",
        "[[0, 2.8284271247461903, 1.4142135623730951], [2.8284271247461903, 0, 1.4142135623730951], "
        "[1.4142135623730951, 1.4142135623730951, 1.4142135623730951]]");
  RunOptions wide;
  wide.env = {{"COLUMNS", "200"}};
  const RunResult r = run_binary({"diff", cat_sat, dir / "dumps", "--json", dir / "f.json"}, wide);
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(contains(r.out, "scaled       scaled.json 2.83e+00  0         0         DIFFERS (7 values)"));
  const nlohmann::json findings = nlohmann::json::parse(read_file(dir / "f.json"));
  const nlohmann::json& scaled = findings["steps"][1];
  CHECK(scaled["step"] == "scaled");
  CHECK(scaled["verdict"] == "differs");
  CHECK(scaled["judged"]["max_abs"].get<double>() == Approx(2.8284271247461903).epsilon(1e-15));
  CHECK(scaled["judged"]["tolerance"] == 0);
  // Against ours from the input, as before: the dump's scaled is right there (to the last bit or two).
  CHECK(scaled["max_abs"].get<double>() < 1e-15);
}

TEST_CASE("diff of hand-worked scores of the worked example: right, then left unscaled", "[cli][diff]") {
  TempDir dir;
  std::filesystem::create_directory(dir / "dumps");
  // Q·Kᵀ by hand: [[0,4,2],[4,0,2],[2,2,2]]; scaled = that / √2.
  write(dir / "dumps/scores.json", "[[0, 4, 2], [4, 0, 2], [2, 2, 2]]");
  write(dir / "dumps/scaled.json",
        "[[0, 2.8284271247461903, 1.4142135623730951], [2.8284271247461903, 0, 1.4142135623730951], "
        "[1.4142135623730951, 1.4142135623730951, 1.4142135623730951]]");
  const RunResult right = run_binary({"diff", cat_sat, dir / "dumps"});
  check_success(right);
  CHECK(contains(right.out, "Ours is computed in float64"));  // a JSON dump is float64

  write(dir / "dumps/scaled.json", "[[0, 4, 2], [4, 0, 2], [2, 2, 2]]");
  RunOptions wide;
  wide.env = {{"COLUMNS", "400"}};  // each sentence on one line
  const RunResult wrong = run_binary({"diff", cat_sat, dir / "dumps"}, wide);
  INFO(wrong.describe());
  CHECK(wrong.exit_code == 1);
  CHECK(contains(wrong.out, "first divergence: scaled"));
  CHECK(contains(wrong.out, "query The (0), key cat (1): ours 2.8284, the dump 4"));
  CHECK(contains(wrong.out, "7 of 9 values are out of tolerance"));
  CHECK(contains(wrong.out, "scale (the scale left out): The dump's value is 1.41421 times ours"));
  // Judged in float16 on request: 4/√2 in float16 is 2.828125.
  const RunResult half = run_binary({"diff", cat_sat, dir / "dumps", "--dtype", "float16", "--precision", "6"}, wide);
  CHECK(half.exit_code == 1);
  CHECK(contains(half.out, "ours 2.828125, the dump 4"));
}

TEST_CASE("diff refuses bad dumps with one line and exit 2", "[cli][diff]") {
  TempDir dir;
  const std::string dumps = dir / "dumps";
  std::filesystem::create_directory(dumps);
  const std::string q = cases_dir + "/float32/dumps/q.npy";

  SECTION("an empty folder") {
    check_usage_error(run_binary({"diff", cat_sat, dumps}), {"holds no .npy or .json file"});
  }
  SECTION("a name that is no step") {
    write(dumps + "/query.json", "[[2, 0], [0, 2], [1, 1]]");
    check_usage_error(run_binary({"diff", cat_sat, dumps}),
                      {"query.json: no step is called query...--name STEP=NAME maps another name"});
  }
  SECTION("a shape that fits no reading of the step") {
    write(dumps + "/q.json", "[[2, 0, 1], [0, 2, 1]]");
    check_usage_error(run_binary({"diff", cat_sat, dumps}),
                      {"q.json: shape (2, 3) does not fit step q of this input: (batch 1, query 3, feature 2)"});
  }
  SECTION("one step twice") {
    write(dumps + "/q.json", "[[2, 0], [0, 2], [1, 1]]");
    write(dumps + "/attn_q.json", "[[2, 0], [0, 2], [1, 1]]");
    check_usage_error(run_binary({"diff", cat_sat, dumps, "--name", "q=attn_q"}), {"are both step q"});
  }
  SECTION("--name without =, with an unknown step, or naming no tensor") {
    write(dumps + "/q.json", "[[2, 0], [0, 2], [1, 1]]");
    check_usage_error(run_binary({"diff", cat_sat, dumps, "--name", "weights"}), {"write STEP=NAME"});
    check_usage_error(run_binary({"diff", cat_sat, dumps, "--name", "wieghts=probs"}), {"weights"});
    check_usage_error(run_binary({"diff", cat_sat, dumps, "--name", "weights=probs"}),
                      {"the dump holds no tensor called probs"});
  }
  SECTION("a truncated .npy among the dumps") {
    const std::string bytes = read_file(q);
    write(dumps + "/q.npy", bytes.substr(0, bytes.size() - 3));
    check_usage_error(run_binary({"diff", cases_dir + "/float32/input.json", dumps}), {"q.npy"});
  }
  SECTION("DUMPS that is a single .npy file, or missing") {
    check_usage_error(run_binary({"diff", cat_sat, q}), {".safetensors file"});
    check_usage_error(run_binary({"diff", cat_sat, dir / "nothing.safetensors"}), {"nothing.safetensors"});
  }
  SECTION("a dtype diff does not know") {
    write(dumps + "/q.json", "[[2, 0], [0, 2], [1, 1]]");
    check_usage_error(run_binary({"diff", cat_sat, dumps, "--dtype", "float8"}), {"--dtype"});
  }
  SECTION("more than --max-memory") {
    copy(q, dumps + "/q.npy");
    check_usage_error(run_binary({"diff", cases_dir + "/float32/input.json", dumps, "--max-memory", "1K"}),
                      {"--max-memory 1K"});
  }
}

TEST_CASE("diff reads FILE as a saved trace too", "[cli][diff]") {
  TempDir dir;
  const std::string input = cases_dir + "/float32/input.json";
  const RunResult saved = run_binary({"run", input, "--json", dir / "trace.json"});
  REQUIRE(saved.exit_code == 0);
  const RunResult r = run_binary({"diff", dir / "trace.json", cases_dir + "/float32/dumps"});
  check_success(r);
}

TEST_CASE("diff finds the planted backward bug of every PyTorch-made gradient case and passes autograd's",
          "[cli][diff][backward]") {
  // tests/diff/make_gradient_dumps.py: autograd's gradients, and a hand-written backward with one bug each,
  // saved under step names and PyTorch-style ones (grad_q, k.grad, dx, q_proj.weight.grad, ...).
  const std::string dir = source_path("tests/data/diff_backward");
  const nlohmann::json cases = nlohmann::json::parse(read_file(dir + "/cases.json"));
  REQUIRE(cases.size() >= 10);
  for (const nlohmann::json& c : cases) {
    DYNAMIC_SECTION(c["name"].get<std::string>()) {
      TempDir out;
      const RunResult r = run_binary({"diff", dir + "/" + c["input"].get<std::string>(),
                                      dir + "/" + c["dumps"].get<std::string>(), "--json", out / "findings.json"},
                                     RunOptions().set_env("COLUMNS", "80"));
      INFO(r.describe());
      INFO("why: " << c["why"].get<std::string>());
      CHECK(r.exit_code == c["exit"].get<int>());
      CHECK(r.err.empty());
      const nlohmann::json findings = nlohmann::json::parse(read_file(out / "findings.json"));
      CHECK(findings["upstream"] == "dump");  // grad_output.npy is the dump's dY
      check_figures_match_verdicts(findings);
      CHECK(contains(r.out, "note: the upstream gradient dY is the dump's own d_output (grad_output.npy)"));
      if (c["first_step"].is_null()) {
        CHECK(findings["first_divergence"].is_null());
        CHECK(contains(r.out, "Every dumped step agrees with ours within tolerance"));
      } else {
        const nlohmann::json& d = findings["first_divergence"];
        REQUIRE(d.is_object());
        CHECK(d["step"] == c["first_step"]);
        CHECK(d["diagnosis"] == c["diagnosis"]);
        CHECK(contains(r.out, "first divergence: " + c["first_step"].get<std::string>()));
        for (const auto& s : findings["steps"]) {
          if (s["step"] == d["step"]) break;
          CHECK(s["verdict"] == "agrees");
        }
      }
      for (const std::string& line : split_lines(r.out)) CHECK(attn::display_width(line) <= 80);
    }
  }
}

TEST_CASE("diff reads a JSON gradient dump under a PyTorch-style name, and --name maps any other",
          "[cli][diff][backward]") {
  // The worked example by hand: dY = 1 and every row of V is [1, 1], so dA = 2 everywhere and
  // dQ = 0 (docs/diff.md, "Gradient dumps").
  TempDir dir;
  const std::string dumps = dir / "dumps";
  std::filesystem::create_directory(dumps);
  write(dumps + "/grad_q.json", "[[0, 0], [0, 0], [0, 0]]");
  write(dumps + "/dP.json", "[[2, 2, 2], [2, 2, 2], [2, 2, 2]]");
  const RunResult ok = run_binary({"diff", cat_sat, dumps});
  INFO(ok.describe());
  CHECK(ok.exit_code == 0);
  CHECK(contains_in_order(ok.out, "d_weights    dP.json...agrees...d_q          grad_q.json...agrees"));
  CHECK(contains(ok.out, "note: the upstream gradient dY is 1 everywhere"));

  write(dumps + "/grad_q.json", "[[0.5, 0], [0, 0], [0, 0]]");
  const RunResult bad = run_binary({"diff", cat_sat, dumps});
  INFO(bad.describe());
  CHECK(bad.exit_code == 1);
  CHECK(contains(bad.out, "first divergence: d_q"));

  std::filesystem::rename(dumps + "/grad_q.json", dumps + "/my_dq.json");
  const RunResult named = run_binary({"diff", cat_sat, dumps, "--name", "d_q=my_dq"});
  INFO(named.describe());
  CHECK(named.exit_code == 1);
  CHECK(contains(named.out, "d_q          my_dq.json"));
}

TEST_CASE("diff refuses a gradient name it does not know, and a gradient the input cannot have, in one line",
          "[cli][diff][backward]") {
  TempDir dir;
  const std::string dumps = dir / "dumps";
  std::filesystem::create_directory(dumps);
  SECTION("an unknown name") {
    write(dumps + "/q_grad.json", "[[0, 0], [0, 0], [0, 0]]");
    check_usage_error(run_binary({"diff", cat_sat, dumps}),
                      {"q_grad.json: no step is called q_grad...the gradients: d_output...grad_q, q.grad, dq"});
  }
  SECTION("a bias's gradient for an input without the bias") {
    write(dumps + "/d_b_q.json", "[0, 0]");
    check_usage_error(run_binary({"diff", cat_sat, dumps}), {"d_b_q.json: step d_b_q belongs to an input with b_q"});
  }
}

TEST_CASE("diff --grad-seed draws the dY that run --backward --grad-seed draws", "[cli][diff][backward]") {
  // The gradients of run's own trace, each saved as a JSON dump (the trace's nested arrays), agree with
  // the same seed, and differ at the first of them with dY = 1.
  TempDir dir;
  const std::string gqa = source_path("data/gqa.json");
  const RunResult run = run_binary({"run", gqa, "--backward", "--grad-seed", "7", "--json", dir / "trace.json"});
  REQUIRE(run.exit_code == 0);
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir / "trace.json"));
  const std::string dumps = dir / "dumps";
  std::filesystem::create_directory(dumps);
  for (const auto& s : trace["steps"])
    if (s["name"] == "d_v_heads" || s["name"] == "d_q" || s["name"] == "d_W_o")
      write(dumps + "/" + s["name"].get<std::string>() + ".json", s["data"].dump());
  const RunResult same = run_binary({"diff", gqa, dumps, "--grad-seed", "7", "--dtype", "float32"});
  INFO(same.describe());
  CHECK(same.exit_code == 0);
  CHECK(contains(same.out, "note: the upstream gradient dY is drawn from a standard normal with --grad-seed 7"));
  const RunResult ones = run_binary({"diff", gqa, dumps, "--dtype", "float32", "--json", "-"});
  INFO(ones.describe());
  CHECK(ones.exit_code == 1);
  const nlohmann::json findings = nlohmann::json::parse(ones.out);
  CHECK(findings["upstream"] == "ones");
  CHECK(findings["first_divergence"]["step"] == "d_v_heads");
}

TEST_CASE("diff shows a bias's gradient that differs as one row with the element marked", "[cli][diff][backward]") {
  TempDir dir;
  const std::string dumps = dir / "dumps";
  std::filesystem::create_directory(dumps);
  const std::string input = dir / "input.json";
  // The worked example with b_q and W_o = I: dY = 1, dQ = 0 (docs/diff.md), so db_q = Σ dQ = 0.
  write(input, R"({"tokens": ["The", "cat", "sat"], "X": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
    "W_q": [[1, 0], [0, 1], [1, 0], [0, 1]], "W_k": [[0, 1], [1, 0], [0, 1], [1, 0]],
    "W_v": [[1, 0], [0, 1], [0, 1], [1, 0]], "b_q": [0, 0]})");
  write(dumps + "/q_proj.bias.grad.json", "[0, 0.5]");
  const RunResult r = run_binary({"diff", input, dumps}, RunOptions().set_env("COLUMNS", "80"));
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(contains(r.out, "first divergence: d_b_q"));
  CHECK(contains(r.out, "dump  0.0000      0.5000 ←"));
}

TEST_CASE("diff of a dropout dump reads its keep mask from the dumped dropped, and still finds a missing rescale",
          "[cli][diff][dropout]") {
  // The dumps are our own steps of the explainer's module (p = 0.1, seed 42), changed by hand: one kept
  // weight dropped, as another generator would draw, then the rescale by 1/(1 - p) left out.
  const std::string input = source_path("data/explainer_dropout.json");
  const RunResult run = run_binary({"run", input, "--dtype", "float64", "--steps", "weights,dropped", "--json", "-"});
  REQUIRE(run.exit_code == 0);
  const nlohmann::json trace = nlohmann::json::parse(run.out);
  nlohmann::json weights, dropped;
  for (const auto& step : trace.at("steps")) (step.at("name") == "weights" ? weights : dropped) = step.at("data");
  TempDir dir;
  std::filesystem::create_directory(dir / "dumps");
  write(dir / "dumps/weights.json", weights.dump());
  REQUIRE(dropped[0][1][1].get<double>() != 0);  // head 0, "cat" to "cat": kept by seed 42
  nlohmann::json other = dropped;
  other[0][1][1] = 0.0;
  write(dir / "dumps/dropped.json", other.dump());
  RunOptions wide;
  wide.env = {{"COLUMNS", "400"}};
  const RunResult mask = run_binary({"diff", input, dir / "dumps"}, wide);
  INFO(mask.describe());
  CHECK(mask.exit_code == 0);
  CHECK(contains(mask.out, "the keep mask is read from the dump"));
  CHECK(contains(mask.out, "1 of its 20 keep-or-drop choices differ from the mask of seed 42"));

  nlohmann::json unscaled = other;  // every kept weight as it was: A ⊙ Z
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 4; ++j)
        if (unscaled[h][i][j].get<double>() != 0) unscaled[h][i][j] = weights[h][i][j];
  write(dir / "dumps/dropped.json", unscaled.dump());
  const RunResult wrong = run_binary({"diff", input, dir / "dumps"}, wide);
  INFO(wrong.describe());
  CHECK(wrong.exit_code == 1);
  CHECK(contains(wrong.out, "first divergence: dropped"));
}
