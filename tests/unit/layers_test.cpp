// The layering of src/ (src/layers.txt, shown in docs/architecture.md): every #include points down
// the list of layers, never up, and never into a layer that a line forbids.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace {

struct Layer {
  std::string name;
  std::vector<std::string> never;
};

std::vector<Layer> read_layers() {
  std::ifstream in(std::string(ATTN_SOURCE_DIR) + "/src/layers.txt");
  REQUIRE(in);
  std::vector<Layer> layers;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    Layer layer;
    words >> layer.name;
    std::string word;
    if (words >> word) {
      REQUIRE(word == "never:");
      while (words >> word) layer.never.push_back(word);
    }
    layers.push_back(layer);
  }
  return layers;
}

}  // namespace

TEST_CASE("Every include in src/ points down the layers of src/layers.txt", "[layers]") {
  const std::vector<Layer> layers = read_layers();
  REQUIRE(layers.size() >= 8);
  std::map<std::string, std::size_t> level;
  for (std::size_t i = 0; i < layers.size(); ++i) level[layers[i].name] = i;

  const fs::path src = fs::path(ATTN_SOURCE_DIR) / "src";
  const std::regex include(R"(^\s*#\s*include\s*"([^/"]+)/[^"]+")");
  std::vector<std::string> wrong;
  std::size_t checked = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(src)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".hpp" && ext != ".cpp")) continue;
    const std::string here = fs::relative(e.path(), src).begin()->string();
    const std::string file = "src/" + fs::relative(e.path(), src).generic_string();
    if (!level.count(here)) {
      wrong.push_back(file + ": its folder " + here + " is not a layer of src/layers.txt");
      continue;
    }
    std::ifstream in(e.path());
    std::size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string there = m[1];
      if (there == "attn") continue;  // generated at build time (attn/version.hpp)
      ++checked;
      const std::string where = file + ":" + std::to_string(number) + ": " + line;
      if (!level.count(there)) {
        wrong.push_back(where + " (" + there + " is not a layer)");
        continue;
      }
      const Layer& layer = layers[level[here]];
      if (level[there] > level[here])
        wrong.push_back(where + " (" + here + " may not include " + there + ", a layer above it)");
      else if (std::find(layer.never.begin(), layer.never.end(), there) != layer.never.end())
        wrong.push_back(where + " (" + here + " never includes " + there + ")");
    }
  }
  INFO(checked << " includes checked");
  CHECK(checked > 50);
  std::string list;
  for (const std::string& w : wrong) list += w + "\n";
  INFO(list);
  CHECK(wrong.empty());
}

TEST_CASE("docs/architecture.md shows the layers of src/layers.txt in the same order", "[layers]") {
  std::ifstream in(std::string(ATTN_SOURCE_DIR) + "/docs/architecture.md");
  REQUIRE(in);
  // The layer table's rows start with "| `name` |".
  const std::regex row(R"(^\|\s*`([a-z_]+)`\s*\|)");
  std::vector<std::string> shown;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) shown.push_back(m[1]);
  }
  std::vector<std::string> listed;
  for (const Layer& l : read_layers()) listed.push_back(l.name);
  CHECK(shown == listed);
}

TEST_CASE("src/request reads only the options the pages share of render, as docs/architecture.md says", "[layers]") {
  // request works out what a command asks for and returns it as data; render draws it. Of render it may read
  // render/draw/options.hpp, the options both sides hold, and nothing else.
  const fs::path src = fs::path(ATTN_SOURCE_DIR) / "src";
  const std::regex include(R"re(^\s*#\s*include\s*"(render/[^"]+)")re");
  std::vector<std::string> wrong;
  std::size_t files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(src / "request")) {
    if (!e.is_regular_file()) continue;
    ++files;
    std::ifstream in(e.path());
    std::size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      std::smatch m;
      if (std::regex_search(line, m, include) && m[1] != "render/draw/options.hpp")
        wrong.push_back("src/request/" + e.path().filename().string() + ":" + std::to_string(number) + " includes " +
                        m[1].str());
    }
  }
  CHECK(files > 4);
  std::string all;
  for (const std::string& w : wrong) all += w + "\n";
  INFO(all);
  CHECK(wrong.empty());
}
