//! The llama-family transformer of a GGUF file on the CPU: weight loading (every matrix
//! re-quantised to the Q8_0 layout of `wright-kernels`), the forward pass, and a KV cache that
//! can be rolled back.
//!
//! Why not `candle-transformers`' `quantized_llama` (candle still reads the GGUF file here):
//! speculative decoding needs a KV cache that can be truncated after rejected draft tokens,
//! and a forward pass over several new tokens whose logits are *bit-identical* to feeding the
//! same tokens one at a time (greedy output must not change with speculation), and cheap per
//! token, which is the point of verifying a draft in one pass.
//!
//! How both are kept: every kernel computes each row of the hidden state from that row alone,
//! in a fixed order, whatever the batch (the invariant of `wright-kernels`); attention mixes
//! positions, but each row attends over the cache up to its own position, which holds the
//! same keys and values however the tokens were batched. The weights are loaded from memory
//! once per pass and used for every row in it, so a verification pass of k tokens costs far
//! less than k single passes (`docs/benchmarks.md`, "local").

// host paths: the user's GGUF model file (a workspace may not name one).

use std::fs::File;
use std::path::Path;

use candle_core::Device;
use candle_core::quantized::gguf_file;
use wright_kernels::ops::{self, KvView};
use wright_kernels::q8::{Q8Matrix, Q8Rows};

use super::LocalError;

/// Hyper-parameters read from the GGUF metadata (`llama.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub layers: usize,
    pub dim: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub context_length: usize,
    pub rope_base: f32,
    pub norm_eps: f64,
    pub vocab_size: usize,
}

/// What the weights were stored as and what they run as, for `wright doctor` and the bench.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// `(dtype, tensor count)` as found in the file.
    pub file_types: Vec<(String, usize)>,
    /// Matrices re-quantised to the kernels' Q8_0 layout at load.
    pub requantized: usize,
    /// Bytes of weights held in memory after loading.
    pub weight_bytes: usize,
}

struct Layer {
    attn_norm: Vec<f32>,
    wq: Q8Matrix,
    wk: Q8Matrix,
    wv: Q8Matrix,
    wo: Q8Matrix,
    ffn_norm: Vec<f32>,
    w_gate: Q8Matrix,
    w_up: Q8Matrix,
    w_down: Q8Matrix,
}

/// The weights; shared by every generation running on the model.
pub struct Model {
    pub config: Config,
    pub report: LoadReport,
    /// Rows are dequantized as tokens are looked up.
    embedding: Q8Matrix,
    /// `None`: tied to the embedding (SmolLM2 and other small models).
    output: Option<Q8Matrix>,
    layers: Vec<Layer>,
    final_norm: Vec<f32>,
    /// `[position][head_dim / 2]` tables of the rotary embedding.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

/// The logits of consecutive rows, one vocabulary's worth each, in one buffer (a verification
/// pass's sixteen rows are 3 MB: copied out row by row they cost a memory pass of their own).
pub struct Logits {
    values: Vec<f32>,
    vocab: usize,
}

impl Logits {
    /// Row `i`'s logits; empty past the last row.
    pub fn row(&self, i: usize) -> &[f32] {
        self.values
            .get(i * self.vocab..(i + 1) * self.vocab)
            .unwrap_or_default()
    }

    /// Row `i`'s logits, taking the buffer when it is the first row.
    pub fn into_row(mut self, i: usize) -> Vec<f32> {
        if i == 0 {
            self.values.truncate(self.vocab);
            self.values
        } else {
            self.row(i).to_vec()
        }
    }
}

/// Keys and values of the positions seen so far, per layer, in buffers with room to grow.
/// Truncating it ([`KvCache::truncate`]) forgets the last positions: the rollback after
/// rejected draft tokens.
pub struct KvCache {
    /// Per layer: keys `[kv_head][head_dim][capacity]`, values `[kv_head][capacity][head_dim]`
    /// (the layouts `wright_kernels::ops::attention` reads fastest).
    layers: Vec<(Vec<f32>, Vec<f32>)>,
    capacity: usize,
    len: usize,
}

impl KvCache {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

fn err(context: &str) -> impl Fn(candle_core::Error) -> LocalError + '_ {
    move |source| LocalError::Candle {
        context: context.to_owned(),
        source,
    }
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Result<usize, LocalError> {
    content
        .metadata
        .get(key)
        .ok_or_else(|| LocalError::Format(format!("the GGUF metadata has no {key}")))?
        .to_u32()
        .map(|v| v as usize)
        .map_err(err(key))
}

fn metadata_f32(content: &gguf_file::Content, key: &str) -> Option<f32> {
    content.metadata.get(key).and_then(|v| v.to_f32().ok())
}

/// Every matrix and norm has the shape the metadata implies, so the forward pass (which
/// trusts them) cannot index out of bounds on a malformed file.
fn check_shapes(
    config: &Config,
    embedding: &Q8Matrix,
    output: Option<&Q8Matrix>,
    layers: &[Layer],
    final_norm: &[f32],
) -> Result<(), LocalError> {
    let (dim, kv_dim) = (config.dim, config.kv_heads * config.head_dim);
    let ffn = layers.first().map_or(0, |l| l.w_up.rows());
    let mismatch = |what: String, found: (usize, usize), want: (usize, usize)| {
        Err(LocalError::Format(format!(
            "{what} is {}×{}, the metadata implies {}×{}",
            found.0, found.1, want.0, want.1
        )))
    };
    let shape = |m: &Q8Matrix| (m.rows(), m.cols());
    if embedding.cols() != dim {
        return mismatch(
            "token_embd".into(),
            shape(embedding),
            (embedding.rows(), dim),
        );
    }
    if let Some(output) = output
        && shape(output) != (embedding.rows(), dim)
    {
        return mismatch("output".into(), shape(output), (embedding.rows(), dim));
    }
    if layers.len() != config.layers {
        return Err(LocalError::Format(format!(
            "{} layers read, the metadata says {}",
            layers.len(),
            config.layers
        )));
    }
    for (i, layer) in layers.iter().enumerate() {
        let expected = [
            ("attn_q", &layer.wq, (dim, dim)),
            ("attn_k", &layer.wk, (kv_dim, dim)),
            ("attn_v", &layer.wv, (kv_dim, dim)),
            ("attn_output", &layer.wo, (dim, dim)),
            ("ffn_gate", &layer.w_gate, (ffn, dim)),
            ("ffn_up", &layer.w_up, (ffn, dim)),
            ("ffn_down", &layer.w_down, (dim, ffn)),
        ];
        for (name, matrix, want) in expected {
            if shape(matrix) != want {
                return mismatch(format!("blk.{i}.{name}"), shape(matrix), want);
            }
        }
        if layer.attn_norm.len() != dim || layer.ffn_norm.len() != dim {
            return Err(LocalError::Format(format!(
                "blk.{i}'s norms do not have {dim} weights"
            )));
        }
    }
    if final_norm.len() != dim {
        return Err(LocalError::Format(format!(
            "output_norm does not have {dim} weights"
        )));
    }
    Ok(())
}

impl Model {
    /// Reads the metadata and weights of a llama-family GGUF file.
    pub fn load(path: &Path, content: &gguf_file::Content) -> Result<Self, LocalError> {
        let architecture = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if architecture != "llama" {
            return Err(LocalError::Format(format!(
                "general.architecture is {architecture:?}; only llama-family models (Llama, \
                 SmolLM, TinyLlama, Qwen-style llama exports) are supported"
            )));
        }
        let heads = metadata_u32(content, "llama.attention.head_count")?;
        let dim = metadata_u32(content, "llama.embedding_length")?;
        let config = Config {
            layers: metadata_u32(content, "llama.block_count")?,
            dim,
            heads,
            kv_heads: metadata_u32(content, "llama.attention.head_count_kv").unwrap_or(heads),
            head_dim: dim / heads.max(1),
            context_length: metadata_u32(content, "llama.context_length").unwrap_or(2048),
            rope_base: metadata_f32(content, "llama.rope.freq_base").unwrap_or(10_000.0),
            norm_eps: metadata_f32(content, "llama.attention.layer_norm_rms_epsilon")
                .unwrap_or(1e-5) as f64,
            vocab_size: 0,
        };
        if heads == 0
            || config.kv_heads == 0
            || !heads.is_multiple_of(config.kv_heads)
            || !dim.is_multiple_of(heads)
            || !config.head_dim.is_multiple_of(2)
        {
            return Err(LocalError::Format(format!(
                "{heads} attention heads over {} key/value heads and {dim} dimensions do not \
                 divide evenly",
                config.kv_heads
            )));
        }
        let mut file = File::open(path).map_err(|source| LocalError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut report = LoadReport::default();
        let mut types = std::collections::BTreeMap::<String, usize>::new();
        for info in content.tensor_infos.values() {
            *types.entry(format!("{:?}", info.ggml_dtype)).or_default() += 1;
        }
        report.file_types = types.into_iter().collect();

        let mut dense = |name: &str| -> Result<(Vec<f32>, Vec<usize>), LocalError> {
            let tensor = content
                .tensor(&mut file, name, &Device::Cpu)
                .map_err(err(name))?;
            let dims = tensor.shape().dims().to_vec();
            let values = tensor
                .dequantize(&Device::Cpu)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(err(name))?;
            Ok((values, dims))
        };
        let mut matrix = |name: &str| -> Result<Q8Matrix, LocalError> {
            let (values, dims) = dense(name)?;
            let [rows, cols] = dims[..] else {
                return Err(LocalError::Format(format!(
                    "{name} is not a matrix: {dims:?}"
                )));
            };
            let matrix = Q8Matrix::quantize(&values, rows, cols)
                .map_err(|e| LocalError::Format(format!("{name}: {e}")))?;
            report.requantized += 1;
            report.weight_bytes += matrix.size_in_bytes();
            Ok(matrix)
        };

        let embedding = matrix("token_embd.weight")?;
        let vocab_size = embedding.rows();
        let output = if content.tensor_infos.contains_key("output.weight") {
            Some(matrix("output.weight")?)
        } else {
            None
        };
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let name = |part: &str| format!("blk.{i}.{part}.weight");
            layers.push(Layer {
                wq: matrix(&name("attn_q"))?,
                wk: matrix(&name("attn_k"))?,
                wv: matrix(&name("attn_v"))?,
                wo: matrix(&name("attn_output"))?,
                w_gate: matrix(&name("ffn_gate"))?,
                w_up: matrix(&name("ffn_up"))?,
                w_down: matrix(&name("ffn_down"))?,
                attn_norm: Vec::new(),
                ffn_norm: Vec::new(),
            });
        }
        for (i, layer) in layers.iter_mut().enumerate() {
            layer.attn_norm = dense(&format!("blk.{i}.attn_norm.weight"))?.0;
            layer.ffn_norm = dense(&format!("blk.{i}.ffn_norm.weight"))?.0;
        }
        let final_norm = dense("output_norm.weight")?.0;
        check_shapes(&config, &embedding, output.as_ref(), &layers, &final_norm)?;

        let half = config.head_dim / 2;
        let inverse: Vec<f32> = (0..half)
            .map(|i| {
                1.0 / config
                    .rope_base
                    .powf(2.0 * i as f32 / config.head_dim as f32)
            })
            .collect();
        let positions = config.context_length;
        let mut cos = Vec::with_capacity(positions * half);
        let mut sin = Vec::with_capacity(positions * half);
        for p in 0..positions {
            for f in &inverse {
                let angle = p as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        Ok(Self {
            config: Config {
                vocab_size,
                ..config
            },
            report,
            embedding,
            output,
            layers,
            final_norm,
            cos,
            sin,
        })
    }

    /// An empty cache with room for `capacity` positions (grown when needed).
    pub fn new_cache(&self, capacity: usize) -> Result<KvCache, LocalError> {
        // A whole number of attention spans: the kernel scores a span at a time.
        let capacity = capacity
            .clamp(1, self.config.context_length)
            .next_multiple_of(ops::SPAN);
        let size = self.config.kv_heads * capacity * self.config.head_dim;
        Ok(KvCache {
            layers: (0..self.config.layers)
                .map(|_| (vec![0.0; size], vec![0.0; size]))
                .collect(),
            capacity,
            len: 0,
        })
    }

    /// Makes room for `needed` positions, copying into bigger buffers when full.
    fn reserve(&self, cache: &mut KvCache, needed: usize) -> Result<(), LocalError> {
        if needed > self.config.context_length {
            return Err(LocalError::ContextFull {
                needed,
                context: self.config.context_length,
            });
        }
        if needed <= cache.capacity {
            return Ok(());
        }
        let mut bigger = self.new_cache((cache.capacity * 2).max(needed))?;
        let capacity = bigger.capacity;
        let (hd, len) = (self.config.head_dim, cache.len);
        for ((keys, values), (new_keys, new_values)) in cache.layers.iter().zip(&mut bigger.layers)
        {
            // Keys are `[kv_head][head_dim][capacity]`: one run of `len` per (head, dim).
            for row in 0..self.config.kv_heads * hd {
                let (from, to) = (row * cache.capacity, row * capacity);
                new_keys[to..to + len].copy_from_slice(&keys[from..from + len]);
            }
            for head in 0..self.config.kv_heads {
                let (from, to) = (head * cache.capacity * hd, head * capacity * hd);
                new_values[to..to + len * hd].copy_from_slice(&values[from..from + len * hd]);
            }
        }
        bigger.len = cache.len;
        *cache = bigger;
        Ok(())
    }

    /// Prefill: runs `tokens` at the end of `cache` and returns the logits of the last one.
    pub fn forward_prefill(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<Vec<f32>, LocalError> {
        Ok(self.forward(cache, tokens, false)?.into_row(0))
    }

    /// Runs `tokens` at the end of `cache` and returns the logits of every one of them, each
    /// bit-identical to what feeding the tokens one at a time would give (see the module
    /// documentation). One token is the ordinary decoding step.
    pub fn forward_rows(&self, cache: &mut KvCache, tokens: &[u32]) -> Result<Logits, LocalError> {
        self.forward(cache, tokens, true)
    }

    fn forward(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        all_logits: bool,
    ) -> Result<Logits, LocalError> {
        if tokens.is_empty() {
            return Ok(Logits {
                values: Vec::new(),
                vocab: self.config.vocab_size,
            });
        }
        if let Some(&token) = tokens
            .iter()
            .find(|&&t| t as usize >= self.config.vocab_size)
        {
            return Err(LocalError::Format(format!(
                "token {token} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        let offset = cache.len;
        self.reserve(cache, offset + tokens.len())?;
        let logits =
            wright_kernels::on_workers(|| self.forward_inner(cache, tokens, offset, all_logits));
        cache.len = offset + tokens.len();
        Ok(logits)
    }

    fn forward_inner(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        offset: usize,
        all_logits: bool,
    ) -> Logits {
        let c = &self.config;
        let (m, dim, hd) = (tokens.len(), c.dim, c.head_dim);
        let kv_dim = c.kv_heads * hd;
        let ffn = self.layers.first().map_or(0, |l| l.w_up.rows());
        let eps = c.norm_eps as f32;
        let capacity = cache.capacity;

        let mut x = vec![0f32; m * dim];
        for (row, &token) in x.chunks_exact_mut(dim).zip(tokens) {
            self.embedding.row_into(token as usize, row);
        }
        let mut h = vec![0f32; m * dim];
        let mut q = vec![0f32; m * dim];
        let mut k = vec![0f32; m * kv_dim];
        let mut v = vec![0f32; m * kv_dim];
        let mut attended = vec![0f32; m * dim];
        let mut gate = vec![0f32; m * ffn];
        let mut up = vec![0f32; m * ffn];
        let mut quantized = Q8Rows::new();

        for (layer, (keys, values)) in self.layers.iter().zip(&mut cache.layers) {
            ops::rms_norm_rows(&x, &layer.attn_norm, eps, &mut h);
            quantized.quantize(&h, m, dim);
            layer.wq.matmul(&quantized, &mut q);
            layer.wk.matmul(&quantized, &mut k);
            layer.wv.matmul(&quantized, &mut v);
            ops::rotate_and_cache(
                ops::RowsToCache {
                    q: &mut q,
                    k: &mut k,
                    v: &v,
                    first: offset,
                    cos: &self.cos,
                    sin: &self.sin,
                },
                ops::KvViewMut {
                    keys,
                    values,
                    capacity,
                    kv_heads: c.kv_heads,
                    head_dim: hd,
                },
            );
            let view = KvView {
                keys,
                values,
                capacity,
                kv_heads: c.kv_heads,
                head_dim: hd,
            };
            ops::attention(&q, &view, offset + 1, c.heads, &mut attended);
            quantized.quantize(&attended, m, dim);
            layer.wo.matmul(&quantized, &mut h);
            ops::add(&mut x, &h);
            ops::rms_norm_rows(&x, &layer.ffn_norm, eps, &mut h);
            quantized.quantize(&h, m, dim);
            layer.w_gate.matmul(&quantized, &mut gate);
            layer.w_up.matmul(&quantized, &mut up);
            ops::silu_mul(&mut gate, &up);
            quantized.quantize(&gate, m, ffn);
            layer.w_down.matmul(&quantized, &mut h);
            ops::add(&mut x, &h);
        }
        let first = if all_logits { 0 } else { m - 1 };
        let rows = m - first;
        ops::rms_norm_rows(
            &x[first * dim..],
            &self.final_norm,
            eps,
            &mut h[..rows * dim],
        );
        quantized.quantize(&h[..rows * dim], rows, dim);
        let output = self.output.as_ref().unwrap_or(&self.embedding);
        let mut values = vec![0f32; rows * c.vocab_size];
        output.matmul(&quantized, &mut values);
        Logits {
            values,
            vocab: c.vocab_size,
        }
    }
}
