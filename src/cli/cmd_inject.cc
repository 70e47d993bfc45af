// gpuheal inject --xid N [--pci BDF] [--kmsg PATH]: write a realistic driver line for drills.

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/pci.h"
#include "drill/inject.h"

namespace gpuheal::cli {
namespace {
struct InjectArgs {
  int xid = 79;
  std::string pci = "0000:3b:00";
  std::string kmsg = "/dev/kmsg";
  std::string pid;
  std::string name;
  std::string node;
  std::string sim_dir = "/tmp/gpuheal-sim";
};
}  // namespace

void RegisterInject(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<InjectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inject",
      "Write the NVIDIA driver's line for an Xid into the kernel log (fault drills). "
      "Records from user space are marked by the kernel as such; agents act on them "
      "only with --accept-injected");
  cmd->add_option("--xid", args->xid, "Xid to inject (79: GPU has fallen off the bus)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--pci", args->pci, "GPU bus id, e.g. 0000:3b:00 or 0000:3b:00.0");
  cmd->add_option("--kmsg", args->kmsg, "Kernel log device");
  cmd->add_option("--pid", args->pid, "Process id the line names (default '<unknown>')");
  cmd->add_option("--name", args->name, "Process name the line names (default <unknown>)");
  cmd->add_option(
      "--node", args->node,
      "A `gpuheal sim --agents` node: write kernel records to its simulated kernel log instead");
  cmd->add_option("--sim-dir", args->sim_dir, "The sim's --state-dir (default /tmp/gpuheal-sim)");
  cmd->callback([args, &exit_code] {
    auto pci = NormalisePci(args->pci);
    if (!pci) {
      std::cerr << fmt::format(
          "gpuheal inject: --pci \"{}\" is not a PCI bus id; use dddd:bb:dd or dddd:bb:dd.f\n",
          args->pci);
      exit_code = kExitUsage;
      return;
    }
    InjectSpec spec{args->xid, *pci, args->pid, args->name};
    const auto messages = InjectMessages(spec);
    if (auto s = args->node.empty() ? WriteKmsg(args->kmsg, messages)
                                    : WriteSimKernel(args->sim_dir, args->node, messages);
        !s) {
      std::cerr << "gpuheal inject: " << s.error().message << "\n";
      exit_code = kExitFailure;
      return;
    }
    for (const auto& m : messages) std::cout << m << "\n";
    exit_code = kExitOk;
  });
}

}  // namespace gpuheal::cli
