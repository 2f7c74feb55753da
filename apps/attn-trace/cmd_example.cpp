// attn-trace example [NAME]: print a bundled input to stdout.

#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "io/examples.hpp"
#include "io/output.hpp"
#include "render/draw/text.hpp"
#include "request/terminal_caps.hpp"
#include "text/nearest.hpp"

namespace attn::cli {

namespace {

struct ExampleOptions {
  std::string name = "the-cat-sat";
  bool list = false;
};

int run(const ExampleOptions& o) {
  if (o.list) {
    std::string list;
    // The descriptions under their own column, so that the names stand out at any width.
    const std::size_t width = terminal_width();
    for (const Example& e : examples())
      for (const std::string& line :
           wrap(fmt::format("{:<20} {}", e.name, example_description(e)), width, std::string(21, ' ')))
        list += line + "\n";
    write_stdout(list);
    return 0;
  }
  const Example* example = find_example(o.name);
  if (example == nullptr) {
    std::vector<std::string_view> names;
    for (const Example& e : examples()) names.push_back(e.name);
    throw UsageError(fmt::format("example: no example \"{}\"{}; the examples are {}", o.name,
                                 did_you_mean(o.name, names), fmt::join(names, ", ")));
  }
  write_stdout(example->text);
  return 0;
}

}  // namespace

Runner add_example(CLI::App& app) {
  auto options = std::make_shared<ExampleOptions>();
  CLI::App* cmd = app.add_subcommand("example", "print a bundled input (default: the-cat-sat) to stdout");
  cmd->add_option("NAME", options->name, "which example")->default_str("the-cat-sat");
  cmd->add_flag("--list", options->list, "list the examples with what each shows");
  cmd->footer(
      "Example:\n"
      "  attn-trace example > cat.json          the worked example, to edit\n"
      "  attn-trace example gpt-causal | attn-trace run -\n"
      "  attn-trace example --list");
  return [cmd, options] { return cmd->parsed() ? run(*options) : -1; };
}

}  // namespace attn::cli
