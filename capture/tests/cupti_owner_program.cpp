// A program that subscribes to CUPTI before any CUDA work, as PyTorch's profiler library (Kineto) does: its
// cuptiSubscribe is resolved by the dynamic linker, as a library linked against libcupti has it. Built by
// cupti_owner.rs with a stand-in libcupti (cupti_stand_in.cpp), which answers 0 and counts the calls it got.
#include <cstdio>

extern "C" int cuptiSubscribe(void** subscriber, void* callback, void* userdata);
extern "C" int stand_in_subscriptions();

int main() {
  void* subscriber = nullptr;
  int answer = cuptiSubscribe(&subscriber, nullptr, nullptr);
  std::printf("answer %d, reached libcupti %d time(s)\n", answer, stand_in_subscriptions());
  return 0;
}
