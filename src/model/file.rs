// SPDX-License-Identifier: Apache-2.0
//! Files tlsprof writes and reads back: written whole or not at all, read with a bound.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Writes `path` through a temporary file beside it, synced and renamed into place: an interrupted, killed
/// or failed write leaves whatever was at `path` before, never a truncated file.
pub fn write_atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = TempFile(dir.join(format!(
        ".{}.{}-{nanos}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )));
    // create_new (O_EXCL): never through a name someone else put there first, a symlink included.
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&temp.0)
        .with_context(|| format!("cannot create {}", temp.0.display()))?;
    let mut out = BufWriter::new(file);
    write(&mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    fs::rename(&temp.0, path)?;
    temp.persisted();
    // The rename itself reaches the disk with the directory.
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// A temporary file removed on drop unless it was renamed into place.
struct TempFile(PathBuf);

impl TempFile {
    fn persisted(self) {
        std::mem::forget(self);
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// The bytes of a regular file of at most `limit` bytes. `what` names the file in errors ("recording").
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    if !meta.is_file() {
        bail!("cannot read {what} {}: not a regular file", path.display());
    }
    if meta.len() > limit {
        bail!(
            "{} is {} bytes, more than a {what} may be ({limit} bytes): it is not one tlsprof wrote",
            path.display(),
            meta.len()
        );
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // It may grow after the check: read one byte past the limit to tell.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!("{} grew past {limit} bytes while it was read", path.display());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tlsprof-file-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = scratch("atomic");
        let path = dir.join("out.tlsprof");
        write_atomically(&path, |w| Ok(w.write_all(b"first")?)).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        // Fails half way, as a full disk or a serializer error would.
        let err = write_atomically(&path, |w| {
            w.write_all(&[b'x'; 100_000])?;
            bail!("simulated failure")
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "simulated failure");
        assert_eq!(fs::read(&path).unwrap(), b"first");
        assert_eq!(entries(&dir), ["out.tlsprof"]);
        write_atomically(&path, |w| Ok(w.write_all(b"second")?)).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        assert_eq!(entries(&dir), ["out.tlsprof"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_are_bounded_and_only_of_regular_files() {
        let dir = scratch("bounded");
        let path = dir.join("rec");
        fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_bounded(&path, 10, "recording").unwrap(), b"0123456789");
        let err = read_bounded(&path, 9, "recording").unwrap_err().to_string();
        assert!(
            err.contains("is 10 bytes, more than a recording may be (9 bytes)"),
            "{err}"
        );
        let err = read_bounded(&dir, 10, "recording").unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let err = read_bounded(Path::new("/dev/zero"), 10, "recording")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
