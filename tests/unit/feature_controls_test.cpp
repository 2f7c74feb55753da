// The explorer's controls of the input's optional features come from the features table
// (io/features.hpp: feature_controls_json): one per feature the page offers, in the table's order, each
// of a kind the page's script draws (toggle, number, fields). The expected list is what the page offered
// when its script listed the controls by hand: RoPE and ALiBi boxes, the cap's number, the sinks' box and
// dropout's p and seed, with the ids and labels its browser tests use.

#include <catch2/catch.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/features.hpp"

TEST_CASE("the explorer's feature controls: one per offered feature, in the table's order, of a kind it draws",
          "[features]") {
  const nlohmann::json controls = nlohmann::json::parse(attn::feature_controls_json());
  REQUIRE(controls.is_array());
  REQUIRE(controls.size() == 5);
  const auto at = [&controls](std::size_t k) -> const nlohmann::json& { return controls.at(k); };

  CHECK(at(0) == nlohmann::json::parse(R"({"key": "rope", "label": "RoPE", "kind": "toggle", "on": {}})"));
  CHECK(at(1) == nlohmann::json::parse(R"({"key": "alibi", "label": "ALiBi", "kind": "toggle", "on": true})"));
  CHECK(at(2) == nlohmann::json::parse(R"({"key": "softcap", "label": "softcap", "kind": "number"})"));
  CHECK(at(3) == nlohmann::json::parse(R"({"key": "sinks", "label": "sinks", "kind": "toggle", "on": true})"));
  CHECK(at(4) == nlohmann::json::parse(R"({"key": "dropout", "label": "dropout", "kind": "fields",
    "fields": [{"name": "p", "label": "dropout p"}, {"name": "seed", "label": "seed", "default": 0}]})"));

  // every control is of a kind the page draws, and names a key the loader reads
  std::set<std::string> keys;
  for (const std::string_view key : attn::feature_keys()) keys.emplace(key);
  for (const nlohmann::json& c : controls) {
    CHECK(keys.count(c.at("key").get<std::string>()) == 1);
    const std::string kind = c.at("kind").get<std::string>();
    CHECK((kind == "toggle" || kind == "number" || kind == "fields"));
    if (kind == "toggle") CHECK(c.contains("on"));
    if (kind == "fields") CHECK(!c.at("fields").empty());
  }
}
