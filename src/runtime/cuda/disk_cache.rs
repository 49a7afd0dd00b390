//! On-disk cache of compiled kernel images: one file per key (rendered source, target arch,
//! NVRTC version, options), named by the key's 64-bit FNV-1a hash, holding the full key so a
//! hash collision is detected, checksummed, and written atomically (temp file + rename).

use super::compile::{Image, ImageKind};
use crate::config::debug_log;
use lazyfuse_codegen::ir::fnv1a;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

/// First bytes of every cache file.
const MAGIC: &[u8; 8] = b"LFKCACHE";
/// Bumped whenever the file layout or the meaning of a key changes.
const FORMAT: u32 = 1;

/// A directory of cached kernel images.
#[derive(Debug)]
pub(super) struct DiskCache {
    dir: PathBuf,
}

/// The result of a lookup.
pub(super) enum Lookup {
    /// A verified image.
    Hit(Image),
    /// Nothing usable, and why (for the debug log).
    Miss(String),
}

impl DiskCache {
    /// The cache the environment asks for: `LAZYFUSE_CACHE_DIR` (an empty value turns the
    /// disk cache off), else `$XDG_CACHE_HOME/lazyfuse`, else `$HOME/.cache/lazyfuse`. `None`
    /// (logged at debug level 1) when no candidate directory can be created.
    pub(super) fn from_env() -> Option<DiskCache> {
        let Some(candidates) = crate::config::kernel_cache_dirs() else {
            debug_log!(2, "disk kernel cache off (LAZYFUSE_CACHE_DIR is empty)");
            return None;
        };
        for dir in candidates {
            if let Some(c) = DiskCache::at(dir) {
                return Some(c);
            }
        }
        debug_log!(1, "no usable kernel cache directory: disk kernel cache off");
        None
    }

    /// A cache in `dir`, created if missing; `None` when it cannot be created.
    pub(super) fn at(dir: PathBuf) -> Option<DiskCache> {
        match std::fs::create_dir_all(&dir) {
            Ok(()) => {
                debug_log!(2, "disk kernel cache in {}", dir.display());
                Some(DiskCache { dir })
            }
            Err(e) => {
                debug_log!(1, "cannot create kernel cache dir {}: {e}", dir.display());
                None
            }
        }
    }

    /// The directory.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file holding `key`'s image.
    pub(super) fn path_for(&self, key: &str) -> PathBuf {
        let mut bytes = FORMAT.to_le_bytes().to_vec();
        bytes.extend_from_slice(key.as_bytes());
        self.dir.join(format!("{:016x}.lfk", fnv1a(&bytes)))
    }

    /// The verified image stored for `key`.
    pub(super) fn load(&self, key: &str) -> Lookup {
        let path = self.path_for(key);
        match std::fs::read(&path) {
            Ok(bytes) => match decode(&bytes, key) {
                Ok(img) => Lookup::Hit(img),
                Err(why) => Lookup::Miss(format!("{} ignored: {why}", path.display())),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Lookup::Miss(format!("no {}", path.display()))
            }
            Err(e) => Lookup::Miss(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Stores `img` for `key`, replacing any previous file atomically. Failures are only
    /// logged: the cache is an optimization.
    pub(super) fn store(&self, key: &str, img: &Image) {
        let path = self.path_for(key);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let thread = fnv1a(format!("{:?}", std::thread::current().id()).as_bytes());
        let tmp = self.dir.join(format!(
            ".{}.{}.{thread:x}.{}.{nanos:x}.tmp",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("kernel"),
            std::process::id(),
            super::CUDA.disk_seq.fetch_add(1, Relaxed),
        ));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&encode(key, img))?;
            drop(f);
            std::fs::rename(&tmp, &path)
        };
        match write() {
            Ok(()) => debug_log!(3, "kernel image stored in {}", path.display()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                debug_log!(1, "cannot write kernel cache file {}: {e}", path.display());
            }
        }
    }
}

/// `MAGIC | FORMAT u32 | kind u8 | key_len u64 | key | len u64 | image | fnv1a(all before) u64`,
/// integers little-endian.
fn encode(key: &str, img: &Image) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 4 + 1 + 8 + key.len() + 8 + img.bytes.len() + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.push(match img.kind {
        ImageKind::Cubin => 0,
        ImageKind::Ptx => 1,
    });
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(img.bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&img.bytes);
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// A bounds-checked reader over a byte slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    fn len(&mut self) -> Result<usize, String> {
        usize::try_from(self.u64()?).map_err(|_| "length overflow".to_string())
    }
}

/// Parses and verifies a cache file written for `key`.
fn decode(bytes: &[u8], key: &str) -> Result<Image, String> {
    let body_len = bytes.len().checked_sub(8).ok_or("truncated")?;
    let (body, sum) = bytes.split_at(body_len);
    if fnv1a(body).to_le_bytes() != sum {
        return Err("checksum mismatch".into());
    }
    let mut c = Cursor(body);
    if c.take(8)? != MAGIC {
        return Err("not a lazyfuse cache file".into());
    }
    let mut f = [0u8; 4];
    f.copy_from_slice(c.take(4)?);
    let format = u32::from_le_bytes(f);
    if format != FORMAT {
        return Err(format!("format {format}, expected {FORMAT}"));
    }
    let kind = match c.take(1)?[0] {
        0 => ImageKind::Cubin,
        1 => ImageKind::Ptx,
        k => return Err(format!("unknown image kind {k}")),
    };
    let key_len = c.len()?;
    if c.take(key_len)? != key.as_bytes() {
        return Err("key mismatch (hash collision or stale file)".into());
    }
    let img_len = c.len()?;
    let image = c.take(img_len)?;
    if !c.0.is_empty() {
        return Err("trailing bytes".into());
    }
    if image.is_empty() || (kind == ImageKind::Ptx && image.last() != Some(&0)) {
        return Err("malformed image".into());
    }
    Ok(Image {
        kind,
        bytes: image.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("lazyfuse-disk-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn cubin() -> Image {
        Image {
            kind: ImageKind::Cubin,
            bytes: b"\x7fELF fake cubin".to_vec(),
        }
    }

    #[test]
    fn round_trip_and_verification() {
        let img = cubin();
        let enc = encode("key one", &img);
        assert_eq!(decode(&enc, "key one").unwrap(), img);
        assert!(decode(&enc, "key two")
            .unwrap_err()
            .contains("key mismatch"));
        for cut in [0, 1, 8, 20, enc.len() - 1] {
            assert!(decode(&enc[..cut], "key one").is_err(), "cut {cut}");
        }
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x40;
            assert!(decode(&bad, "key one").is_err(), "flipped byte {i}");
        }
        let ptx = Image {
            kind: ImageKind::Ptx,
            bytes: b".version 9.0\0".to_vec(),
        };
        assert_eq!(decode(&encode("k", &ptx), "k").unwrap(), ptx);
    }

    #[test]
    fn store_load_overwrite() {
        let dir = temp_dir("store");
        let cache = DiskCache::at(dir.clone()).unwrap();
        assert!(matches!(cache.load("k"), Lookup::Miss(w) if w.starts_with("no ")));
        cache.store("k", &cubin());
        assert!(matches!(cache.load("k"), Lookup::Hit(i) if i == cubin()));
        // A corrupt file is a miss and is replaced by the next store.
        std::fs::write(cache.path_for("k"), b"garbage").unwrap();
        assert!(matches!(cache.load("k"), Lookup::Miss(w) if w.contains("ignored")));
        cache.store("k", &cubin());
        assert!(matches!(cache.load("k"), Lookup::Hit(_)));
        // Different keys, different files; no temp files left behind.
        assert_ne!(cache.path_for("k"), cache.path_for("k2"));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].ends_with(".lfk") && names[0].len() == 16 + 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_stores_never_expose_partial_files() {
        let dir = temp_dir("race");
        let cache = DiskCache::at(dir.clone()).unwrap();
        let big = Image {
            kind: ImageKind::Cubin,
            bytes: vec![7u8; 1 << 20],
        };
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..5 {
                        cache.store("k", &big);
                        match cache.load("k") {
                            Lookup::Hit(i) => assert_eq!(i, big),
                            Lookup::Miss(w) => panic!("{w}"),
                        }
                    }
                });
            }
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn uncreatable_dir_is_none() {
        let file = temp_dir("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(DiskCache::at(file.join("sub")).is_none());
        std::fs::remove_file(&file).unwrap();
    }
}
