#include "parse_errors.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/nearest.hpp"

namespace attn::cli {

namespace {

// Every spelling of `command`'s options: "--steps", "-h".
std::vector<std::string> option_spellings(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// The first of `extras` in the order the user wrote them (CLI11 lists them the other way round).
std::string first_written(const std::vector<std::string>& extras, const std::vector<std::string>& args) {
  for (const std::string& arg : args)
    if (std::find(extras.begin(), extras.end(), arg) != extras.end()) return arg;
  return extras.empty() ? std::string() : extras.front();
}

// What CLI11 could not place on the command line: an unknown option, an unknown command, or one
// argument too many, with the nearest spelling when there is one.
std::string unexpected_argument(const CLI::App& app, const std::vector<std::string>& args) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  const CLI::App& command = chosen.empty() ? app : *chosen.front();
  std::vector<std::string> extras = command.remaining();
  if (extras.empty()) extras = app.remaining();
  const std::string arg = first_written(extras, args);
  const std::string help =
      chosen.empty() ? "see 'attn-trace --help'" : fmt::format("see 'attn-trace {} --help'", command.get_name());
  const std::string where = chosen.empty() ? "" : command.get_name() + ": ";
  if (arg.size() > 1 && arg[0] == '-') {
    const std::string name = arg.substr(0, arg.find('='));  // --stpes=weights: the option is --stpes
    return fmt::format("{}unknown option \"{}\"{}; {}", where, name, did_you_mean(name, option_spellings(command)),
                       help);
  }
  if (chosen.empty())
    return fmt::format("unknown command \"{}\"{}; the commands are {}; {}", arg, did_you_mean(arg, command_names(app)),
                       fmt::join(command_names(app), ", "), help);
  return fmt::format("{}unexpected argument \"{}\"{}; {}", where, arg,
                     extras.size() > 1 ? fmt::format(" (and {} more)", extras.size() - 1) : "", help);
}

}  // namespace

std::string no_command_message(const CLI::App& app) {
  return fmt::format("a command is needed: {} (see 'attn-trace --help')", fmt::join(command_names(app), ", "));
}

std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error,
                                const std::vector<std::string>& args) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) return unexpected_argument(app, args);
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  return fmt::format("{} (see 'attn-trace{} --help')", error.what(),
                     chosen.empty() ? "" : " " + chosen.front()->get_name());
}

}  // namespace attn::cli
