// The "CUDA runtime" a fake plugin links (libcublasLt_fake.so); it has no plugin entry point.
extern "C" __attribute__((visibility("default"))) int lathe_fake_runtime_version() {
  return 13000;
}
