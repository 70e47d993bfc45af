#pragma once
// Opening a library with dlopen (libcurl, libslurm, libbpf, NVML, DCGM, libsystemd, libarchive,
// libcrypto) and resolving its entry points: each into a function pointer of the type its own
// header declares. Every failure has one of two shapes: "cannot load FILE (the loader's reason):
// REMEDY" and "FILE has no SYMBOL[, SYMBOL...]: REMEDY".

#include <dlfcn.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpuheal {

// dlopen(`file`, `flags`). The error reads "cannot load FILE (the loader's reason): REMEDY", where
// `remedy` says what needs the library and how to install it.
inline Result<void*> OpenLibrary(const std::string& file, int flags, std::string_view remedy) {
  if (void* h = dlopen(file.c_str(), flags)) return h;
  const char* why = dlerror();
  return Error{"cannot load " + file + " (" + (why != nullptr ? why : "unknown error") +
               "): " + std::string(remedy)};
}

// The first of `files` that opens (a library known by more than one soname), and which it was.
// The error names the first: "cannot load FILE (its reason; OTHER: its reason): REMEDY".
struct OpenedLibrary {
  void* handle = nullptr;
  std::string file;
};
inline Result<OpenedLibrary> OpenLibrary(const std::vector<std::string>& files, int flags,
                                         std::string_view remedy) {
  std::string reasons;
  for (const auto& file : files) {
    if (void* h = dlopen(file.c_str(), flags)) return OpenedLibrary{h, file};
    const char* why = dlerror();
    if (!reasons.empty()) reasons += "; " + file + ": ";
    reasons += why != nullptr ? why : "unknown error";
  }
  return Error{"cannot load " + (files.empty() ? std::string("(no library named)") : files[0]) +
               " (" + reasons + "): " + std::string(remedy)};
}

// Sets `out` to `name` in `handle`; false (and `missing` = name) when the library has no such
// symbol, so a chain of calls stops at, and names, the first one missing.
template <typename Fn>
bool ResolveSymbol(void* handle, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (out == nullptr) missing = name;
  return out != nullptr;
}

}  // namespace gpuheal
