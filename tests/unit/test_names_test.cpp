// CTest runs each Catch2 test by its name (catch_discover_tests), and CMake reads the list of names
// as a CMake list: a ';' in a name splits it into names that match no test, and an unbalanced '[' or
// ']' merges the names around it, so those tests would pass without ever running. No test name may
// hold either, nor start with a dash, which the test program would read as an option.

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;

TEST_CASE("No test name holds a semicolon or an unbalanced bracket, or starts with a dash, which CTest would not run",
          "[tests]") {
  const std::regex test_case(R"re((?:TEMPLATE_)?TEST_CASE\(\s*"((?:[^"\\]|\\.)*)")re");
  std::size_t names = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(ATTN_SOURCE_DIR) / "tests")) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator m(source.begin(), source.end(), test_case), end; m != end; ++m) {
      const std::string name = (*m)[1];
      ++names;
      int depth = 0;
      bool balanced = true;
      for (const char c : name) {
        depth += c == '[' ? 1 : c == ']' ? -1 : 0;
        balanced = balanced && depth >= 0;
      }
      INFO(entry.path().filename().string() << ": \"" << name << "\"");
      CHECK(name.find(';') == std::string::npos);
      CHECK_FALSE(name.starts_with("-"));  // passed to the test program, it reads as an option
      CHECK((balanced && depth == 0));
    }
  }
  CHECK(names > 300);  // the pattern finds the tests
}
