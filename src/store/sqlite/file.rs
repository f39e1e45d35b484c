//! The database file before SQLite opens it. `--store sqlite:PATH` names a file, never an
//! SQLite URI, and an open that fails leaves nothing behind:
//!
//! - `:memory:` is refused: SQLite would keep that database in memory, not in a file of
//!   that name; `--store memory` says so plainly.
//! - SQLite is given the path absolute, its folders resolved. This SQLite is built with
//!   URI names on (`SQLITE_USE_URI`), so a name beginning with `file:` would be read as a
//!   URI whatever the open flags say; a name beginning with `/` never is.
//! - The file must be a regular file: SQLite would put a `-journal` beside a device such
//!   as `/dev/null`. The file itself, and an existing `-wal`, `-shm` or `-journal` beside
//!   it, must not be a symbolic link unless links are followed (`--follow-symlinks`);
//!   links among the folders above it are fine.
//! - No folder is created, except the missing folders of the default location (0700).
//! - A new database — a file created here, or an existing empty one — is made 0600 before
//!   SQLite writes to it (its `-wal` and `-shm` take that mode); an existing database
//!   keeps its mode.
//! - On Windows there are no mode bits: a new file and folder take the access list of
//!   the folder they are made in. The default location, `%LOCALAPPDATA%\convo`, is in
//!   the user's profile, which only that user (and the system's administrators) can read:
//!   that is what stands for 0600 and 0700 there.
//! - If opening fails after the claim, [`Claim::release`] removes what was created: the
//!   file, the `-wal`, `-shm` and `-journal` beside it that did not exist before, and the
//!   folders. A file that existed before is kept.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::store::sqlite::errors::{cannot_open, unavailable};

/// The files SQLite may keep beside a database, by suffix.
const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// A database file ready for SQLite, and what was created to get it there.
#[derive(Debug)]
pub struct Claim {
    /// Absolute, its folders resolved (and the file itself, when links are followed).
    pub path: PathBuf,
    /// The file was created here.
    created: bool,
    /// Which of `COMPANIONS` existed before SQLite opened the file.
    existed: [bool; 3],
    /// Folders created here, outermost first.
    folders: Vec<PathBuf>,
}

/// Checks `given` and makes it ready for SQLite: creates the file (0600) when missing,
/// and the missing folders above it only when `create_folders`.
pub fn claim(given: &Path, create_folders: bool, follow_symlinks: bool) -> Result<Claim> {
    if given.as_os_str() == ":memory:" {
        return Err(unavailable(
            "sqlite::memory: would be a database in memory, not a file: use --store memory \
             (or sqlite:./:memory: for a file of that name)"
                .into(),
        ));
    }
    let path = std::path::absolute(given).map_err(|e| cannot_open(given, e))?;
    let Some(folder) = path.parent().filter(|_| path.file_name().is_some()) else {
        return Err(unavailable(format!("{} does not name a file", given.display())));
    };
    let folders = if create_folders { create_folders_of(folder)? } else { Vec::new() };
    let mut claim = Claim { path: path.clone(), created: false, existed: [false; 3], folders };
    match claim.prepare(follow_symlinks) {
        Ok(()) => Ok(claim),
        Err(e) => {
            claim.release();
            Err(e)
        }
    }
}

impl Claim {
    /// Undoes the claim after a failed open: removes the file, its companions and the
    /// folders created here. SQLite's connections to the file must be closed.
    pub fn release(self) {
        if self.created {
            for (suffix, existed) in COMPANIONS.iter().zip(self.existed) {
                if !existed {
                    let _ = fs::remove_file(companion(&self.path, suffix));
                }
            }
            let _ = fs::remove_file(&self.path);
        }
        for folder in self.folders.iter().rev() {
            let _ = fs::remove_dir(folder);
        }
    }

    fn prepare(&mut self, follow_symlinks: bool) -> Result<()> {
        let (folder, name) = (self.path.parent().unwrap_or(Path::new("/")), self.path.file_name().unwrap_or_default());
        self.path = match fs::canonicalize(folder) {
            Ok(folder) if folder.is_dir() => folder.join(name),
            Ok(_) => {
                return Err(unavailable(format!(
                    "cannot create {}: {} is not a folder",
                    self.path.display(),
                    folder.display()
                )));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(unavailable(format!(
                    "cannot create {}: the folder {} does not exist",
                    self.path.display(),
                    folder.display()
                )));
            }
            Err(e) => return Err(unavailable(format!("cannot create {}: {e}", self.path.display()))),
        };
        // Twice at most: another process may create the file between the look and the
        // creation.
        for _ in 0..2 {
            let Some(meta) = self.look(follow_symlinks)? else {
                self.check_companions(follow_symlinks)?;
                if self.create()? {
                    return Ok(());
                }
                continue;
            };
            if !meta.is_file() {
                return Err(unavailable(format!("{} is not a regular file", self.path.display())));
            }
            self.check_companions(follow_symlinks)?;
            #[cfg(unix)]
            if meta.len() == 0 && self.log_is_empty() {
                let file = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&self.path)
                    .map_err(|e| cannot_open(&self.path, e))?;
                self.make_private(&file)?;
            }
            return Ok(());
        }
        Err(unavailable(format!("cannot create {}: it keeps appearing and disappearing", self.path.display())))
    }

    /// The file's own metadata (`None` when it does not exist), a link resolved first
    /// when links are followed.
    fn look(&mut self, follow_symlinks: bool) -> Result<Option<fs::Metadata>> {
        let meta = match fs::symlink_metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(cannot_open(&self.path, e)),
        };
        if !meta.file_type().is_symlink() {
            return Ok(Some(meta));
        }
        if !follow_symlinks {
            return Err(unavailable(format!(
                "{} is a symbolic link; give --follow-symlinks to open the file it points to",
                self.path.display()
            )));
        }
        self.path = fs::canonicalize(&self.path).map_err(|e| {
            unavailable(format!("{} is a symbolic link to a file that cannot be opened: {e}", self.path.display()))
        })?;
        fs::symlink_metadata(&self.path).map(Some).map_err(|e| cannot_open(&self.path, e))
    }

    /// Notes which companions exist; refuses one that is a link, unless links are
    /// followed.
    fn check_companions(&mut self, follow_symlinks: bool) -> Result<()> {
        for (i, suffix) in COMPANIONS.iter().enumerate() {
            let path = companion(&self.path, suffix);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() && !follow_symlinks => {
                    return Err(unavailable(format!(
                        "{} is a symbolic link; give --follow-symlinks to use it",
                        path.display()
                    )));
                }
                Ok(_) => self.existed[i] = true,
                Err(e) if e.kind() == ErrorKind::NotFound => self.existed[i] = false,
                Err(e) => return Err(cannot_open(&path, e)),
            }
        }
        Ok(())
    }

    /// Creates the file; `false` when another process created it first.
    fn create(&mut self) -> Result<bool> {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        let file = match options.open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(unavailable(format!("cannot create {}: {e}", self.path.display()))),
        };
        self.created = true;
        // The umask may have taken more than the group and others' bits.
        self.make_private(&file)?;
        Ok(true)
    }

    #[cfg(unix)]
    fn make_private(&self, file: &File) -> Result<()> {
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(|e| unavailable(format!("cannot make {} private (mode 0600): {e}", self.path.display())))
    }

    /// Windows: the file keeps the access list it inherited from its folder.
    #[cfg(not(unix))]
    fn make_private(&self, _file: &File) -> Result<()> {
        Ok(())
    }

    /// No write-ahead log, or an empty one: an empty file beside it holds no database.
    #[cfg(unix)]
    fn log_is_empty(&self) -> bool {
        !fs::metadata(companion(&self.path, COMPANIONS[0])).is_ok_and(|meta| meta.len() > 0)
    }
}

/// Why this process cannot write the database at `path` (claimed: it exists), or `None`
/// when it can: the file is on a read-only file system, or this user may not write it,
/// or may not write its folder (where SQLite makes the `-wal` and `-shm` beside it)
/// while those are not both there and writable. Such a database is opened for reading
/// only (`schema::Mode`).
pub fn unwritable(path: &Path) -> Option<String> {
    let cannot = |p: &Path| -> Option<std::io::Error> {
        #[cfg(unix)]
        {
            rustix::fs::access(p, rustix::fs::Access::WRITE_OK).err().map(std::io::Error::from)
        }
        #[cfg(not(unix))]
        {
            let read_only = fs::metadata(p).is_ok_and(|m| m.permissions().readonly());
            read_only.then(|| std::io::Error::from(ErrorKind::PermissionDenied))
        }
    };
    if let Some(e) = cannot(path) {
        return Some(format!("{} cannot be written: {e}", path.display()));
    }
    let folder = path.parent()?;
    let e = cannot(folder)?;
    let beside = ["-wal", "-shm"].map(|suffix| companion(path, suffix));
    if beside.iter().all(|p| p.exists() && cannot(p).is_none()) {
        return None;
    }
    Some(format!("its folder {} cannot be written: {e}", folder.display()))
}

/// Whether the write-ahead log beside `path` holds anything to read.
pub fn has_log(path: &Path) -> bool {
    fs::metadata(companion(path, COMPANIONS[0])).is_ok_and(|meta| meta.len() > 0)
}

/// Whether the shared-memory index of the log (`-shm`) is beside `path`: SQLite reads a
/// log it may not write only through one.
pub fn has_index(path: &Path) -> bool {
    companion(path, COMPANIONS[1]).exists()
}

/// `path` with `suffix` added to its file name, as SQLite names its companions.
fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// Creates the missing folders down to `folder` (0700); returns them, outermost first.
/// Removes them again if one cannot be created.
fn create_folders_of(folder: &Path) -> Result<Vec<PathBuf>> {
    let missing: Vec<&Path> = folder.ancestors().take_while(|d| fs::symlink_metadata(d).is_err()).collect();
    let mut created = Vec::new();
    for dir in missing.into_iter().rev() {
        #[cfg_attr(not(unix), expect(unused_mut, reason = "no mode to set"))]
        let mut builder = DirBuilder::new();
        #[cfg(unix)]
        builder.mode(0o700);
        match builder.create(dir) {
            Ok(()) => created.push(dir.to_owned()),
            // Another process was quicker; the folder is not ours to remove.
            Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => {
                for dir in created.iter().rev() {
                    let _ = fs::remove_dir(dir);
                }
                return Err(unavailable(format!("cannot create {}: {e}", dir.display())));
            }
        }
    }
    Ok(created)
}
