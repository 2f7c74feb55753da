// attn-trace: shows, number by number, how transformer attention works.
// A thin main: parse the command line, run the chosen command, turn every failure into one line.

#include <cstdio>
#include <exception>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/output.hpp"
#include "json/error.hpp"
#include "help_format.hpp"
#include "options.hpp"
#include "parse_errors.hpp"
#include "render/draw/text.hpp"
#include "text/visible.hpp"

namespace {

// Exit codes (docs/reliability.md, "Exit codes"): 2 for input or usage that cannot be used, 3 for output that
// could not be written, 128 + 13 (as if killed by SIGPIPE) when the reader of a pipe went away.
constexpr int input_failed = 2;
constexpr int output_failed = 3;
constexpr int broken_pipe = 128 + 13;

// One line on stderr; whatever in it came from a file or the command line is made visible, not sent
// to the terminal. Nothing here throws: when stderr is closed or full the line is lost, the exit code
// is not.
int fail(std::string_view message, int code = input_failed) noexcept {
  std::fflush(stdout);
  try {
    const std::string text = attn::visible(message);
    attn::write_stderr(fmt::format("attn-trace: error: {}\n", attn::utf8_terminal() ? text : attn::to_ascii(text)));
  } catch (...) {
    attn::write_stderr("attn-trace: error\n");  // out of memory for the message itself
  }
  return code;
}

int parse_and_run(CLI::App& app, int argc, char** argv, const std::vector<attn::cli::Runner>& runners) {
  // Help and version text goes out like every other output: checked, and naming stdout when it fails.
  const auto print = [&](const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int code = app.exit(e, out, err);
    // In ASCII a symbol can take more columns than it did (√ is "sqrt"): fitted again after.
    attn::write_stdout(attn::utf8_terminal() ? out.str()
                                             : attn::cli::fit_help(attn::to_ascii(out.str()), attn::terminal_width(),
                                                                   app.get_formatter()->get_column_width()));
    return code;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return print(e);
  } catch (const CLI::CallForAllHelp& e) {
    return print(e);
  } catch (const CLI::CallForVersion& e) {
    return print(e);
  } catch (const CLI::ParseError& e) {
    return fail(attn::cli::parse_error_message(app, e, std::vector<std::string>(argv + 1, argv + argc)));
  }
  if (app.get_subcommands().empty()) {
    return fail(attn::cli::no_command_message(app));
  }
  for (const auto& runner : runners) {
    const int code = runner();
    if (code >= 0) return code;
  }
  return fail("no command ran");
}

}  // namespace

int main(int argc, char** argv) {
  attn::reserve_standard_descriptors();
  attn::install_signal_cleanup();
  CLI::App app("attn-trace: shows, number by number, how transformer attention works", "attn-trace");
  // Before the commands are added: each takes its formatter from the app when it is made.
  const auto help = std::make_shared<attn::cli::HelpFormatter>(attn::terminal_width());
  app.formatter(help);
  app.set_version_flag("--version", fmt::format("attn-trace {}", attn::version));
  app.require_subcommand(0, 1);
  app.footer(
      "Start with:\n"
      "  attn-trace example | attn-trace run -     the worked example, \"The cat sat\", every step\n"
      "  attn-trace example > my.json              an input to edit\n"
      "  attn-trace example --list                 the other bundled examples\n"
      "Run 'attn-trace COMMAND --help' for a command's options.");
  const std::vector<attn::cli::Runner> runners = {
      attn::cli::add_run(app),        attn::cli::add_compare(app), attn::cli::add_decode(app),
      attn::cli::add_properties(app), attn::cli::add_explain(app), attn::cli::add_scaling(app),
      attn::cli::add_show(app),       attn::cli::add_plot(app),    attn::cli::add_report(app),
      attn::cli::add_explore(app),    attn::cli::add_example(app), attn::cli::add_new(app),
      attn::cli::add_diff(app),       attn::cli::add_import(app),  attn::cli::add_bench(app),
      attn::cli::add_steps(app)};

  try {
    const int code = parse_and_run(app, argc, argv, runners);
    attn::finish_stdout();
    return code;
  } catch (const attn::BrokenPipe&) {
    return broken_pipe;  // quiet, like every filter whose reader stopped reading
  } catch (const attn::OutputError& e) {
    return fail(e.what(), output_failed);
  } catch (const attn::InputError& e) {
    return fail(e.what());
  } catch (const attn::UsageError& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory: the input is too large for this machine");
  } catch (const std::exception& e) {
    return fail(fmt::format("internal error: {}", e.what()));
  }
}
