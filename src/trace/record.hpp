#pragma once
// Run and record: the one way every command (and the fuzzer) runs an engine and gets its trace.

#include <cstdint>
#include <memory>

#include "model/problem.hpp"
#include "model/run.hpp"
#include "trace/trace.hpp"

namespace attn {

struct RunRequest {
  Engine engine = Engine::naive;
  DType dtype = DType::float32;
  TileSize tile_size;     // the flash pass's tiles (flash, both and compare)
  StepFilter filter;      // which steps, head and tiles the trace keeps
  bool backward = false;  // the backward pass too (run --backward, compare --backward)
};

// `problem` with its upstream gradient dY drawn from a standard normal with `seed` (--grad-seed), in
// place of the input's or of 1 everywhere (engine/backward.hpp).
Problem with_grad_seed(Problem problem, std::uint64_t seed);

// Runs request.engine in request.dtype on `problem` and records what request.filter keeps. With
// Engine::both the trace holds naive's steps and the flash pass's tiles and result. With
// request.backward the backward steps follow the forward ones (and with flash or both, its tiles).
Trace record_run(const std::shared_ptr<const Problem>& problem, const RunRequest& request);

// attn-trace compare: naive and flash in request.dtype and a wider naive reference; the trace holds
// naive's steps, the flash pass and the comparison (Trace::compare). request.engine is not used.
Trace record_compare(const std::shared_ptr<const Problem>& problem, const RunRequest& request);

}  // namespace attn
