// How long loading an input takes (issue 14): reading the file, then parsing and validating it into a
// Problem, as every command that takes an input does. Prints the best of REPEATS wall-clock times of
// each part and of the whole, in seconds. bench/load_speed.sh compares the whole with Python's json.load.
//
// usage: build/release/bench/load_bench INPUT.json [REPEATS]   (default 3)

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "io/load.hpp"
#include "io/read.hpp"

namespace {

// The fastest of `repeats` runs of `work`, in seconds.
template <class Work>
double best_seconds(int repeats, Work&& work) {
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    work();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (i == 0 || took.count() < best) best = took.count();
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2 || argc > 3) {
    fmt::print(stderr, "usage: {} INPUT.json [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc == 3 ? std::max(1, std::atoi(argv[2])) : 3;

  std::size_t bytes = 0;
  const double read = best_seconds(repeats, [&] { bytes = attn::read_text(path).size(); });
  const std::string text = attn::read_text(path);
  const double parse = best_seconds(repeats, [&] { (void)attn::load_problem(text, path); });
  const double whole = best_seconds(repeats, [&] { (void)attn::load_problem_file(path); });

  fmt::print("{}: {:.1f} MB, best of {}\n", path, static_cast<double>(bytes) / 1e6, repeats);
  fmt::print("  read_text:                {:.3f} s\n", read);
  fmt::print("  load_problem (text):      {:.3f} s\n", parse);
  fmt::print("  load_problem_file:        {:.3f} s\n", whole);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "{}\n", e.what());
  return 1;
}
