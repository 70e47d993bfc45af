// Fuzzes the kernel-log line parsers and the classifier (all text forms, NVIDIA and kernel
// messages, multi-record state) with arbitrary bytes split into lines.

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/fault_json.h"
#include "core/pci.h"
#include "parse/classifier.h"
#include "parse/line_format.h"
#include "parse/nvidia_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto classifier = std::move(gpuheal::Classifier::Create({}).value());
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<gpuheal::Fault> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    gpuheal::ParsedLine p = gpuheal::ParseLine(line);
    if (p.message.size() > line.size()) __builtin_trap();
    gpuheal::NvidiaSignal sig;
    gpuheal::ParseNvidia(line, sig);
    gpuheal::ParsePciPrefix(line);
    out.clear();
    classifier->ClassifyLine(line, line_no, out);
    for (const auto& f : out) {
      if (f.line != line_no && f.kind != gpuheal::FaultKind::kGpuFallenOffBus) __builtin_trap();
      (void)gpuheal::ToJsonLine(gpuheal::ToJson(f));  // invalid UTF-8 must not throw
    }
  }
  return 0;
}
