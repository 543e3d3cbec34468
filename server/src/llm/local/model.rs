//! The llama-family transformer of a GGUF file, run with candle on the CPU: weight loading
//! (with Q4/Q5 weights re-quantised to Q8_0, which candle's CPU kernels run about twice as
//! fast), the forward pass, and a KV cache that can be rolled back.
//!
//! Why not `candle-transformers`' `quantized_llama`: speculative decoding needs a KV cache that
//! can be truncated after rejected draft tokens and a forward pass over several new tokens at
//! an arbitrary offset whose results are *bit-identical* to feeding the same tokens one at a
//! time (greedy output must not change with speculation). Neither is available there.
//!
//! How bit-identity is kept: every operation on a row of the hidden state depends only on that
//! row (quantized matmuls quantize and dot each activation row on its own; norms, rotary
//! embedding and activations are per row), except attention, which mixes positions. So a
//! verification pass ([`Model::forward_rows`]) batches all the weight matmuls (the expensive,
//! memory-bound part that speculation amortises) but runs attention row by row with exactly
//! the shapes and memory layout a single-token step uses. The prompt's prefill, shared by both
//! modes, uses one masked attention over the whole chunk.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{D, DType, Device, Module, Tensor};

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
    /// Tensors converted to Q8_0 at load.
    pub requantized: usize,
    /// Bytes of weights held in memory after loading.
    pub weight_bytes: usize,
}

/// How weights are held in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// As stored in the file.
    AsStored,
    /// Q4_0, Q4_1, Q5_0 and Q5_1 tensors re-quantised to Q8_0 (the default: measured about
    /// twice as fast on x86 CPUs, see `docs/benchmarks.md`).
    Q8,
}

struct Layer {
    attn_norm: Tensor,
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    wo: QMatMul,
    ffn_norm: Tensor,
    w_gate: QMatMul,
    w_up: QMatMul,
    w_down: QMatMul,
}

/// The weights; shared by every generation running on the model.
pub struct Model {
    pub config: Config,
    pub report: LoadReport,
    /// Quantized; rows are dequantized as tokens are looked up.
    embedding: Arc<QTensor>,
    layers: Vec<Layer>,
    final_norm: Tensor,
    output: QMatMul,
    /// `(context_length, head_dim / 2)` tables of the rotary embedding.
    cos: Tensor,
    sin: Tensor,
}

/// Keys and values of the positions seen so far, per layer, in buffers with room to grow.
/// Truncating it ([`KvCache::truncate`]) forgets the last positions: the rollback after
/// rejected draft tokens.
pub struct KvCache {
    /// Per layer: `(kv_heads, capacity, head_dim)` for keys and for values.
    layers: Vec<(Tensor, Tensor)>,
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

impl Model {
    /// Reads the metadata and weights of a llama-family GGUF file.
    pub fn load(
        path: &Path,
        content: &gguf_file::Content,
        format: WeightFormat,
    ) -> Result<Self, LocalError> {
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
            head_dim: dim / heads,
            context_length: metadata_u32(content, "llama.context_length").unwrap_or(2048),
            rope_base: metadata_f32(content, "llama.rope.freq_base").unwrap_or(10_000.0),
            norm_eps: metadata_f32(content, "llama.attention.layer_norm_rms_epsilon")
                .unwrap_or(1e-5) as f64,
            vocab_size: 0,
        };
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

        let device = Device::Cpu;
        let mut read = |name: &str| -> Result<QTensor, LocalError> {
            let tensor = content
                .tensor(&mut file, name, &device)
                .map_err(err(name))?;
            let tensor = match (format, tensor.dtype()) {
                (
                    WeightFormat::Q8,
                    GgmlDType::Q4_0 | GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1,
                ) if tensor.rank() == 2 => {
                    report.requantized += 1;
                    let dense = tensor.dequantize(&device).map_err(err(name))?;
                    QTensor::quantize(&dense, GgmlDType::Q8_0).map_err(err(name))?
                }
                _ => tensor,
            };
            report.weight_bytes += tensor.storage_size_in_bytes();
            Ok(tensor)
        };
        let dense = |q: QTensor, name: &str| q.dequantize(&Device::Cpu).map_err(err(name));

        let token_embd = Arc::new(read("token_embd.weight")?);
        let vocab_size = token_embd.shape().dims()[0];
        // Tied embeddings (SmolLM2 and other small models) have no separate output matrix:
        // the embedding table, kept quantized, serves both.
        let output = if content.tensor_infos.contains_key("output.weight") {
            QMatMul::from_qtensor(read("output.weight")?)
        } else {
            QMatMul::from_arc(token_embd.clone())
        }
        .map_err(err("output.weight"))?;
        let final_norm = dense(read("output_norm.weight")?, "output_norm.weight")?;
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let q = |name: &str, read: &mut dyn FnMut(&str) -> Result<QTensor, LocalError>| {
                let full = format!("blk.{i}.{name}.weight");
                QMatMul::from_qtensor(read(&full)?).map_err(err("weights"))
            };
            layers.push(Layer {
                attn_norm: dense(read(&format!("blk.{i}.attn_norm.weight"))?, "attn_norm")?,
                wq: q("attn_q", &mut read)?,
                wk: q("attn_k", &mut read)?,
                wv: q("attn_v", &mut read)?,
                wo: q("attn_output", &mut read)?,
                ffn_norm: dense(read(&format!("blk.{i}.ffn_norm.weight"))?, "ffn_norm")?,
                w_gate: q("ffn_gate", &mut read)?,
                w_up: q("ffn_up", &mut read)?,
                w_down: q("ffn_down", &mut read)?,
            });
        }

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
        let table =
            |v: Vec<f32>| Tensor::from_vec(v, (positions, half), &device).map_err(err("rope"));
        Ok(Self {
            config: Config {
                vocab_size,
                ..config
            },
            report,
            embedding: token_embd,
            layers,
            final_norm,
            output,
            cos: table(cos)?,
            sin: table(sin)?,
        })
    }

    /// An empty cache with room for `capacity` positions (grown when needed).
    pub fn new_cache(&self, capacity: usize) -> Result<KvCache, LocalError> {
        let capacity = capacity.clamp(1, self.config.context_length);
        let shape = (self.config.kv_heads, capacity, self.config.head_dim);
        let layers = (0..self.config.layers)
            .map(|_| {
                Ok((
                    Tensor::zeros(shape, DType::F32, &Device::Cpu)?,
                    Tensor::zeros(shape, DType::F32, &Device::Cpu)?,
                ))
            })
            .collect::<candle_core::Result<_>>()
            .map_err(err("kv cache"))?;
        Ok(KvCache {
            layers,
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
        let capacity = (cache.capacity * 2)
            .max(needed)
            .min(self.config.context_length);
        let mut bigger = self.new_cache(capacity)?;
        for ((k, v), (new_k, new_v)) in cache.layers.iter().zip(&bigger.layers) {
            let keep = |t: &Tensor| t.narrow(1, 0, cache.len)?.contiguous();
            (|| {
                new_k.slice_set(&keep(k)?, 1, 0)?;
                new_v.slice_set(&keep(v)?, 1, 0)
            })()
            .map_err(err("kv cache"))?;
        }
        bigger.len = cache.len;
        *cache = bigger;
        Ok(())
    }

    /// Prefill: runs `tokens` at the end of `cache` with one masked attention per layer and
    /// returns the logits of the last position.
    pub fn forward_prefill(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<Vec<f32>, LocalError> {
        let logits = self.forward(cache, tokens, Attention::Batched, false)?;
        Ok(logits.into_iter().next().unwrap_or_default())
    }

    /// Runs `tokens` at the end of `cache` and returns the logits of every one of them, each
    /// bit-identical to what feeding the tokens one at a time would give (see the module
    /// documentation). One token is the ordinary decoding step.
    pub fn forward_rows(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<Vec<Vec<f32>>, LocalError> {
        self.forward(cache, tokens, Attention::PerRow, true)
    }

    fn forward(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        attention: Attention,
        all_logits: bool,
    ) -> Result<Vec<Vec<f32>>, LocalError> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let offset = cache.len;
        self.reserve(cache, offset + tokens.len())?;
        let result = self
            .forward_inner(cache, tokens, offset, attention, all_logits)
            .map_err(err("forward pass"));
        // On failure the cache holds a partial write past `offset`: forget it.
        cache.len = if result.is_ok() {
            offset + tokens.len()
        } else {
            offset
        };
        result
    }

    fn forward_inner(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        offset: usize,
        attention: Attention,
        all_logits: bool,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let c = &self.config;
        let m = tokens.len();
        let ids = Tensor::new(tokens, &Device::Cpu)?;
        let mut x = self.embedding.embedding(&ids)?;
        let cos = self
            .cos
            .narrow(0, offset, m)?
            .reshape((m, 1, c.head_dim / 2, 1))?;
        let sin = self
            .sin
            .narrow(0, offset, m)?
            .reshape((m, 1, c.head_dim / 2, 1))?;
        let groups = c.heads / c.kv_heads;
        for (layer, (k_cache, v_cache)) in self.layers.iter().zip(&cache.layers) {
            let h = rms_norm(&x, &layer.attn_norm, c.norm_eps)?;
            let q = layer.wq.forward(&h)?.reshape((m, c.heads, c.head_dim))?;
            let k = layer.wk.forward(&h)?.reshape((m, c.kv_heads, c.head_dim))?;
            let v = layer.wv.forward(&h)?.reshape((m, c.kv_heads, c.head_dim))?;
            let q = rope(&q, &cos, &sin)?;
            let k = rope(&k, &cos, &sin)?;
            k_cache.slice_set(&k.transpose(0, 1)?.contiguous()?, 1, offset)?;
            v_cache.slice_set(&v.transpose(0, 1)?.contiguous()?, 1, offset)?;
            // (kv_heads, rows, hd) per kv head: the query heads sharing it, row-major.
            let attended = match attention {
                Attention::Batched => {
                    let total = offset + m;
                    let keys = k_cache.narrow(1, 0, total)?;
                    let values = v_cache.narrow(1, 0, total)?;
                    let q = q
                        .reshape((m, c.kv_heads, groups, c.head_dim))?
                        .transpose(0, 1)?
                        .contiguous()?
                        .reshape((c.kv_heads, m * groups, c.head_dim))?;
                    let mask: Vec<f32> = (0..m)
                        .flat_map(|i| {
                            (0..groups).flat_map(move |_| {
                                (0..total).map(move |j| {
                                    if j > offset + i {
                                        f32::NEG_INFINITY
                                    } else {
                                        0.0
                                    }
                                })
                            })
                        })
                        .collect();
                    let mask = Tensor::from_vec(mask, (m * groups, total), &Device::Cpu)?;
                    let out = attend(&q, &keys, &values, c.head_dim, Some(&mask))?;
                    out.reshape((c.kv_heads, m, groups, c.head_dim))?
                        .transpose(0, 1)?
                        .contiguous()?
                        .reshape((m, c.dim))?
                }
                Attention::PerRow => {
                    let mut rows = Vec::with_capacity(m);
                    for i in 0..m {
                        let total = offset + i + 1;
                        let keys = k_cache.narrow(1, 0, total)?;
                        let values = v_cache.narrow(1, 0, total)?;
                        let q = q
                            .narrow(0, i, 1)?
                            .reshape((c.kv_heads, groups, c.head_dim))?;
                        let out = attend(&q, &keys, &values, c.head_dim, None)?;
                        rows.push(out.reshape((1, c.dim))?);
                    }
                    Tensor::cat(&rows, 0)?
                }
            };
            x = (x + layer.wo.forward(&attended)?)?;
            let h = rms_norm(&x, &layer.ffn_norm, c.norm_eps)?;
            let gate = layer.w_gate.forward(&h)?.silu()?;
            let up = layer.w_up.forward(&h)?;
            x = (x + layer.w_down.forward(&(gate * up)?)?)?;
        }
        let x = if all_logits {
            x
        } else {
            x.narrow(0, m - 1, 1)?
        };
        let x = rms_norm(&x, &self.final_norm, c.norm_eps)?;
        self.output.forward(&x)?.to_vec2::<f32>()
    }
}

#[derive(Clone, Copy)]
enum Attention {
    Batched,
    PerRow,
}

/// Softmax attention of `q` `(kv_heads, rows, hd)` over `keys`/`values` `(kv_heads, n, hd)`.
fn attend(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    head_dim: usize,
    mask: Option<&Tensor>,
) -> candle_core::Result<Tensor> {
    let scores = (q.matmul(&keys.t()?)? / (head_dim as f64).sqrt())?;
    let scores = match mask {
        Some(mask) => scores.broadcast_add(mask)?,
        None => scores,
    };
    let max = scores.max_keepdim(D::Minus1)?;
    let exp = scores.broadcast_sub(&max)?.exp()?;
    let probabilities = exp.broadcast_div(&exp.sum_keepdim(D::Minus1)?)?;
    probabilities.matmul(values)
}

fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(mean_square + eps)?.sqrt()?)?
        .broadcast_mul(weight)
}

/// The interleaved ("GPT-J") rotary embedding GGUF llama weights are laid out for: pairs
/// `(x[2i], x[2i+1])` rotate by `position · base^(-2i/d)`.
fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> candle_core::Result<Tensor> {
    let (m, heads, hd) = x.dims3()?;
    let pairs = x.reshape((m, heads, hd / 2, 2))?;
    let even = pairs.narrow(3, 0, 1)?;
    let odd = pairs.narrow(3, 1, 1)?;
    let rotated_even = (even.broadcast_mul(cos)? - odd.broadcast_mul(sin)?)?;
    let rotated_odd = (even.broadcast_mul(sin)? + odd.broadcast_mul(cos)?)?;
    Tensor::cat(&[rotated_even, rotated_odd], 3)?.reshape((m, heads, hd))
}
