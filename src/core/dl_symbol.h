#pragma once
// Resolving the entry points of a library opened with dlopen (libcurl, libslurm): each into a
// function pointer of the type its own header declares.

#include <dlfcn.h>

#include <string>

namespace gpuheal {

// Sets `out` to `name` in `handle`; false (and `missing` = name) when the library has no such
// symbol, so a chain of calls stops at, and names, the first one missing.
template <typename Fn>
bool ResolveSymbol(void* handle, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (out == nullptr) missing = name;
  return out != nullptr;
}

}  // namespace gpuheal
