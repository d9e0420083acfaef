//! A kernel's name as the writer keeps it: declared once by a `Function` record, copied into every launch.

use std::sync::Arc;

use streamtrace_format::push_escaped;

/// A kernel's name, and its text escaped for JSON (written once, copied into every launch's line).
#[derive(Clone, Debug)]
pub struct KernelName {
    pub name: Arc<str>,
    pub escaped: String,
}

impl KernelName {
    pub fn new(name: Arc<str>) -> KernelName {
        let mut escaped = String::with_capacity(name.len());
        push_escaped(&mut escaped, &name);
        KernelName { name, escaped }
    }

    /// What a launch whose kernel was never declared is named.
    pub fn unnamed() -> KernelName {
        KernelName { name: Arc::from("kernel"), escaped: "kernel".to_string() }
    }
}
