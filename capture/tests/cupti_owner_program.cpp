// A program that subscribes to CUPTI before any CUDA work, as PyTorch's profiler library (Kineto) may: built by
// cupti_owner.rs against a stand-in libcupti (cupti_stand_in.cpp), which answers 0 and counts its callers.
// `direct`: the program's own call, bound by the dynamic linker. `plugin PATH`: the call made by a library the
// program loads with dlopen and RTLD_LOCAL (cupti_owner_plugin.cpp), as Python loads its extension modules, so
// that its libcupti is not in the global scope.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

extern "C" int cuptiSubscribe(void** subscriber, void* callback, void* userdata);

int main(int argc, char** argv) {
  int answer = -1;
  int (*count)() = nullptr;
  if (argc > 2 && std::strcmp(argv[1], "plugin") == 0) {
    void* plugin = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
      std::printf("no plugin: %s\n", dlerror());
      return 1;
    }
    auto subscribe = reinterpret_cast<int (*)()>(dlsym(plugin, "plugin_subscribes"));
    count = reinterpret_cast<int (*)()>(dlsym(plugin, "plugin_subscriptions"));
    answer = subscribe();
  } else {
    void* subscriber = nullptr;
    answer = cuptiSubscribe(&subscriber, nullptr, nullptr);
    count = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "stand_in_subscriptions"));
  }
  std::printf("answer %d, reached libcupti %d time(s)\n", answer, count != nullptr ? count() : -1);
  return 0;
}
