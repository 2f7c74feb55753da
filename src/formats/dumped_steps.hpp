#pragma once
// DUMPS of `attn-trace diff` as the steps they hold: each tensor named for a step (or an alias of a
// gradient, or a name --name maps), checked against the problem before anything is computed
// (docs/diff.md, "What diff reads"). The command and the fuzz target for diff both read dumps here.

#include <map>
#include <string>
#include <vector>

#include "check/diff.hpp"
#include "formats/dump_folder.hpp"
#include "model/problem.hpp"
#include "model/run.hpp"

namespace attn {

struct Dumped {
  std::vector<DumpedStep> steps;  // in the order of the dump
  DType least = DType::float64;   // the least precise dtype among them: what ours runs in by default
  bool gradients = false;         // some are gradients of the backward pass
};

// The tensors of `dumps` as steps of `p`. `names` maps a dump's name to its step (--name STEP=NAME);
// otherwise a name is a step's or a gradient's alias (gradient_alias). Refused with an InputError naming
// `dumps_name`: a name that is no step, a step that `p` (read from `file_name`) has not, a step twice, a
// shape that fits no reading of its step (fits_some_reading), or a mapped name the dump does not hold.
Dumped dumped_steps(const Problem& p, std::vector<NamedDump> dumps, const std::map<std::string, Step>& names,
                    const std::string& dumps_name, const std::string& file_name);

}  // namespace attn
