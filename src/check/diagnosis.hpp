#pragma once
// diff's diagnosis, inside check/: where the first step wrong itself goes wrong (its worst element and a
// window around it) and which of the catalogue's mistakes, or which less precise dtype, reproduces it,
// each with a measured sentence on what it shows.

#include "check/diff.hpp"
#include "check/judge.hpp"
#include "check/readings.hpp"

namespace attn::check {

// Where step `s` first goes wrong: the worst element, a window around it, and the diagnosis.
Divergence divergence_at(const Problem& p, const ReadDump& read, Step s, const Tensor<double>& as_dumped,
                         const Ours& resumed, const Judged& local, DType dtype);

}  // namespace attn::check
