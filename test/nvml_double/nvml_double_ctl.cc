// Drives the NVML test double's scenario file from outside the agent, as hardware would change:
//   nvml_double_ctl reset SCENARIO BUS_ID   what `nvidia-smi --gpu-reset -i BUS_ID` does to a GPU:
//       volatile ECC counts, pending remaps and retirements, the recovery action and a lost state
//       are cleared; "resets" counts the resets. A device with "reset_fails": true fails instead.
// The file is replaced atomically (write + rename), which is what the double watches for.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4 || std::string(argv[1]) != "reset") {
    std::fprintf(stderr, "usage: nvml_double_ctl reset SCENARIO BUS_ID\n");
    return 2;
  }
  const std::string path = argv[2];
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "%s: not JSON\n", path.c_str());
    return 2;
  }
  auto upper = [](std::string s) {
    for (char& c : s) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    return s;
  };
  bool found = false;
  for (auto& d : j["devices"]) {
    if (upper(d.value("bus_id", "")) != upper(argv[3])) continue;
    found = true;
    if (d.value("reset_fails", false)) {
      std::fprintf(
          stderr,
          "GPU %s: Unable to reset this GPU because it's being used by some other process\n",
          argv[3]);
      return 1;
    }
    d["ecc"]["volatile_uncorrected"] = 0;
    d["ecc"]["volatile_corrected"] = 0;
    d["remapped_rows"]["pending"] = 0;
    d["retired_pages_pending"] = false;
    d["recovery_action"] = 0;
    d["lost"] = false;
    d["resets"] = d.value("resets", 0) + 1;
  }
  if (!found) {
    std::fprintf(stderr, "No devices were found with bus id %s\n", argv[3]);
    return 6;
  }
  const std::string tmp = path + ".ctl.tmp";
  std::ofstream(tmp) << j.dump(2);
  if (rename(tmp.c_str(), path.c_str()) != 0) return 1;
  std::printf("GPU %s was successfully reset.\n", argv[3]);
  return 0;
}
