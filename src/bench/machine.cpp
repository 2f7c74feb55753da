#include "bench/machine.hpp"

#include <algorithm>
#include <fstream>
#include <thread>
#include <vector>

#include "bench/timing.hpp"
#include "kernel/kernels.hpp"

namespace attn {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    return name;
  }
  return "";
}

namespace {

// Keeps the loops' results alive, so the compiler cannot drop them.
volatile double measured_sink = 0;

// One round: `threads` threads, each `iterations` rounds of the FMA loop; the seconds from the first
// start to the last join, and the floating-point operations of all of them.
double timed_round(kernel::Isa isa, std::size_t threads, std::size_t iterations, double& flops) {
  std::vector<double> results(threads);
  std::vector<std::size_t> per_iteration(threads);
  const Clock::time_point start = Clock::now();
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t)
      pool.emplace_back([&, t] { results[t] = kernel::fma_loop(isa, iterations, per_iteration[t]); });
    results[0] = kernel::fma_loop(isa, iterations, per_iteration[0]);
  }
  const double elapsed = seconds_since(start);
  flops = 0;
  for (std::size_t t = 0; t < threads; ++t) {
    measured_sink = measured_sink + results[t];
    flops += double(iterations) * double(per_iteration[t]);
  }
  return elapsed;
}

}  // namespace

FmaPeak measure_fma_peak(std::size_t threads) {
  FmaPeak peak;
  peak.threads = std::max<std::size_t>(threads, 1);
  const kernel::Isa isa = kernel::isa();  // the fast kernels' set: ATTN_KERNELS=avx2 measures AVX2's peak
  peak.kernels = std::string(kernel::name_of(isa));
  // calibrate: the iterations of about 40 ms, from a round of 2^18
  double flops = 0;
  std::size_t iterations = std::size_t{1} << 18;
  const double first = timed_round(isa, peak.threads, iterations, flops);
  if (first > 0) iterations = std::max<std::size_t>(1024, static_cast<std::size_t>(double(iterations) * 0.04 / first));
  double single = 0;  // one thread's rate, what `threads` of them should come near
  if (peak.threads > 1) {
    const double s = timed_round(isa, 1, iterations, flops);
    if (s > 0) single = flops / s / 1e9;
  }
  const double expected = 0.9 * double(peak.threads) * single;
  for (int round = 0; round < 14 && (round < 5 || peak.gflops < expected); ++round) {
    const double s = timed_round(isa, peak.threads, iterations, flops);
    if (s > 0) peak.gflops = std::max(peak.gflops, flops / s / 1e9);
  }
  return peak;
}

}  // namespace attn
