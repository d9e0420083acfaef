// A stand-in for libcupti's cuptiSubscribe (cupti_owner.rs): it subscribes nobody and counts its callers.
static int calls = 0;

extern "C" int cuptiSubscribe(void**, void*, void*) {
  ++calls;
  return 0;
}

extern "C" int stand_in_subscriptions() { return calls; }
