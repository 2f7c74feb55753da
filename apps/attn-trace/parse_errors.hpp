#pragma once
// What CLI11 refused on the command line, said in the tool's own words: the option, command or
// argument it could not place, with the nearest spelling ("did you mean …?") when there is one.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attn::cli {

// The message for `error`, thrown by app.parse() on `args` (argv[1..]), without "attn-trace: error: ".
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error,
                                const std::vector<std::string>& args);

// The message for a command line that names no command: the commands, as --help lists them.
std::string no_command_message(const CLI::App& app);

}  // namespace attn::cli
