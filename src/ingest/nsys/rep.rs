//! `.nsys-rep` reports: converted to an SQLite export by `nsys export`, cached beside the report (or in the temp
//! directory when that is not writable), then read like any export. `nsys export` writes to a temporary name
//! that is renamed to the cache's only when it succeeded, so an export that failed half-way (disk full, killed)
//! never leaves a partial database that the next run would take as the whole report.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ingest::record_source::IngestError;

/// The first bytes of an Nsight Systems report.
pub const MAGIC: &[u8] = b"NVIDIA Tegra Profiler Report ";

/// Where the SQLite export of `report` is cached.
fn cache_paths(report: &Path) -> [PathBuf; 2] {
    let name = report.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "report".into());
    let beside = report.with_file_name(format!("{name}.streamtrace.sqlite"));
    let temp = std::env::temp_dir().join(format!("{name}.{}.streamtrace.sqlite", std::process::id()));
    [beside, temp]
}

/// The name `nsys export` writes to before the export is known whole: `.NAME.PID.partial.sqlite` beside it.
fn partial_path(output: &Path) -> PathBuf {
    let name = output.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "export".into());
    output.with_file_name(format!(".{name}.{}.partial.sqlite", std::process::id()))
}

fn is_fresh(cache: &Path, report: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(cache), modified(report)), (Some(c), Some(r)) if c >= r) && is_export(cache).is_ok()
}

/// Whether `path` is what `nsys export --type sqlite` writes: an SQLite database with Nsight Systems' tables. An
/// `nsys` that exits 0 may still have written something else (a wrapper script, a full disk): that is neither
/// cached nor taken from the cache.
fn is_export(path: &Path) -> Result<(), String> {
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path).and_then(|mut file| std::io::Read::read_exact(&mut file, &mut head));
    if read.is_err() || &head != b"SQLite format 3\0" {
        return Err("is not an SQLite database".to_string());
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(|e| format!("cannot be opened: {e}"))?;
    let nsys_tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND (name LIKE 'CUPTI_ACTIVITY_KIND_%' \
             OR name IN ('META_DATA_EXPORT', 'EXPORT_META_DATA'))",
            [],
            |row| row.get(0),
        )
        .map_err(|e| format!("cannot be read: {e}"))?;
    if nsys_tables == 0 {
        return Err("holds no Nsight Systems table".to_string());
    }
    Ok(())
}

/// Returns an SQLite export of `report`, converting it with nsys (from `$NSYS` or PATH) unless a fresh cached
/// export exists.
pub fn to_sqlite(report: &Path) -> Result<PathBuf, IngestError> {
    let [beside, temp] = cache_paths(report);
    if is_fresh(&beside, report) {
        return Ok(beside);
    }
    let nsys = std::env::var_os("NSYS").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("nsys"));
    let mut last_error = None;
    for output in [beside, temp] {
        let started = std::time::Instant::now();
        let partial = partial_path(&output);
        let run = Command::new(&nsys)
            .args(["export", "--type", "sqlite", "--force-overwrite", "true", "--output"])
            .arg(&partial)
            .arg(report)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|child| {
                // Conversions of large reports take minutes: say what is happening.
                eprintln!(
                    "streamtrace: converting {} with `{} export --type sqlite` ...",
                    report.display(),
                    nsys.display()
                );
                child.wait_with_output()
            });
        match run {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(IngestError::new(
                    report,
                    None,
                    format!(
                        "an Nsight Systems report; reading it needs `nsys` ({} not found; set NSYS=/path/to/nsys), \
                         or export it by hand: nsys export --type sqlite --output report.sqlite {} and analyze report.sqlite",
                        nsys.display(),
                        report.display()
                    ),
                ))
            }
            Err(e) => return Err(IngestError::new(report, None, format!("cannot run {}: {e}", nsys.display()))),
            Ok(out) if out.status.success() && partial.exists() => match is_export(&partial) {
                Err(why) => {
                    let _ = std::fs::remove_file(&partial);
                    let message = format!("`nsys export` exited 0, but what it wrote {why}: not kept");
                    return Err(IngestError::new(report, None, message));
                }
                Ok(()) => match std::fs::rename(&partial, &output) {
                    Ok(()) => {
                        eprintln!(
                            "streamtrace: converted in {:.1} s -> {}",
                            started.elapsed().as_secs_f64(),
                            output.display()
                        );
                        return Ok(output);
                    }
                    Err(e) => last_error = Some(format!("cannot move the export to {}: {e}", output.display())),
                },
            },
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                last_error = Some(format!("`nsys export` failed ({}): {}", out.status, stderr.trim()));
            }
        }
        let _ = std::fs::remove_file(&partial);
    }
    Err(IngestError::new(report, None, last_error.unwrap_or_else(|| "`nsys export` produced nothing".into())))
}
