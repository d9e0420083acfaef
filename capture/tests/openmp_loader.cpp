// Loads the libraries named on its command line with RTLD_LOCAL (as Python loads extensions) and prints what
// each one's OpenMP region counted (tests/host_sync.rs).
#include <dlfcn.h>
#include <cstdio>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    void* library = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      std::printf("%s\n", dlerror());
      return 1;
    }
    auto team_numbers = reinterpret_cast<int (*)(int)>(dlsym(library, "team_numbers"));
    std::printf("library %d: %d, then %d\n", i, team_numbers(4), team_numbers(3));
  }
  return 0;
}
