//! The native PyTorch observer (capture/python/torch_observer.cpp) on real ops, tested in Python
//! (native_observer_test.py beside this file) where torch and a C++ compiler are installed: what each op reads
//! and writes, as bootstrap_test.py checks the Python dispatch mode. Skipped, saying why, where torch is not
//! (CI installs none).

#[path = "common/python_test.rs"]
mod common_python_test;

#[test]
fn the_native_observer_records_what_real_ops_read_and_write() {
    common_python_test::run_python_test("native_observer_test.py");
}
