// Fuzzes what a diagnostic request and a bundle take from outside: a NodeDiagnostic object as the
// API server sends it (decoded with simdjson; any input is an object or an error, never a crash),
// and the Redactor over arbitrary text: a secret it was given never survives, whatever surrounds
// it, and no presigned URL's signature is left in the clear.

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/diag_collectors.h"
#include "kube/objects.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Decoded or refused; a decoded list never holds more names than the input has bytes.
  auto d = gpuheal::kube::DecodeNodeDiagnostic(text);
  if (d && d->collectors.size() + d->include.size() + d->exclude.size() > size) __builtin_trap();
  static const gpuheal::Redactor redactor({"fuzz-secret-value"});
  const std::string out = redactor.Apply(std::string(text) + " fuzz-secret-value");
  if (out.find("fuzz-secret-value") != std::string::npos) __builtin_trap();
  const size_t sig = out.find("X-Amz-Signature=");
  if (sig != std::string::npos) {
    const std::string_view after = std::string_view(out).substr(sig + 16);
    if (!after.empty() && after.front() != '&' && after.front() != ' ' && after.front() != '"' &&
        !after.starts_with("<redacted>") && after.front() != '\n' && after.front() != '\t' &&
        after.front() != '\r' && after.front() != '\f' && after.front() != '\v')
      __builtin_trap();
  }
  return 0;
}
