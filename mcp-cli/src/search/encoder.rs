//! A BERT sentence encoder, the kind sentence-transformers' all-MiniLM-L6-v2 is: the model's
//! own forward pass over a text's word pieces, mean-pooled, so a text's vector depends on its
//! words' order and company, not only on which words it holds.
//!
//! Plain safe Rust, no inference crate: post-LN BERT with absolute positions and erf GELU,
//! the weights read once into memory (F32, F16 or BF16), the word embeddings' rows read
//! from the file as texts need them (they are half of the file). A text costs about two
//! multiply-adds per weight per piece: a query of 15 pieces about 0.3 GFLOP, milliseconds.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Deserialize;

use super::semantic::{Dtype, Rows, Tensor};

/// At most this many pieces of a text are read, [CLS] and [SEP] among them, unless the
/// model's `sentence_bert_config.json` says less (all-MiniLM-L6-v2 was trained on 256).
const MAX_SEQUENCE: usize = 256;

/// The parts of a BERT `config.json` the forward pass needs.
#[derive(Deserialize)]
struct Config {
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "layer_norm_eps")]
    layer_norm_eps: f32,
    #[serde(default = "gelu")]
    hidden_act: String,
    #[serde(default = "absolute")]
    position_embedding_type: String,
}

fn layer_norm_eps() -> f32 {
    1e-12
}

fn gelu() -> String {
    "gelu".to_owned()
}

fn absolute() -> String {
    "absolute".to_owned()
}

#[derive(Deserialize)]
struct SentenceConfig {
    max_seq_length: Option<usize>,
}

/// A BERT encoder, loaded.
pub(crate) struct Encoder {
    /// The word embeddings, a row per piece, read as texts need them.
    words: Rows,
    /// The position embeddings, a row per place in the text.
    positions: Vec<f32>,
    /// The embedding of token type 0 (a text is always one segment here).
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    eps: f32,
    /// The most pieces read of a text, [CLS] and [SEP] among them.
    max_sequence: usize,
    /// The ids of [CLS] and [SEP].
    cls: u32,
    sep: u32,
}

/// `y = x W^T + b`, `W` kept as the file has it: a row per output.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one matrix: one larger product is faster than three.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    output_norm: Norm,
}

/// What reading the weights needs: the file, where its data starts, and its header.
pub(crate) struct Weights<'a> {
    pub(crate) file: &'a File,
    pub(crate) data_at: u64,
    pub(crate) tensors: &'a HashMap<String, Tensor>,
    /// `bert.` for checkpoints that name BertModel's weights so, else empty.
    pub(crate) prefix: &'a str,
}

impl Weights<'_> {
    /// The first dimension of tensor `name` (its rows).
    fn first_dim(&self, name: &str) -> Result<usize, String> {
        let full = format!("{}{name}", self.prefix);
        (self.tensors.get(&full))
            .and_then(|tensor| tensor.shape.first().copied())
            .ok_or_else(|| format!("no tensor {full}"))
    }

    fn tensor(&self, name: &str, shape: &[usize]) -> Result<(&Tensor, Dtype), String> {
        let full = format!("{}{name}", self.prefix);
        let tensor = (self.tensors.get(&full)).ok_or_else(|| format!("no tensor {full}"))?;
        if tensor.shape != shape {
            return Err(format!(
                "{full} is {:?}, where the config makes it {shape:?}",
                tensor.shape
            ));
        }
        let dtype = Dtype::named(&tensor.dtype)
            .ok_or_else(|| format!("{full} is {}; F32, F16 and BF16 are read", tensor.dtype))?;
        let [start, end] = tensor.data_offsets;
        let size = (shape.iter()).try_fold(dtype.size(), |size, n| size.checked_mul(*n));
        if size.is_none() || end.checked_sub(start) != size {
            return Err(format!("{full}'s size does not match its shape"));
        }
        Ok((tensor, dtype))
    }

    /// Tensor `name`, of `shape`, as `f32`s.
    fn read(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let (tensor, dtype) = self.tensor(name, shape)?;
        let [start, end] = tensor.data_offsets;
        let mut bytes = vec![0; end - start];
        (self
            .file
            .read_exact_at(&mut bytes, self.data_at + start as u64))
        .map_err(|e| format!("{}{name}: {e}", self.prefix))?;
        Ok(dtype.decode(&bytes))
    }

    fn linear(&self, name: &str, outputs: usize, inputs: usize) -> Result<Linear, String> {
        Ok(Linear {
            weight: self.read(&format!("{name}.weight"), &[outputs, inputs])?,
            bias: self.read(&format!("{name}.bias"), &[outputs])?,
            inputs,
        })
    }

    fn norm(&self, name: &str, size: usize) -> Result<Norm, String> {
        Ok(Norm {
            weight: self.read(&format!("{name}.weight"), &[size])?,
            bias: self.read(&format!("{name}.bias"), &[size])?,
        })
    }
}

impl Encoder {
    /// The encoder whose `config.json` is in `dir` and whose weights are `weights`; `vocab`
    /// is the tokenizer's, which must name [CLS] and [SEP].
    pub(crate) fn load(
        dir: &Path,
        weights: &Weights<'_>,
        vocab: &HashMap<String, u32>,
    ) -> Result<Encoder, String> {
        let path = dir.join("config.json");
        let config = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let config: Config = serde_json::from_slice(&config)
            .map_err(|e| format!("{}: not a BERT config: {e}", path.display()))?;
        if config.hidden_act != "gelu" || config.position_embedding_type != "absolute" {
            return Err(format!(
                "{}: only BERT with erf GELU and absolute positions is read",
                path.display()
            ));
        }
        let (hidden, heads) = (config.hidden_size, config.num_attention_heads);
        if heads == 0 || hidden == 0 || hidden % heads != 0 {
            return Err(format!(
                "{}: {hidden} dimensions in {heads} heads",
                path.display()
            ));
        }
        let sentence = std::fs::read(dir.join("sentence_bert_config.json")).ok();
        let sentence: Option<SentenceConfig> =
            sentence.and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let special = |name: &str| {
            (vocab.get(name).copied()).ok_or_else(|| format!("the tokenizer has no {name} piece"))
        };
        let places = weights.first_dim("embeddings.position_embeddings.weight")?;
        if places < 2 {
            return Err("the position embeddings have room for no text".to_owned());
        }
        let (tensor, dtype) = weights.tensor(
            "embeddings.word_embeddings.weight",
            &[
                weights.first_dim("embeddings.word_embeddings.weight")?,
                hidden,
            ],
        )?;
        let words = Rows::new(
            weights.file.try_clone().map_err(|e| e.to_string())?,
            weights.data_at + tensor.data_offsets[0] as u64,
            dtype,
            tensor.shape[0],
            hidden,
        );
        let mut layers = Vec::new();
        for i in 0..config.num_hidden_layers {
            let at = |part: &str| format!("encoder.layer.{i}.{part}");
            let [q, k, v] = ["query", "key", "value"]
                .map(|name| weights.linear(&at(&format!("attention.self.{name}")), hidden, hidden));
            let (q, k, v) = (q?, k?, v?);
            let qkv = Linear {
                weight: [q.weight, k.weight, v.weight].concat(),
                bias: [q.bias, k.bias, v.bias].concat(),
                inputs: hidden,
            };
            let intermediate = config.intermediate_size;
            layers.push(Layer {
                qkv,
                attention_out: weights.linear(&at("attention.output.dense"), hidden, hidden)?,
                attention_norm: weights.norm(&at("attention.output.LayerNorm"), hidden)?,
                up: weights.linear(&at("intermediate.dense"), intermediate, hidden)?,
                down: weights.linear(&at("output.dense"), hidden, intermediate)?,
                output_norm: weights.norm(&at("output.LayerNorm"), hidden)?,
            });
        }
        let types = weights
            .first_dim("embeddings.token_type_embeddings.weight")?
            .max(1);
        let token_types =
            weights.read("embeddings.token_type_embeddings.weight", &[types, hidden])?;
        Ok(Encoder {
            words,
            positions: weights.read("embeddings.position_embeddings.weight", &[places, hidden])?,
            token_type: token_types[..hidden].to_vec(),
            embedding_norm: weights.norm("embeddings.LayerNorm", hidden)?,
            layers,
            hidden,
            heads,
            eps: config.layer_norm_eps,
            max_sequence: (sentence.and_then(|s| s.max_seq_length))
                .unwrap_or(MAX_SEQUENCE)
                .min(places),
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
        })
    }

    /// How many pieces the word embeddings have rows for.
    pub(crate) fn count(&self) -> usize {
        self.words.count()
    }

    pub(crate) fn dim(&self) -> usize {
        self.hidden
    }

    /// The vector of a text whose word pieces are `pieces`: the last layer's vectors of
    /// [CLS], the pieces and [SEP], summed (the caller scales it to length 1, which makes it
    /// their mean's direction).
    pub(crate) fn embed(&self, pieces: &[u32]) -> Vec<f32> {
        let room = self.max_sequence.saturating_sub(2);
        let ids: Vec<u32> = std::iter::once(self.cls)
            .chain(pieces.iter().copied().take(room))
            .chain([self.sep])
            .collect();
        let hidden = self.hidden;
        let length = ids.len();
        let mut x = Vec::with_capacity(length * hidden);
        for (place, id) in ids.iter().enumerate() {
            let word = self.words.row(*id);
            let position = &self.positions[place * hidden..][..hidden];
            x.extend(
                (word.iter().zip(position).zip(&self.token_type)).map(|((w, p), t)| w + p + t),
            );
        }
        self.embedding_norm.apply(&mut x, self.eps);
        for layer in &self.layers {
            let context = self.attention(&layer.qkv.apply(&x, length), length);
            add(&mut x, &layer.attention_out.apply(&context, length));
            layer.attention_norm.apply(&mut x, self.eps);
            let mut up = layer.up.apply(&x, length);
            up.iter_mut().for_each(|value| *value = erf_gelu(*value));
            add(&mut x, &layer.down.apply(&up, length));
            layer.output_norm.apply(&mut x, self.eps);
        }
        let mut sum = vec![0.0_f32; hidden];
        for row in x.chunks_exact(hidden) {
            add(&mut sum, row);
        }
        sum
    }

    /// Self-attention of every piece over every other, each head apart: `qkv` holds each
    /// piece's query, key and value side by side; the result, each piece's context.
    fn attention(&self, qkv: &[f32], length: usize) -> Vec<f32> {
        let hidden = self.hidden;
        let size = hidden / self.heads;
        let scale = 1.0 / (size as f32).sqrt();
        let mut context = vec![0.0_f32; length * hidden];
        let mut scores = vec![0.0_f32; length];
        for head in 0..self.heads {
            let part = |piece: usize, which: usize| {
                &qkv[piece * 3 * hidden + which * hidden + head * size..][..size]
            };
            for i in 0..length {
                let query = part(i, 0);
                for (j, score) in scores.iter_mut().enumerate() {
                    *score = lanes_dot(query, part(j, 1)) * scale;
                }
                softmax(&mut scores);
                let out = &mut context[i * hidden + head * size..][..size];
                for (j, weight) in scores.iter().enumerate() {
                    for (o, v) in out.iter_mut().zip(part(j, 2)) {
                        *o += weight * v;
                    }
                }
            }
        }
        context
    }
}

impl Linear {
    /// `x` (`rows` rows of `inputs`) times the weights, plus the bias: each weight row
    /// against every row of `x`, so the weights, far larger than a text's rows, are read
    /// from memory once per text. (Measured and not kept: four rows against each weight
    /// load, 2-4x slower, as the compiler no longer kept the lanes in registers; AVX2 with
    /// fused multiply-adds, which needs `unsafe`, no faster.)
    fn apply(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let outputs = self.bias.len();
        let mut y = vec![0.0_f32; rows * outputs];
        let weights = self.weight.chunks_exact(self.inputs).zip(&self.bias);
        for (o, (weights, bias)) in weights.enumerate() {
            for (r, row) in x.chunks_exact(self.inputs).enumerate() {
                y[r * outputs + o] = lanes_dot(row, weights) + bias;
            }
        }
        y
    }
}

/// `a . b`, summed in eight lanes that the compiler keeps in vector registers (a plain sum
/// must keep its order, so it adds one product at a time).
fn lanes_dot(a: &[f32], b: &[f32]) -> f32 {
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = (a8.remainder().iter().zip(b8.remainder()))
        .map(|(x, y)| x * y)
        .sum();
    let mut lanes = [0.0_f32; 8];
    for (x, y) in a8.zip(b8) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

impl Norm {
    /// Each row of `x` normalised to mean 0 and variance 1, then scaled and shifted.
    fn apply(&self, x: &mut [f32], eps: f32) {
        let size = self.weight.len();
        for row in x.chunks_exact_mut(size) {
            let mean = row.iter().sum::<f32>() / size as f32;
            let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / size as f32;
            let scale = 1.0 / (variance + eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = (*v - mean) * scale * w + b;
            }
        }
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

fn softmax(scores: &mut [f32]) {
    let top = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0;
    for score in scores.iter_mut() {
        *score = (*score - top).exp();
        total += *score;
    }
    scores.iter_mut().for_each(|score| *score /= total);
}

/// `x * P(N(0,1) < x)`, the erf form of GELU that BERT uses. Rust's standard library has no
/// erf; `1 - erf(a)` for `a >= 0` is Abramowitz and Stegun's 7.1.26, whose error (under
/// 1.5e-7) is below `f32`'s resolution.
fn erf_gelu(x: f32) -> f32 {
    let a = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let complement = poly * (-a * a).exp();
    x.max(0.0) - 0.5 * x.abs() * complement
}
