//! What `capture` gives a Python program: the PyTorch bootstrap (tier T2), written into `DIR/python` and put in
//! front of `PYTHONPATH` as `sitecustomize`, and the one place per user where the native op observer it builds
//! is cached, shared by every capture on the machine whatever its output directory or options
//! (capture/python/streamtrace_observer_cache.py builds into it; docs/capture.md).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::output::{output_dir, write_atomically};

/// The bootstrap's files, by name: the sitecustomize itself, the recording of Triton's launches as ops and its
/// reader of Triton IR, the builder of the native observer and its cache, and the observer's sources (every one
/// the builder's `SOURCES` names: a test checks).
const FILES: [(&str, &str); 7] = [
    ("sitecustomize.py", include_str!("../../capture/python/sitecustomize.py")),
    ("streamtrace_launch_ops.py", include_str!("../../capture/python/streamtrace_launch_ops.py")),
    ("streamtrace_triton_ir.py", include_str!("../../capture/python/streamtrace_triton_ir.py")),
    ("streamtrace_observer_cache.py", include_str!("../../capture/python/streamtrace_observer_cache.py")),
    ("torch_observer.cpp", include_str!("../../capture/python/torch_observer.cpp")),
    ("observer_lifetime.h", include_str!("../../capture/python/observer_lifetime.h")),
    ("python_frames.h", include_str!("../../capture/python/python_frames.h")),
];

/// Where the native observer is cached: set by the user to choose, passed to the bootstrap either way.
pub const ENV_OBSERVER_CACHE: &str = "STREAMTRACE_OBSERVER_CACHE";

/// The environment a Python program is started with.
pub struct PythonEnvironment {
    /// `DIR/python` in front of the program's own `PYTHONPATH`.
    pub python_path: OsString,
    /// The observer cache's directory.
    pub observer_cache: PathBuf,
}

/// Writes the bootstrap into `dir/python` and says how to start a program with it.
pub fn install(dir: &Path) -> anyhow::Result<PythonEnvironment> {
    let python_dir = dir.join("python");
    output_dir(&python_dir)?;
    for (name, text) in FILES {
        write_atomically(&python_dir.join(name), |out| out.write_all(text.as_bytes()))
            .with_context(|| format!("cannot write the Python bootstrap's {name} into {}", python_dir.display()))?;
    }
    let python_path = match std::env::var_os("PYTHONPATH") {
        Some(existing) if !existing.is_empty() => {
            let mut joined = python_dir.into_os_string();
            joined.push(":");
            joined.push(existing);
            joined
        }
        _ => python_dir.into_os_string(),
    };
    Ok(PythonEnvironment { python_path, observer_cache: observer_cache(|name| std::env::var_os(name)) })
}

/// The observer cache: `$STREAMTRACE_OBSERVER_CACHE`, else `observer` in the user's XDG cache
/// (`$XDG_CACHE_HOME/streamtrace`, `~/.cache/streamtrace`), else a folder of the user's in the temporary
/// directory. Relative paths in `XDG_CACHE_HOME` and `HOME` are ignored, as the XDG specification says.
fn observer_cache(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let absolute = |name: &str| var(name).map(PathBuf::from).filter(|path| path.is_absolute());
    if let Some(chosen) = var(ENV_OBSERVER_CACHE).filter(|value| !value.is_empty()) {
        return PathBuf::from(chosen);
    }
    let user_cache = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".cache")));
    match user_cache {
        Some(cache) => cache.join("streamtrace").join("observer"),
        // Safety: getuid has no preconditions and cannot fail.
        None => std::env::temp_dir().join(format!("streamtrace-{}", unsafe { libc::getuid() })).join("observer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(vars: &[(&str, &str)]) -> PathBuf {
        observer_cache(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, value)| OsString::from(value)))
    }

    /// The builder compiles the sources its `SOURCES` tuple names from `DIR/python`: one missing there makes
    /// every capture fall back to the Python dispatch mode, several times slower.
    #[test]
    fn every_source_the_observer_builder_names_is_written_beside_it() {
        let builder = FILES.iter().find(|(name, _)| *name == "streamtrace_observer_cache.py").expect("the builder").1;
        let line = builder.lines().find(|line| line.starts_with("SOURCES = (")).expect("the builder's SOURCES");
        let sources: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        assert!(sources.len() >= 3, "{line}");
        for source in sources {
            assert!(FILES.iter().any(|(name, _)| *name == source), "{source} is not written into DIR/python");
        }
    }

    #[test]
    fn the_observer_cache_is_chosen_by_the_user_else_the_xdg_cache_else_home() {
        let all = [("STREAMTRACE_OBSERVER_CACHE", "/shared/obs"), ("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/u")];
        assert_eq!(cache_with(&all), PathBuf::from("/shared/obs"));
        assert_eq!(cache_with(&all[1..]), PathBuf::from("/xdg/streamtrace/observer"));
        assert_eq!(cache_with(&all[2..]), PathBuf::from("/home/u/.cache/streamtrace/observer"));
        assert_eq!(
            cache_with(&[("STREAMTRACE_OBSERVER_CACHE", ""), ("XDG_CACHE_HOME", "relative"), ("HOME", "/home/u")]),
            PathBuf::from("/home/u/.cache/streamtrace/observer"),
            "an empty choice and a relative XDG_CACHE_HOME count as none"
        );
        let none = cache_with(&[]);
        assert!(none.starts_with(std::env::temp_dir()) && none.ends_with("observer"), "{}", none.display());
    }

    #[test]
    fn the_bootstrap_is_written_whole_and_put_first_on_the_python_path() {
        let dir = std::env::temp_dir().join(format!("st-bootstrap-{}", std::process::id()));
        let environment = install(&dir).expect("installed");
        for (name, text) in FILES {
            assert_eq!(std::fs::read_to_string(dir.join("python").join(name)).expect(name), text);
        }
        let python_path = environment.python_path.to_string_lossy().to_string();
        assert!(python_path.starts_with(&dir.join("python").to_string_lossy().to_string()), "{python_path}");
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
