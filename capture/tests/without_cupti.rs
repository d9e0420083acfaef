//! On a machine without CUPTI (like CI), initialization must say so and let the program run on: it returns
//! success to the driver and never panics.

#[test]
fn initialize_without_cupti_returns_success_and_records_nothing() {
    std::env::set_var("STREAMTRACE_CUPTI", "/nonexistent/libcupti.so.13");
    let dir = std::env::temp_dir().join(format!("st-no-cupti-{}", std::process::id()));
    std::env::set_var("STREAMTRACE_OUTPUT", dir.join("trace.%p.json"));
    assert_eq!(streamtrace_capture::InitializeInjection(), 1);
    assert_eq!(streamtrace_capture::InitializeInjection(), 1, "a second call is harmless too");
    assert!(!dir.exists(), "no trace file without CUPTI");
}
