#pragma once
// Subcommand registration. Each command sets `exit_code` when it runs:
// 0 success, 1 runtime failure, 2 usage or configuration error.

#include <CLI/CLI.hpp>

namespace gpuheal::cli {

void RegisterClassify(CLI::App& app, int& exit_code);
void RegisterExplain(CLI::App& app, int& exit_code);
void RegisterInject(CLI::App& app, int& exit_code);
void RegisterAgent(CLI::App& app, int& exit_code);
void RegisterStatus(CLI::App& app, int& exit_code);
void RegisterNvmlCheck(CLI::App& app, int& exit_code);
void RegisterController(CLI::App& app, int& exit_code);
void RegisterSim(CLI::App& app, int& exit_code);
void RegisterDrill(CLI::App& app, int& exit_code);

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace gpuheal::cli
