#pragma once
// `attn-trace diff` as values: a user's dumped steps judged step by step against ours, the first that
// goes wrong and the known mistake that reproduces it (check/diff.hpp), rendered as text and as JSON.
// The command line reads the dumps from files, the Python module from arrays; both ask here.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/dump_folder.hpp"
#include "model/problem.hpp"
#include "check/diff.hpp"
#include "request/trace_options.hpp"

namespace attn {

struct DiffOptions {
  TraceOptions trace;                      // FILE, --dtype, --max-memory, --precision
  std::vector<std::string> names;          // --name STEP=NAME
  std::optional<std::uint64_t> grad_seed;  // --grad-seed: dY drawn as run --backward --grad-seed draws it
  bool dtype_given = false;                // --dtype was given; otherwise ours runs in the dump's least precise
};

struct Diffed {
  DiffResult result;     // the judgement, which render/pages/diff_page.hpp draws (render_diff)
  std::string title;     // its page's title: the input against the dumps
  std::string json;      // as diff --json writes it (format attn-trace.diff)
  bool differs = false;  // a step differs: diff's exit code 1
};

// The problem the dumps are judged against: the input's text `text` (an input, or a trace saved by
// --json), or, with none, the file the options name; dY drawn by --grad-seed. Refused, in this order:
// a --name that is no STEP=NAME (UsageError), the input, diff holding more than --max-memory (InputError).
std::shared_ptr<const Problem> diff_problem(const DiffOptions& options, const std::optional<std::string>& text);

// `dumps` (named `dumps_name` in messages) judged against `problem`.
Diffed diff_for(const DiffOptions& options, const std::shared_ptr<const Problem>& problem, std::vector<NamedDump> dumps,
                const std::string& dumps_name);

}  // namespace attn
