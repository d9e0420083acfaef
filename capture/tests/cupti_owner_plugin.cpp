// A library linked against the stand-in libcupti, loaded by cupti_owner_program.cpp with RTLD_LOCAL: its
// cuptiSubscribe is bound by the dynamic linker, its libcupti is not in the global scope.
extern "C" int cuptiSubscribe(void** subscriber, void* callback, void* userdata);
extern "C" int stand_in_subscriptions();

extern "C" int plugin_subscribes() {
  void* subscriber = nullptr;
  return cuptiSubscribe(&subscriber, nullptr, nullptr);
}

extern "C" int plugin_subscriptions() { return stand_in_subscriptions(); }
