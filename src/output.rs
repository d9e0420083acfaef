//! Writing output files. Every file streamtrace writes (the report of `-o`, `--html`, `--perfetto`, `--png`,
//! `stats`' tables, capture's bootstrap) goes through [`write_atomically`] or [`write_atomically_with`], and every
//! directory it writes into through [`output_dir`], so that two promises hold everywhere:
//!
//! - A failed run leaves no partial file that looks whole: the output is written to a temporary file beside
//!   the target and renamed over it once complete.
//! - Nothing but a regular file is ever replaced. A target that exists and is not a regular file (a directory,
//!   a FIFO, a socket, a device: renaming over `/dev/null` as root replaces the device with a file) is refused,
//!   and left as it was. A symbolic link to a regular file is kept: the file it names is replaced.
//!
//! Two special files are written through, in place, because writing into them replaces nothing and is what a
//! user naming them means: the null device (`-o /dev/null` in scripts that only want the exit status or the
//! timing) and this process's own standard output or error (`--html /dev/stdout`, which is the same stream the
//! report goes to without `-o`). Anything else that is not a regular file (a FIFO, a terminal, a disk, `/dev/full`)
//! is refused: streamtrace cannot tell whether its content matters, and a reader at the other end of a FIFO
//! could not tell a report cut short from a whole one.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// Where an output goes.
enum Target {
    /// A regular file (or none yet) at this path: written beside it and renamed over it.
    Replace(PathBuf),
    /// The null device or this process's standard output or error, written in place.
    Stream(File),
}

/// Writes `path` with `write`, atomically (see the module doc).
pub fn write_atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    match target(path)? {
        Target::Stream(file) => {
            let mut out = BufWriter::new(file);
            write(&mut out).and_then(|()| out.flush()).with_context(|| format!("writing {}", path.display()))
        }
        Target::Replace(real) => {
            let tmp = temporary(&real, None);
            let file = create_new(&tmp)?;
            let mut out = BufWriter::new(file);
            let written = write(&mut out).and_then(|()| out.flush());
            drop(out);
            finish(written.with_context(|| format!("writing {}", path.display())), &tmp, &real, path)
        }
    }
}

/// Writes `path` with `produce`, which writes a file at the path it is given, for writers that insist on a path
/// (the PNG encoder picks its format from the name's `extension`). Atomic and as careful as [`write_atomically`].
pub fn write_atomically_with(
    path: &Path,
    extension: &str,
    produce: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    match target(path)? {
        Target::Stream(mut file) => {
            let tmp =
                temporary(&std::env::temp_dir().join(path.file_name().unwrap_or("output".as_ref())), Some(extension));
            let produced = produce(&tmp).and_then(|()| {
                let mut written = File::open(&tmp).with_context(|| format!("cannot read back {}", tmp.display()))?;
                io::copy(&mut written, &mut file).with_context(|| format!("writing {}", path.display()))?;
                Ok(())
            });
            let _ = fs::remove_file(&tmp);
            produced
        }
        Target::Replace(real) => {
            let tmp = temporary(&real, Some(extension));
            // Made here, exclusively, so that the writer does not follow a link someone left at that name.
            drop(create_new(&tmp)?);
            finish(produce(&tmp), &tmp, &real, path)
        }
    }
}

/// Creates `dir` (and its parents) for output files, refusing a path that exists and is not a directory.
pub fn output_dir(dir: &Path) -> anyhow::Result<()> {
    if let Ok(metadata) = fs::metadata(dir) {
        if !metadata.is_dir() {
            bail!(
                "{} exists and is not a directory ({}): output files go into a directory",
                dir.display(),
                kind(&metadata)
            );
        }
    }
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Decides where `path`'s output goes, refusing what must not be replaced.
fn target(path: &Path) -> anyhow::Result<Target> {
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                bail!("{} is a symbolic link to nothing: not replacing it", path.display());
            }
            return Ok(Target::Replace(path.to_path_buf()));
        }
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
    };
    if metadata.is_file() {
        // Through a link, the file it names is replaced and the link kept.
        let real = fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))?;
        return Ok(Target::Replace(real));
    }
    let same = |other: &Metadata| other.dev() == metadata.dev() && other.ino() == metadata.ino();
    let null_device = metadata.file_type().is_char_device()
        && fs::metadata("/dev/null").is_ok_and(|null| null.rdev() == metadata.rdev());
    if null_device {
        let file = File::options().write(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
        return Ok(Target::Stream(file));
    }
    for stream in [own_stream(io::stdout().as_fd()), own_stream(io::stderr().as_fd())].into_iter().flatten() {
        if stream.metadata().is_ok_and(|m| same(&m)) {
            return Ok(Target::Stream(stream));
        }
    }
    bail!(
        "{} exists and is not a regular file ({}): streamtrace writes only regular files and replaces nothing else \
         (the report goes to standard output without -o)",
        path.display(),
        kind(&metadata)
    )
}

/// A duplicate of a standard stream's descriptor, as a file to write into.
fn own_stream(fd: BorrowedFd) -> Option<File> {
    fd.try_clone_to_owned().ok().map(File::from)
}

/// What a file that is not a regular file is, for messages.
fn kind(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// A temporary name beside `real`, of this process, ending in `.extension` when one is given.
fn temporary(real: &Path, extension: Option<&str>) -> PathBuf {
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
    let suffix = extension.map(|e| format!(".{e}")).unwrap_or_default();
    real.with_file_name(format!(".{name}.{}.tmp{suffix}", std::process::id()))
}

/// Creates `tmp`, which must not exist (a stale one of an earlier run with this pid is removed first).
fn create_new(tmp: &Path) -> anyhow::Result<File> {
    let create = || File::options().write(true).create_new(true).open(tmp);
    let file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(tmp);
            create()
        }
        other => other,
    };
    file.with_context(|| format!("cannot create {}", tmp.display()))
}

/// Renames `tmp` over `real` when `written` succeeded; removes it otherwise.
fn finish(written: anyhow::Result<()>, tmp: &Path, real: &Path, asked: &Path) -> anyhow::Result<()> {
    if let Err(e) = written {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    fs::rename(tmp, real).with_context(|| {
        let _ = fs::remove_file(tmp);
        format!("cannot move the output to {}", asked.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("streamtrace-output-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn a_regular_file_is_replaced_whole_and_a_failed_write_leaves_it() {
        let dir = scratch("regular");
        let path = dir.join("report.txt");
        fs::write(&path, "old").expect("write");
        let failed = write_atomically(&path, |out| {
            out.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(fs::read_to_string(&path).expect("read"), "old");
        write_atomically(&path, |out| out.write_all(b"new")).expect("written");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
        assert_eq!(fs::read_dir(&dir).expect("list").count(), 1, "no temporary file left");
    }

    #[test]
    fn a_link_to_a_regular_file_is_kept_and_the_file_replaced() {
        let dir = scratch("link");
        let (file, link) = (dir.join("real.txt"), dir.join("link.txt"));
        fs::write(&file, "old").expect("write");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        write_atomically(&link, |out| out.write_all(b"new")).expect("written");
        assert!(fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
        assert_eq!(fs::read_to_string(&file).expect("read"), "new");
    }

    #[test]
    fn a_directory_and_a_file_given_as_a_directory_are_refused() {
        let dir = scratch("dir");
        let error = write_atomically(&dir, |out| out.write_all(b"x")).expect_err("a directory");
        assert!(error.to_string().contains("is not a regular file (a directory)"), "{error}");
        let file = dir.join("plain");
        fs::write(&file, "keep").expect("write");
        let error = output_dir(&file).expect_err("a file");
        assert!(error.to_string().contains("is not a directory"), "{error}");
        assert_eq!(fs::read_to_string(&file).expect("read"), "keep");
    }
}
