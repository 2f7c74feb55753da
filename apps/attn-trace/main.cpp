// attn-trace: shows, number by number, how transformer attention works.
// A thin main: parse the command line, run the chosen command, turn every failure into one line.

#include <cstdio>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "attn/version.hpp"
#include "command.hpp"
#include "io/error.hpp"

namespace {

int fail(std::string_view message) {
  std::fflush(stdout);
  fmt::print(stderr, "attn-trace: error: {}\n", message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("attn-trace: shows, number by number, how transformer attention works", "attn-trace");
  app.set_version_flag("--version", fmt::format("attn-trace {}", attn::version));
  app.require_subcommand(0, 1);
  app.footer(
      "Start with:\n"
      "  attn-trace run data/the_cat_sat.json      the worked example, every step\n"
      "  attn-trace example > my.json              an input to edit\n"
      "Run 'attn-trace COMMAND --help' for a command's options.");
  const std::vector<attn::cli::Runner> runners = {attn::cli::add_run(app), attn::cli::add_compare(app), attn::cli::add_show(app), attn::cli::add_example(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(fmt::format("{} (see 'attn-trace --help')", e.what()));
  }
  if (app.get_subcommands().empty()) {
    return fail("a command is needed: run, compare, show or example (see 'attn-trace --help')");
  }

  try {
    for (const auto& runner : runners) {
      const int code = runner();
      if (code >= 0) return code;
    }
    return fail("no command ran");
  } catch (const attn::InputError& e) {
    return fail(e.what());
  } catch (const attn::cli::UsageError& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory: the input is too large for this machine");
  } catch (const std::exception& e) {
    return fail(fmt::format("internal error: {}", e.what()));
  }
}
