//! The training data: tokens from a known first-order Markov chain, built as the
//! reference script (`bench/torch_gpt.py`) builds it, so the best reachable loss (the
//! chain's entropy rate) is known; or the token file that script writes
//! (`--write-data`, u16 little-endian), for the reference's exact tokens.

use std::path::Path;

use gpuscope::tensor::Generator;

/// Tokens the reference samples from its chain.
pub const TOKENS: usize = 2_000_000;

/// Successors each token is likely to go to.
const LIKELY: usize = 8;

/// A first-order Markov chain over `vocab` tokens and its entropy rate.
pub struct MarkovChain {
    /// Row-major transition probabilities, `vocab × vocab`.
    pub p: Vec<f64>,
    pub vocab: usize,
    /// `-Σ_i w_i Σ_j P_ij ln P_ij` with `w` the stationary distribution: the lowest
    /// cross-entropy a model of the next token can reach (nats).
    pub entropy: f64,
}

impl MarkovChain {
    /// The reference's construction with this program's random numbers: every
    /// transition has weight 1e-3; each token gets 8 distinct successors drawn uniformly
    /// that share 10 more in Dirichlet(1, …, 1) proportions; rows are normalised; the
    /// stationary distribution is 200 steps of the chain from the uniform one.
    pub fn new(vocab: usize, seed: u64) -> MarkovChain {
        let mut g = Generator::new(seed);
        let mut p = vec![1e-3; vocab * vocab];
        let mut order: Vec<usize> = (0..vocab).collect();
        for i in 0..vocab {
            // 8 distinct successors: a partial Fisher-Yates shuffle.
            let k = LIKELY.min(vocab);
            for j in 0..k {
                let r = j + ((g.uniform() * (vocab - j) as f64) as usize).min(vocab - j - 1);
                order.swap(j, r);
            }
            // Dirichlet(1, …, 1): normalised exponential draws.
            let e: Vec<f64> = (0..k).map(|_| -(1.0 - g.uniform()).ln()).collect();
            let sum: f64 = e.iter().sum();
            for (j, w) in order[..k].iter().zip(&e) {
                p[i * vocab + j] += w / sum * 10.0;
            }
        }
        for row in p.chunks_exact_mut(vocab) {
            let s: f64 = row.iter().sum();
            row.iter_mut().for_each(|v| *v /= s);
        }
        let entropy = entropy_rate(&p, vocab);
        MarkovChain { p, vocab, entropy }
    }

    /// `n` tokens from the chain, starting at token 0, with one uniform draw each
    /// (the first index whose cumulative probability reaches it, as `searchsorted`).
    pub fn sample(&self, n: usize, seed: u64) -> Vec<u16> {
        let v = self.vocab;
        let mut cdf = self.p.clone();
        for row in cdf.chunks_exact_mut(v) {
            let mut acc = 0.0;
            for x in row.iter_mut() {
                acc += *x;
                *x = acc;
            }
        }
        let mut g = Generator::new(seed);
        let mut t = 0usize;
        (0..n)
            .map(|_| {
                let u = g.uniform();
                let row = &cdf[t * v..(t + 1) * v];
                t = row.partition_point(|&c| c < u).min(v - 1);
                t as u16
            })
            .collect()
    }
}

/// The entropy rate of the chain `p` (`vocab × vocab`): the stationary distribution is
/// 200 steps from the uniform one, as the reference computes it.
fn entropy_rate(p: &[f64], vocab: usize) -> f64 {
    let mut w = vec![1.0 / vocab as f64; vocab];
    for _ in 0..200 {
        let mut next = vec![0.0; vocab];
        for (i, wi) in w.iter().enumerate() {
            for (n, pij) in next.iter_mut().zip(&p[i * vocab..(i + 1) * vocab]) {
                *n += wi * pij;
            }
        }
        w = next;
    }
    -(0..vocab)
        .map(|i| {
            w[i] * p[i * vocab..(i + 1) * vocab]
                .iter()
                .map(|&x| x * x.ln())
                .sum::<f64>()
        })
        .sum::<f64>()
}

/// The entropy rate estimated from a token stream's transition counts (the chain of a
/// token file is not known, its counts are): the plug-in estimate with Miller and
/// Madow's correction, `+ (K_i - 1) / 2N` for each token `i` followed by `K_i`
/// distinct tokens. Still biased low: on this program's own chain over 512 tokens,
/// 2M samples estimate 2.087 nats against the exact 2.122 (the plug-in estimate alone:
/// about 0.06 low).
pub fn empirical_entropy(tokens: &[u16], vocab: usize) -> f64 {
    let mut counts = vec![0u64; vocab * vocab];
    for w in tokens.windows(2) {
        counts[w[0] as usize * vocab + w[1] as usize] += 1;
    }
    let total = tokens.len().saturating_sub(1).max(1) as f64;
    let mut h = 0.0;
    for row in counts.chunks_exact(vocab) {
        let n: u64 = row.iter().sum();
        let mut seen = 0usize;
        for &c in row.iter().filter(|&&c| c > 0) {
            h -= c as f64 / total * (c as f64 / n as f64).ln();
            seen += 1;
        }
        h += seen.saturating_sub(1) as f64 / (2.0 * total);
    }
    h
}

/// What is wrong with a token file.
#[derive(Debug)]
pub enum DataError {
    Io {
        path: String,
        source: std::io::Error,
    },
    OddLength {
        path: String,
        bytes: usize,
    },
    TooShort {
        path: String,
        tokens: usize,
        block: usize,
    },
    OutOfVocabulary {
        path: String,
        token: u16,
        position: usize,
        vocab: usize,
        more: usize,
    },
}

impl std::fmt::Display for DataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataError::Io { path, source } => write!(f, "{path}: {source}"),
            DataError::OddLength { path, bytes } => write!(
                f,
                "{path}: {bytes} bytes is not a whole number of u16 tokens (2 bytes each, \
                 little-endian, as `torch_gpt.py --write-data` writes them): the file is \
                 truncated or not a token file"
            ),
            DataError::TooShort {
                path,
                tokens,
                block,
            } => write!(
                f,
                "{path}: {tokens} tokens are too few for --block {block}: a training sequence \
                 needs block + 1 = {} consecutive tokens, and the file must hold at least \
                 block + 2 = {} to have a choice of starting points: lower --block or use a \
                 longer file",
                block + 1,
                block + 2
            ),
            DataError::OutOfVocabulary {
                path,
                token,
                position,
                vocab,
                more,
            } => write!(
                f,
                "{path}: token {token} at position {position} is outside the vocabulary of \
                 {vocab} (tokens must be in 0..{vocab}; {more} more outside it): pass the \
                 --vocab the file was written with"
            ),
        }
    }
}

impl std::error::Error for DataError {}

/// Reads a token file (u16 little-endian) and checks it against the vocabulary and the
/// block size.
pub fn read_tokens(path: &Path, vocab: usize, block: usize) -> Result<Vec<u16>, DataError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| DataError::Io {
        path: name.clone(),
        source,
    })?;
    if bytes.len() % 2 != 0 {
        return Err(DataError::OddLength {
            path: name,
            bytes: bytes.len(),
        });
    }
    let tokens: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    check_tokens(&name, &tokens, vocab, block)?;
    Ok(tokens)
}

/// Checks that `tokens` hold a training sequence of `block + 1` tokens with more than one
/// starting point, all inside the vocabulary.
pub fn check_tokens(
    name: &str,
    tokens: &[u16],
    vocab: usize,
    block: usize,
) -> Result<(), DataError> {
    if tokens.len() < block + 2 {
        return Err(DataError::TooShort {
            path: name.to_string(),
            tokens: tokens.len(),
            block,
        });
    }
    let mut bad = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| **t as usize >= vocab);
    if let Some((position, &token)) = bad.next() {
        return Err(DataError::OutOfVocabulary {
            path: name.to_string(),
            token,
            position,
            vocab,
            more: bad.count(),
        });
    }
    Ok(())
}

/// Writes tokens as u16 little-endian (the reference's `--write-data` format).
pub fn write_tokens(path: &Path, tokens: &[u16]) -> std::io::Result<()> {
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    std::fs::write(path, bytes)
}

/// Batches of `batch` sequences of `block` tokens at random starting points, and their
/// next tokens (the reference's `batch()`: starts uniform in `0..len - block - 1`).
pub struct Batches<'a> {
    tokens: &'a [u16],
    block: usize,
    g: Generator,
}

impl<'a> Batches<'a> {
    pub fn new(tokens: &'a [u16], block: usize, seed: u64) -> Batches<'a> {
        Batches {
            tokens,
            block,
            g: Generator::new(seed),
        }
    }

    /// Inputs and targets of `batch` sequences, row-major `[batch, block]` (`i32`).
    pub fn next(&mut self, batch: usize) -> (Vec<i32>, Vec<i32>) {
        let span = self.tokens.len() - self.block - 1;
        let (mut x, mut y) = (
            Vec::with_capacity(batch * self.block),
            Vec::with_capacity(batch * self.block),
        );
        for _ in 0..batch {
            let s = ((self.g.uniform() * span as f64) as usize).min(span - 1);
            x.extend(self.tokens[s..s + self.block].iter().map(|&t| t as i32));
            y.extend(
                self.tokens[s + 1..s + self.block + 1]
                    .iter()
                    .map(|&t| t as i32),
            );
        }
        (x, y)
    }
}
