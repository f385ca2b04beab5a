//! The tools' vectors under a sentence encoder, kept: each costs milliseconds to make (a
//! static model's, microseconds, are not kept), so each tool's is made once per listing
//! and model, and read back by later runs from the state folder.
//!
//! A vector is found by a digest of the text it was made from, so a tool whose definition
//! changes gets a new one. One file per model (`search-vectors/<model>.bin` in the state
//! folder, named by a digest of the model's folder, its weights' size and time, and its
//! config): `MCPVEC01`, the dimensions as a little-endian `u32`, then records of a 16-byte
//! digest and the vector's `f32`s. A file that does not read so is ignored and replaced.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::files;

const MAGIC: &[u8; 8] = b"MCPVEC01";

/// At most this many vectors are kept in a file: the tools of the current index first, then
/// those kept before (15 MB at 384 dimensions).
const MAX_KEPT: usize = 10_000;

/// A text's key: the first 16 bytes of its SHA-256.
pub(crate) type Key = [u8; 16];

pub(crate) fn key(text: &str) -> Key {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut key = [0; 16];
    key.copy_from_slice(&digest.as_ref()[..16]);
    key
}

/// The vectors made or read in this process, and the file they are kept in, if any.
#[derive(Default)]
pub(crate) struct Store {
    file: Option<PathBuf>,
    known: Mutex<HashMap<Key, Arc<[f32]>>>,
}

impl Store {
    /// A store kept in `file`, whose vectors are read now.
    pub(crate) fn kept_in(file: PathBuf, dim: usize) -> Store {
        let known = read(&file, dim).unwrap_or_default();
        Store {
            file: Some(file),
            known: Mutex::new(known),
        }
    }

    /// The vector of each text, made by `embed` for those not known yet (on every core), and
    /// written back to the file when any was made.
    pub(crate) fn vectors(
        &self,
        texts: &[String],
        dim: usize,
        embed: impl Fn(&str) -> Vec<f32> + Sync,
    ) -> Vec<Arc<[f32]>> {
        let keys: Vec<Key> = texts.iter().map(|text| key(text)).collect();
        let missing: Vec<usize> = {
            let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
            (0..texts.len())
                .filter(|at| !known.contains_key(&keys[*at]))
                .collect()
        };
        if !missing.is_empty() {
            let made = in_parallel(&missing, |at| embed(&texts[at]));
            let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
            for (at, vector) in missing.iter().zip(made) {
                known.insert(keys[*at], vector.into());
            }
            if let Some(file) = &self.file {
                write(file, dim, &keys, &known);
            }
        }
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        keys.iter().map(|key| known[key].clone()).collect()
    }
}

/// `make(at)` for each of `ats`, spread over the machine's cores, in order.
fn in_parallel(ats: &[usize], make: impl Fn(usize) -> Vec<f32> + Sync) -> Vec<Vec<f32>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let share = ats.len().div_ceil(cores.min(ats.len()).max(1));
    if share >= ats.len() {
        return ats.iter().map(|at| make(*at)).collect();
    }
    std::thread::scope(|scope| {
        let make = &make;
        let parts: Vec<_> = (ats.chunks(share))
            .map(|part| scope.spawn(move || part.iter().map(|at| make(*at)).collect::<Vec<_>>()))
            .collect();
        (parts.into_iter())
            .flat_map(|part| part.join().unwrap_or_default())
            .collect()
    })
}

fn read(file: &Path, dim: usize) -> Option<HashMap<Key, Arc<[f32]>>> {
    let bytes = files::read_private(file).ok()?;
    let record = 16 + dim * 4;
    let body = bytes.strip_prefix(MAGIC)?;
    let (stated, body) = body.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*stated) as usize != dim || body.len() % record != 0 {
        return None;
    }
    let mut known = HashMap::new();
    for record in body.chunks_exact(record).take(MAX_KEPT) {
        let (key, vector) = record.split_at(16);
        let vector: Vec<f32> = (vector.chunks_exact(4))
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        known.insert(key.try_into().ok()?, vector.into());
    }
    Some(known)
}

/// Writes the vectors of `first` and then others known, up to [`MAX_KEPT`]; a failure only
/// costs the next run the time to make them again.
fn write(file: &Path, dim: usize, first: &[Key], known: &HashMap<Key, Arc<[f32]>>) {
    let mut seen = std::collections::HashSet::new();
    let order = (first.iter().chain(known.keys())).filter(|key| seen.insert(*key));
    let mut bytes = MAGIC.to_vec();
    bytes.extend((dim as u32).to_le_bytes());
    for key in order.take(MAX_KEPT) {
        bytes.extend(key);
        known[key]
            .iter()
            .for_each(|x| bytes.extend(x.to_le_bytes()));
    }
    if let Some(dir) = file.parent()
        && files::private_dir(dir).is_ok()
    {
        let _ = files::replace(file, &bytes, 0o600, || Ok::<(), ()>(()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn vectors_are_made_once_and_read_back_by_the_next_store() {
        let dir = std::env::temp_dir().join(format!("mcp-cli-vectors-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("search-vectors/model.bin");
        let made = AtomicUsize::new(0);
        let embed = |text: &str| {
            made.fetch_add(1, Ordering::Relaxed);
            vec![text.len() as f32, 1.0]
        };
        let texts: Vec<String> = ["a", "bb", "ccc", "dddd", "eeeee"].map(String::from).into();
        let store = Store::kept_in(file.clone(), 2);
        let first = store.vectors(&texts, 2, embed);
        assert_eq!(made.load(Ordering::Relaxed), 5);
        assert_eq!(&*first[2], &[3.0, 1.0]);
        store.vectors(&texts, 2, embed);
        assert_eq!(made.load(Ordering::Relaxed), 5, "known in this process");
        let again = Store::kept_in(file.clone(), 2);
        let more: Vec<String> = ["bb", "ffffff"].map(String::from).into();
        let read = again.vectors(&more, 2, embed);
        assert_eq!(made.load(Ordering::Relaxed), 6, "only the new text is made");
        assert_eq!((&*read[0], &*read[1]), (&[2.0, 1.0][..], &[6.0, 1.0][..]));
        // Another model's dimensions, or a file cut short: nothing is read.
        assert!(read_vectors(&file, 3).is_none());
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
        assert!(read_vectors(&file, 2).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn read_vectors(file: &Path, dim: usize) -> Option<usize> {
        read(file, dim).map(|known| known.len())
    }
}
