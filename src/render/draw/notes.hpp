#pragma once
// Sentences about a trace that more than one picture says (the terminal trace, the HTML report), kept
// in one place so that they say it in the same words.

#include <optional>
#include <string>

#include "trace/trace.hpp"

namespace attn {

// Why d_masked is 0 everywhere, when it is: every row of d_weights holds one number (to a part in 10⁹),
// so dA − D = 0 in every row. Nothing when the trace has no d_weights or a row of it varies.
std::optional<std::string> softmax_backward_note(const Trace& trace);

}  // namespace attn
