//! Writing output files. Every file streamtrace writes (the report of `-o`, `--html`, `--perfetto`, `--png`,
//! `stats`' tables, capture's bootstrap) goes through [`write_atomically`] or [`write_atomically_with`], and every
//! directory it writes into through [`output_dir`], so that these promises hold everywhere:
//!
//! - A failed run leaves no partial file that looks whole: the output is written to a temporary file in the
//!   target's directory and renamed over the target once complete. The temporary file is created exclusively
//!   (`O_CREAT | O_EXCL`, which never follows a link at that name) under a short random name, so that a link
//!   planted beside the target is never written through and a long target name still leaves room for it. A
//!   writer that insists on a path of its own (the PNG encoder) writes inside a directory created the same way,
//!   readable by this user only.
//! - Nothing but a regular file is ever replaced. A target that exists and is not a regular file (a directory,
//!   a FIFO, a socket, a device: renaming over `/dev/null` as root replaces the device with a file) is refused,
//!   and left as it was. A symbolic link to a regular file is kept: the file it names is replaced, and keeps its
//!   permission bits.
//! - The input is never replaced: a target that is the same file as a trace this run reads ([`protect_input`]:
//!   the same device and inode, whatever links lead to either) is refused.
//!
//! Two special files are written through, in place, because writing into them replaces nothing and is what a
//! user naming them means: the null device (`-o /dev/null` in scripts that only want the exit status or the
//! timing) and this process's own standard output or error (`--html /dev/stdout`, which is the same stream the
//! report goes to without `-o`). Anything else that is not a regular file (a FIFO, a terminal, a disk, `/dev/full`)
//! is refused: streamtrace cannot tell whether its content matters, and a reader at the other end of a FIFO
//! could not tell a report cut short from a whole one.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, Metadata, Permissions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context};

/// The files this run reads, by (device, inode), with the name they were given: no output may replace them.
static INPUTS: Mutex<Vec<(u64, u64, PathBuf)>> = Mutex::new(Vec::new());

/// Attempts at a fresh temporary name before giving up (each collision means someone else holds that name).
const NAME_ATTEMPTS: u32 = 32;

/// Marks `path` as an input of this run, so that no output replaces it (`-` stands for standard input, which
/// may be a regular file). A path that cannot be looked up is no file to protect.
pub fn protect_input(path: &Path) {
    let looked_up = if path == Path::new(crate::ingest::STDIN) { Path::new("/dev/stdin") } else { path };
    if let Ok(metadata) = fs::metadata(looked_up) {
        let mut inputs = INPUTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inputs.push((metadata.dev(), metadata.ino(), path.to_path_buf()));
    }
}

/// The input `metadata` is, if it is one.
fn input_named(metadata: &Metadata) -> Option<PathBuf> {
    let inputs = INPUTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    inputs.iter().find(|(dev, ino, _)| *dev == metadata.dev() && *ino == metadata.ino()).map(|(_, _, p)| p.clone())
}

/// Where an output goes.
enum Target {
    /// A regular file (or none yet) at this path: written beside it and renamed over it; with the permission
    /// bits of the file it replaces.
    Replace(PathBuf, Option<Permissions>),
    /// The null device or this process's standard output or error, written in place.
    Stream(File),
}

/// Writes a report with `write` to `path` (atomically, as [`write_atomically`]), or to standard output when there
/// is none (`-o` not given).
pub fn write_report(path: Option<&Path>, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    match path {
        Some(path) => write_atomically(path, write),
        None => {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            write(&mut out).and_then(|()| out.flush()).context("writing the report")
        }
    }
}

/// Writes `path` with `write`, atomically (see the module doc).
pub fn write_atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    match target(path)? {
        Target::Stream(file) => {
            let mut out = BufWriter::new(file);
            write(&mut out).and_then(|()| out.flush()).with_context(|| format!("writing {}", path.display()))
        }
        Target::Replace(real, mode) => {
            let (tmp, file) = create_exclusive(directory_of(&real), "tmp", path)?;
            let mut out = BufWriter::new(file);
            let written = write(&mut out).and_then(|()| out.flush()).and_then(|()| keep_mode(out.get_ref(), &mode));
            drop(out);
            finish(written.with_context(|| format!("writing {}", path.display())), &tmp, &real, path)
        }
    }
}

/// Writes `path` with `produce`, which writes a file at the path it is given, for writers that insist on a path
/// (the PNG encoder picks its format from the name's `extension`). Atomic and as careful as [`write_atomically`]:
/// the path given is inside a directory this run created exclusively, readable by this user only.
pub fn write_atomically_with(
    path: &Path,
    extension: &str,
    produce: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let target = target(path)?;
    let beside = match &target {
        Target::Replace(real, _) => directory_of(real).to_path_buf(),
        Target::Stream(_) => std::env::temp_dir(),
    };
    let private = create_private_dir(&beside, path)?;
    let produced = private.join(format!("output.{extension}"));
    let outcome = produce(&produced).and_then(|()| {
        // The produced file, opened without following a link, is the one this run wrote.
        let written = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&produced)
            .with_context(|| format!("cannot read back {}", produced.display()))?;
        match target {
            Target::Stream(mut file) => {
                io::copy(&mut &written, &mut file).with_context(|| format!("writing {}", path.display()))?;
                Ok(())
            }
            Target::Replace(real, mode) => {
                keep_mode(&written, &mode).with_context(|| format!("writing {}", path.display()))?;
                fs::rename(&produced, &real).with_context(|| format!("cannot move the output to {}", path.display()))
            }
        }
    });
    let _ = fs::remove_file(&produced);
    let _ = fs::remove_dir(&private);
    outcome
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
            return Ok(Target::Replace(path.to_path_buf(), None));
        }
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
    };
    if let Some(input) = input_named(&metadata) {
        bail!(
            "{} is the input {}: not replacing a trace with its report (name another output file)",
            path.display(),
            input.display()
        );
    }
    if metadata.is_file() {
        // Through a link, the file it names is replaced and the link kept.
        let real = fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))?;
        return Ok(Target::Replace(real, Some(metadata.permissions())));
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

/// The directory `real` is in (`.` for a bare name).
fn directory_of(real: &Path) -> &Path {
    match real.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A fresh short name, `.streamtrace-<12 hex digits>.<suffix>`: random, so that nobody can plant something at it
/// beforehand, and short, so that it fits beside a target of the longest name a filesystem allows.
fn fresh_name(suffix: &str) -> String {
    // RandomState's keys are random per process and change with every instance.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    format!(".streamtrace-{:012x}.{suffix}", hasher.finish() & 0xffff_ffff_ffff)
}

/// Creates a new temporary file in `dir`, exclusively, for the output `asked`.
fn create_exclusive(dir: &Path, suffix: &str, asked: &Path) -> anyhow::Result<(PathBuf, File)> {
    for _ in 0..NAME_ATTEMPTS {
        let tmp = dir.join(fresh_name(suffix));
        match File::options().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(cannot_write_in(dir, asked, e)),
        }
    }
    bail!("cannot write {}: no free temporary name in {} after {NAME_ATTEMPTS} tries", asked.display(), dir.display())
}

/// Creates a new directory in `dir`, exclusively and for this user only, for the output `asked`.
fn create_private_dir(dir: &Path, asked: &Path) -> anyhow::Result<PathBuf> {
    for _ in 0..NAME_ATTEMPTS {
        let private = dir.join(fresh_name("tmp.d"));
        match fs::DirBuilder::new().mode(0o700).create(&private) {
            Ok(()) => return Ok(private),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(cannot_write_in(dir, asked, e)),
        }
    }
    bail!("cannot write {}: no free temporary name in {} after {NAME_ATTEMPTS} tries", asked.display(), dir.display())
}

/// Why nothing can be written into `dir`, said of the output the user named.
fn cannot_write_in(dir: &Path, asked: &Path, e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::NotFound {
        anyhow::anyhow!("{}: the directory {} does not exist", asked.display(), dir.display())
    } else {
        anyhow::Error::new(e).context(format!(
            "cannot write {}: cannot create a file in {}",
            asked.display(),
            dir.display()
        ))
    }
}

/// Gives the file that will replace another that file's permission bits.
fn keep_mode(file: &File, mode: &Option<Permissions>) -> io::Result<()> {
    match mode {
        Some(permissions) => file.set_permissions(Permissions::from_mode(permissions.mode() & 0o7777)),
        None => Ok(()),
    }
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

    /// A test's empty folder, removed with what it holds when the test ends (passed or not).
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl AsRef<Path> for Scratch {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("streamtrace-output-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
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

    #[test]
    fn temporary_names_are_short_fresh_and_never_follow_a_link() {
        let dir = scratch("fresh");
        let names: std::collections::HashSet<String> = (0..64).map(|_| fresh_name("tmp")).collect();
        assert_eq!(names.len(), 64, "every name is new");
        assert!(names.iter().all(|n| n.len() <= 30), "{names:?}");
        let victim = dir.join("victim");
        fs::write(&victim, "mine").expect("write");
        let (tmp, mut file) = create_exclusive(&dir, "tmp", &dir.join("out")).expect("created");
        file.write_all(b"x").expect("write");
        assert!(fs::symlink_metadata(&tmp).expect("made").is_file());
        assert_eq!(fs::read_to_string(&victim).expect("read"), "mine");
    }

    #[test]
    fn a_replaced_file_keeps_its_permission_bits() {
        let dir = scratch("mode");
        let path = dir.join("report.txt");
        fs::write(&path, "old").expect("write");
        fs::set_permissions(&path, Permissions::from_mode(0o600)).expect("chmod");
        write_atomically(&path, |out| out.write_all(b"new")).expect("written");
        assert_eq!(fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o600);
        write_atomically_with(&path, "txt", |tmp| fs::write(tmp, "newer").context("write")).expect("written");
        assert_eq!(fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_to_string(&path).expect("read"), "newer");
        assert_eq!(fs::read_dir(&dir).expect("list").count(), 1, "no temporary file or directory left");
    }

    #[test]
    fn a_protected_input_is_never_replaced_even_through_a_link() {
        let dir = scratch("input");
        let (input, link) = (dir.join("trace.json"), dir.join("link.json"));
        fs::write(&input, "trace").expect("write");
        std::os::unix::fs::symlink(&input, &link).expect("symlink");
        protect_input(&link);
        for target in [&input, &link] {
            let error = write_atomically(target, |out| out.write_all(b"report")).expect_err("refused");
            assert!(error.to_string().contains("is the input"), "{error}");
        }
        assert_eq!(fs::read_to_string(&input).expect("read"), "trace");
        // Forgotten before its folder goes: a file of another test could be given the freed inode.
        INPUTS.lock().expect("inputs").retain(|(_, _, path)| !path.starts_with(&*dir));
    }
}
