/* A stand-in for a CUDA program's host code, for tests/callsites.rs: two launch helpers and the stream
 * creation, each in its own function, so that a trace can point return addresses into them. */
int make_stream(void) {
    return 1;
}

int launch_fill(int stream) {
    return stream + 2;
}

int launch_scale(int stream) {
    return stream + 3;
}

/* What nvcc writes for a kernel `step`: a launch stub, and a host wrapper named like the kernel that calls it. */
int __device_stub__Z4stepi(int stream) {
    return stream + 4;
}

int step(int stream) {
    return __device_stub__Z4stepi(stream);
}

int main(void) {
    return make_stream() + launch_fill(1) + launch_scale(2) + step(0) - 13;
}
