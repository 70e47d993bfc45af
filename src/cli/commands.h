#pragma once
// Subcommand registration. Each command sets `exit_code` when it runs:
// 0 success, 1 runtime failure, 2 usage or configuration error.

#include <signal.h>

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
void RegisterCleanup(CLI::App& app, int& exit_code);
void RegisterBmc(CLI::App& app, int& exit_code);
// diagnose, bundle, repairs (cmd_diagnose.cc).
void RegisterDiagnostics(CLI::App& app, int& exit_code);

// Blocks SIGINT and SIGTERM in the calling thread and returns them as a set for sigwait(). Call
// it before any thread starts: threads inherit the mask, so the signals reach only sigwait.
inline sigset_t BlockStopSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  return mask;
}

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace gpuheal::cli
