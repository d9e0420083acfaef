// Loads the libraries named on its command line with RTLD_LOCAL (as Python loads extensions) and prints what
// each one's OpenMP region counted (tests/host_sync.rs); "+global" loads libgomp.so.1 into the global scope at
// that point, as an extension loaded later with RTLD_GLOBAL brings its copy. "nest A B" runs B's region inside
// A's instead.
#include <dlfcn.h>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "nest") == 0) {
    void* outer = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    void* inner = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
    if (!outer || !inner) return std::printf("%s\n", dlerror()), 1;
    auto inside = reinterpret_cast<int (*)(int (*)(int))>(dlsym(outer, "inside_a_region"));
    auto team_numbers = reinterpret_cast<int (*)(int)>(dlsym(inner, "team_numbers"));
    std::printf("nested %d\n", inside(team_numbers));
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "+global") == 0) {
      if (!dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL)) return std::printf("%s\n", dlerror()), 1;
      continue;
    }
    void* library = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!library) return std::printf("%s\n", dlerror()), 1;
    auto team_numbers = reinterpret_cast<int (*)(int)>(dlsym(library, "team_numbers"));
    std::printf("library %d: %d, then %d", i, team_numbers(4), team_numbers(3));
    if (auto at_load = reinterpret_cast<int (*)()>(dlsym(library, "counted_at_load"))) std::printf(", at load %d", at_load());
    std::printf("\n");
  }
  return 0;
}
