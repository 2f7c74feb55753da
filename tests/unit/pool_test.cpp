// The fast path's threads: every parallel_for shares one pool, so the projections, naive, flash and the
// backward on T threads never have more than T − 1 workers besides the caller, from call to call and
// nested. The threads are counted by the kernel (/proc/self/task), sampled while the work runs.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/fast.hpp"
#include "engine/fast_backward.hpp"
#include "kernel/kernels.hpp"
#include "mask_spec.hpp"
#include "support.hpp"

using namespace attn;

namespace {

// The threads of this process, as the kernel lists them.
std::size_t threads_now() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++count;
  return count;
}

// The most threads this process had while `work` ran, sampled every 50 µs by one more thread (counted).
template <class Work>
std::size_t most_threads_during(const Work& work) {
  std::atomic<bool> done{false};
  std::atomic<std::size_t> most{0};
  std::thread sampler([&] {
    while (!done) {
      most = std::max(most.load(), threads_now());
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  work();
  done = true;
  sampler.join();
  return most;
}

}  // namespace

TEST_CASE("parallel_for reuses one pool: calls after the first start no thread, and a nested call runs alone",
          "[fast][threads]") {
  kernel::parallel_for(64, 3, [](std::size_t, std::size_t) {});  // the pool has at least 2 workers now
  const std::size_t workers = kernel::pool_threads();
  REQUIRE(workers >= 2);
  const std::size_t before = threads_now();
  std::mutex lock;
  std::set<std::size_t> ids;
  std::atomic<std::size_t> items{0}, nested{0}, nested_elsewhere{0};  // Catch's CHECK is for this thread only
  for (int call = 0; call < 50; ++call)
    kernel::parallel_for(64, 3, [&](std::size_t, std::size_t worker) {
      {
        const std::lock_guard<std::mutex> hold(lock);
        ids.insert(worker);
      }
      ++items;
      // from inside a job: on this thread alone, every item, worker 0
      kernel::parallel_for(4, 3, [&](std::size_t, std::size_t inner) {
        if (inner != 0) ++nested_elsewhere;
        ++nested;
      });
    });
  CHECK(items == 50 * 64);
  CHECK(nested == 50 * 64 * 4);
  CHECK(nested_elsewhere == 0);
  CHECK(*ids.rbegin() <= 2);                 // workers 0, 1 and 2 of 3
  CHECK(kernel::pool_threads() == workers);  // no worker started
  CHECK(threads_now() == before);            // and none left behind
  kernel::parallel_for(8, 1, [](std::size_t, std::size_t worker) { CHECK(worker == 0); });
}

TEST_CASE("The fast path on 2 threads runs on the caller and one pool worker: projections, naive, flash, backward",
          "[fast][threads]") {
  std::mt19937 rng(5);
  test::Dims d;
  d.n = 400;
  d.d_model = 64;
  d.h = 4;
  d.g = 2;
  d.d_k = 16;
  d.d_v = 16;
  d.d_out = 64;
  Problem p = test::random_problem(rng, d);
  test::install_mask(rng, p, MaskKind::causal, Align::top_left);
  REQUIRE(kernel::threads_for(double(d.n * d.n * d.d_k), 2) == 2);  // every product is worth both threads
  kernel::parallel_for(2, 2, [](std::size_t, std::size_t) {});      // the pool's first worker, if it had none
  const std::size_t workers = kernel::pool_threads();
  const std::size_t before = threads_now();
  const std::size_t most = most_threads_during([&] {
    for (int round = 0; round < 3; ++round) {
      for (const Engine engine : {Engine::naive, Engine::flash}) (void)run_fast<float>(p, engine, {{16, 32}, 2});
      (void)run_fast_backward<float>(p, FastOptions{{16, 32}, 2});
    }
  });
  CHECK(kernel::pool_threads() == workers);
  CHECK(most <= before + 1);  // the sampler itself, and not one thread more
  CHECK(threads_now() == before);
}
