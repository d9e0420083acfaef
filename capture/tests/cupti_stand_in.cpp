// A stand-in for libcupti's cuptiSubscribe and cuptiSubscribe_v2 (cupti_owner.rs): they subscribe nobody and
// count their callers.
static int calls = 0;

extern "C" int cuptiSubscribe(void**, void*, void*) {
  ++calls;
  return 0;
}

extern "C" int cuptiSubscribe_v2(void**, void*, void*, void*) {
  ++calls;
  return 0;
}

extern "C" int stand_in_subscriptions() { return calls; }
