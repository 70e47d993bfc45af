// Runs every file of the given corpus directories once through LLVMFuzzerTestOneInput, so the
// fuzz corpora are also plain regression tests in the normal (gcc) build.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t files = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::filesystem::is_directory(argv[i])) {
      std::fprintf(stderr, "corpus directory %s does not exist\n", argv[i]);
      return 1;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argv[i])) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::vector<char> data((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      ++files;
    }
  }
  if (files == 0) {
    std::fprintf(stderr, "no corpus files: a corpus test that runs nothing proves nothing\n");
    return 1;
  }
  std::printf("%zu corpus inputs ran without a crash\n", files);
  return 0;
}
