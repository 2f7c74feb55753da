#pragma once
// How diff reads a dump, inside check/: each dumped tensor into its step's canonical shape, in the layout
// nearest ours, or as a later step it already holds (a fused kernel's scores with the scale in them,
// weights before the division); the notes that say how.

#include <array>
#include <string>
#include <vector>

#include "check/diff.hpp"
#include "check/judge.hpp"

namespace attn::check {

// The dump read into canonical shapes, one slot per step: the step it holds.
struct ReadDump {
  Given given;     // what our steps resume from: the masked step's large negatives read as -inf
  Given as_given;  // the same, with the masked step's large negatives left as they were dumped
  std::array<const DumpedStep*, table_size> source{};
  std::array<DumpLayout, table_size> layouts{};
  std::array<Fusion, table_size> fusion{};
  std::vector<std::string> notes;  // one per dump read as another step than its name's
};

// Every dumped step read, in pipeline order, each against ours from the dump's earlier steps.
ReadDump read_dump(const Problem& p, const std::vector<DumpedStep>& dumped, const Ours& full, DType dtype);

// The notes on how step `s` was read: large negatives taken as masked, tokens before heads.
void add_reading_notes(const StepJudgement& j, const DumpLayout& layout, std::vector<std::string>& notes);

}  // namespace attn::check
