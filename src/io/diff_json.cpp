#include "io/diff_json.hpp"

#include <nlohmann/json.hpp>

#include "json/json_number.hpp"

namespace attn {

namespace {

using ojson = nlohmann::ordered_json;

ojson numbers(const std::vector<double>& xs) {
  ojson out = ojson::array();
  for (const double x : xs) out.push_back(json_number(x));
  return out;
}

ojson matrix(const std::vector<std::vector<double>>& rows) {
  ojson out = ojson::array();
  for (const std::vector<double>& r : rows) out.push_back(numbers(r));
  return out;
}

ojson step_json(const StepJudgement& j) {
  return {{"step", std::string(step_info(j.step).name)},
          {"source", j.source},
          {"shape", j.dumped_shape},
          {"layout", j.layout.dims},
          {"dtype", std::string(name_of(j.dtype))},
          {"max_abs", json_number(j.max_abs)},
          {"max_rel", json_number(j.max_rel)},
          {"max_abs_resumed", json_number(j.max_abs_resumed)},
          {"tolerance", json_number(j.tolerance)},
          {"out_of_tolerance", j.out_of_tolerance},
          {"large_negatives", j.large_negatives},
          {"verdict", std::string(to_string(j.verdict))},
          {"follows", j.follows ? ojson(std::string(step_info(*j.follows).name)) : ojson(nullptr)},
          {"named", std::string(step_info(j.named).name)},
          {"fusion", std::string(to_string(j.fusion))},
          {"judged",
           {{"against", j.judged_against_input ? "input" : "dump"},
            {"max_abs", json_number(j.judged_max_abs)},
            {"max_rel", json_number(j.judged_max_rel)},
            {"tolerance", json_number(j.judged_tolerance)}}}};
}

ojson divergence_json(const Divergence& d) {
  ojson index = ojson::object(), labels = ojson::object();
  for (std::size_t a = 0; a < d.index.size(); ++a) {
    index[d.axes[a]] = d.index[a];
    labels[d.axes[a]] = d.labels[a];
  }
  ojson codes = ojson::array(), findings = ojson::array();
  for (const Diagnosis& g : d.diagnosis) {
    const std::string code(to_string(g.code));
    bool seen = false;
    for (const auto& c : codes) seen = seen || c == code;
    if (!seen) codes.push_back(code);
    findings.push_back({{"code", code}, {"mistake", g.mistake}, {"finding", g.finding}});
  }
  const DivergenceWindow& w = d.window;
  return {{"step", std::string(step_info(d.step).name)},
          {"index", index},
          {"labels", labels},
          {"ours", json_number(d.ours)},
          {"dumped", json_number(d.dumped)},
          {"tolerance", json_number(d.tolerance)},
          {"out_of_tolerance", d.out_of_tolerance},
          {"elements", d.elements},
          {"window",
           {{"row_axis", w.row_axis},
            {"col_axis", w.col_axis},
            {"rows", w.rows},
            {"cols", w.cols},
            {"row_labels", w.row_labels},
            {"col_labels", w.col_labels},
            {"ours", matrix(w.ours)},
            {"dumped", matrix(w.dumped)}}},
          {"diagnosis", codes},
          {"findings", findings}};
}

}  // namespace

std::string diff_to_json(const DiffResult& r, const std::string& generator, const std::string& input,
                         const std::string& dumps) {
  ojson steps = ojson::array();
  for (const StepJudgement& j : r.steps) steps.push_back(step_json(j));
  ojson doc = {{"format", "attn-trace.diff"},
               {"version", diff_format_version},
               {"generator", generator},
               {"input", input},
               {"dumps", dumps},
               {"dtype", std::string(name_of(r.dtype))},
               {"steps", steps},
               {"first_divergence", r.first ? divergence_json(*r.first) : ojson(nullptr)},
               {"notes", r.notes}};
  // Only with gradients dumped: where dY came from (a dump of forward steps reads as it always has).
  if (!r.upstream.empty()) doc["upstream"] = r.upstream;
  // Strings from the user's files (names, tokens) may hold anything: kept valid UTF-8.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace attn
