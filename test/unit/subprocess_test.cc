#include "core/subprocess.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gpuheal {
namespace {

using namespace std::chrono_literals;

TEST(RunArgv, ExitCodeOutputAndNoShell) {
  auto r = RunArgv({"echo", "{bus_id}", "$(reboot)", ";", "ls"}, 5s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, "{bus_id} $(reboot) ; ls\n") << "arguments reach the program verbatim";
  auto f = RunArgv({"false"}, 5s);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->exit_code, 1);
}

TEST(RunArgv, EnvironmentIsAddedAndStderrCaptured) {
  auto r = RunArgv({"sh", "-c", "echo $GPUHEAL_X >&2"}, 5s, {{"GPUHEAL_X", "3b:00"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->output, "3b:00\n");
}

TEST(RunArgv, TimeoutKillsTheProcessGroup) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunArgv({"sh", "-c", "sleep 30 & sleep 30"}, 300ms);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(RunArgv, MissingProgramIsAnError) {
  auto r = RunArgv({"/nonexistent/nvidia-smi", "--gpu-reset"}, 1s);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot run /nonexistent/nvidia-smi"), std::string::npos);
  EXPECT_FALSE(RunArgv({}, 1s));
}

}  // namespace
}  // namespace gpuheal
