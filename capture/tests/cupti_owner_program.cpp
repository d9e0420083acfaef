// A program that subscribes to CUPTI before any CUDA work, as PyTorch's profiler library (Kineto) may: built by
// cupti_owner.rs against a stand-in libcupti (cupti_stand_in.cpp), which answers 0 and counts its callers.
// `direct` and `direct_v2`: the program's own cuptiSubscribe or cuptiSubscribe_v2, bound by the dynamic linker.
// `plugin PATH`: the call made by a library the program loads with dlopen and RTLD_LOCAL
// (cupti_owner_plugin.cpp), as Python loads its extension modules; built with PLUGIN_ONLY, the program links
// no libcupti of its own, so that the plugin's is outside the global scope.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#ifndef PLUGIN_ONLY
extern "C" int cuptiSubscribe(void** subscriber, void* callback, void* userdata);
extern "C" int cuptiSubscribe_v2(void** subscriber, void* callback, void* userdata, void* params);
#endif

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
#ifdef PLUGIN_ONLY
    return 1;
#else
    void* subscriber = nullptr;
    answer = argc > 1 && std::strcmp(argv[1], "direct_v2") == 0
                 ? cuptiSubscribe_v2(&subscriber, nullptr, nullptr, nullptr)
                 : cuptiSubscribe(&subscriber, nullptr, nullptr);
    count = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "stand_in_subscriptions"));
#endif
  }
  std::printf("answer %d, reached libcupti %d time(s)\n", answer, count != nullptr ? count() : -1);
  return 0;
}
