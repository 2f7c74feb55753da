// The fast path's GEMM (kernel::gemm) against OpenBLAS and BLIS on the projections' shapes, float32, on 1
// and 2 threads, in one run: GFLOP/s, the share of the FMA peak measured in the same run, and each
// library's time over the best. Prints figures and asserts nothing but that the three agree. kernel::gemm
// is BLIS itself since the measurement in docs/performance.md ("The products: BLIS"), called once per
// band of rows on the shared pool's threads: what this now compares is that way of threading it against
// each library's own.
//
// The libraries are opened with dlopen, each on its own (RTLD_LOCAL), so that both export cblas_sgemm
// without clashing and the build needs neither: Debian's pthread variants by default
// (libopenblas0-pthread, libblis4-pthread), or the files named by --openblas and --blis. A library that is
// not there is left out of the table and said so.
//
// usage: gemm_compare [--repeat R] [--openblas PATH] [--blis PATH]

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/machine.hpp"
#include "kernel/kernels.hpp"
#include "ops/random.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// CBLAS's row-major, untransposed C = alpha·A·B + beta·C.
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
constexpr int row_major = 101, no_trans = 111;

struct Library {
  std::string name;
  std::string path;
  Sgemm sgemm = nullptr;
  std::function<void(int)> set_threads;
};

// The library at `path` (its cblas_sgemm and its way of setting threads), or nothing when it cannot be opened.
std::optional<Library> open_library(const std::string& name, const std::string& path, const char* threads_symbol,
                                    bool threads_are_64bit) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    fmt::print("{}: not found ({}): left out\n", name, dlerror());
    return std::nullopt;
  }
  Library lib{name, path, reinterpret_cast<Sgemm>(dlsym(handle, "cblas_sgemm")), {}};
  void* set = dlsym(handle, threads_symbol);
  if (lib.sgemm == nullptr || set == nullptr) {
    fmt::print("{}: {} has no cblas_sgemm or {}: left out\n", name, path, threads_symbol);
    return std::nullopt;
  }
  if (threads_are_64bit) {
    auto* f = reinterpret_cast<void (*)(std::int64_t)>(set);
    lib.set_threads = [f](int t) { f(t); };
  } else {
    auto* f = reinterpret_cast<void (*)(int)>(set);
    lib.set_threads = [f](int t) { f(t); };
  }
  return lib;
}

// One projection-like shape: `count` products of (M × K)·(K × N), each with its own A, B and C.
struct Shape {
  std::string name;
  std::size_t count, M, N, K;
  double flops() const { return 2.0 * double(count) * double(M) * double(N) * double(K); }
};

struct Operands {
  std::vector<float> a, b, c;
};

Operands operands(const Shape& s, std::uint64_t seed) {
  attn::SplitMix64 random(seed);
  Operands o;
  o.a.resize(s.count * s.M * s.K);
  o.b.resize(s.count * s.K * s.N);
  o.c.assign(s.count * s.M * s.N, 0.0f);
  for (float& x : o.a) x = static_cast<float>(random.uniform() * 2 - 1);
  for (float& x : o.b) x = static_cast<float>((random.uniform() * 2 - 1) / std::sqrt(double(s.K)));
  return o;
}

// The median of `samples` timings of `once`, each sample as many calls as fill about 50 ms.
double median_seconds(const std::function<void()>& once, std::size_t samples) {
  once();  // warm: pages touched, thread pools started
  const Clock::time_point t0 = Clock::now();
  once();
  const double one = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto calls = static_cast<std::size_t>(std::max(1.0, 0.05 / std::max(one, 1e-9)));
  std::vector<double> times;
  for (std::size_t s = 0; s < samples; ++s) {
    const Clock::time_point start = Clock::now();
    for (std::size_t k = 0; k < calls; ++k) once();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / double(calls));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t repeat = 7;
  std::string openblas = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0";
  std::string blis = "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) repeat = std::max<std::size_t>(1, std::strtoul(argv[++i], nullptr, 10));
    else if (arg == "--openblas" && i + 1 < argc) openblas = argv[++i];
    else if (arg == "--blis" && i + 1 < argc) blis = argv[++i];
    else {
      fmt::print(stderr, "usage: gemm_compare [--repeat R] [--openblas PATH] [--blis PATH]\n");
      return 2;
    }
  }
  std::vector<Library> libraries;
  if (auto lib = open_library("OpenBLAS", openblas, "openblas_set_num_threads", false)) libraries.push_back(*lib);
  if (auto lib = open_library("BLIS", blis, "bli_thread_set_num_threads", true)) libraries.push_back(*lib);

  const attn::kernel::Isa isa = attn::kernel::isa();
  const std::vector<Shape> shapes = {
      {"X·W (q, k, v or output), n 4096", 1, 4096, 512, 512}, {"X·[W_q W_k W_v] fused, n 4096", 1, 4096, 1536, 512},
      {"batched: 8 items of 512", 8, 512, 512, 512},          {"cross: a context of 1024", 1, 1024, 512, 512},
      {"one head's width: n 4096, d_k 64", 1, 4096, 64, 512},
  };
  fmt::print("gemm_compare: float32 C = A·B, row-major; median of {} samples\n", repeat);
  fmt::print(
      "ours: kernel::gemm, {} on a band of rows per thread of the shared pool (one library call each); "
      "OpenBLAS and BLIS: one call on the library's own threads\n",
      attn::kernel::products_name());
  fmt::print("machine: {}\n", attn::cpu_model());
  for (const int threads : {1, 2}) {
    const attn::FmaPeak peak = attn::measure_fma_peak(std::size_t(threads));
    fmt::print("\n{} thread{}: FP32 FMA peak {:.1f} GFLOP/s ({})\n", threads, threads == 1 ? "" : "s", peak.gflops,
               peak.kernels);
    fmt::print("  {:<34} {:>10} {:>12} {:>8} {:>10}\n", "shape", "library", "GFLOP/s", "% peak", "time/best");
    for (const Shape& s : shapes) {
      Operands o = operands(s, 7);
      std::vector<std::pair<std::string, double>> rows;  // library, seconds
      std::vector<float> ours_c;
      const auto run_ours = [&] {
        for (std::size_t k = 0; k < s.count; ++k)
          attn::kernel::gemm(isa,
                             attn::kernel::product(s.M, s.N, s.K, o.a.data() + k * s.M * s.K, std::ptrdiff_t(s.K), 1,
                                                   o.b.data() + k * s.K * s.N, std::ptrdiff_t(s.N), 1,
                                                   o.c.data() + k * s.M * s.N, std::ptrdiff_t(s.N)),
                             std::size_t(threads));
      };
      rows.emplace_back("ours", median_seconds(run_ours, repeat));
      ours_c = o.c;
      for (const Library& lib : libraries) {
        lib.set_threads(threads);
        std::fill(o.c.begin(), o.c.end(), 0.0f);
        const auto run_lib = [&] {
          for (std::size_t k = 0; k < s.count; ++k)
            lib.sgemm(row_major, no_trans, no_trans, int(s.M), int(s.N), int(s.K), 1.0f, o.a.data() + k * s.M * s.K,
                      int(s.K), o.b.data() + k * s.K * s.N, int(s.N), 0.0f, o.c.data() + k * s.M * s.N, int(s.N));
        };
        rows.emplace_back(lib.name, median_seconds(run_lib, repeat));
        double worst = 0;  // the same product: every entry within float32's rounding of a 512-term sum
        for (std::size_t i = 0; i < o.c.size(); ++i) worst = std::max(worst, double(std::abs(o.c[i] - ours_c[i])));
        if (worst > 1e-4) {
          fmt::print(stderr, "{} and ours differ by {} on {}\n", lib.name, worst, s.name);
          return 1;
        }
      }
      double best = rows.front().second;
      for (const auto& row : rows) best = std::min(best, row.second);
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const double gflops = s.flops() / rows[r].second / 1e9;
        fmt::print("  {:<34} {:>10} {:>12.1f} {:>7.0f}% {:>9.2f}×\n", r == 0 ? s.name : "", rows[r].first, gflops,
                   100 * gflops / peak.gflops, rows[r].second / best);
      }
    }
  }
  return 0;
}
