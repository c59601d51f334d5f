//! Reading a configuration: `key:value` items, each key's value checked, and an error
//! for anything else that says where, what and what to write.

use std::str::FromStr;

use crate::alloc::rounding::LARGE_BUFFER;

use super::{ALLOC_CONF_VAR, AllocConfig, KNOWN_KEYS, ROUNDUP_INTERVALS, roundup_interval};

/// Keys earlier gpuscope versions accepted, with what to do now.
const REMOVED_KEYS: &[(&str, &str)] = &[
    (
        "reserve_ratio",
        "virtual memory pools now grow in place and never remap in steady state, so there is no reserve to tune; remove the key",
    ),
    (
        "adaptive_reserve",
        "virtual memory pools now grow in place and never remap in steady state, so there is no reserve to adapt; remove the key",
    ),
];

/// PyTorch keys that gpuscope knows and refuses, with the reason.
const PYTORCH_ONLY_KEYS: &[(&str, &str)] = &[
    (
        "backend",
        "gpuscope has one allocator backend (its own caching allocator); remove the key",
    ),
    (
        "release_lock_on_cudamalloc",
        "gpuscope never holds its lock across a device allocation it could avoid; remove the key",
    ),
    (
        "pinned_use_cuda_host_register",
        "pinned host memory is not managed by gpuscope's device allocator; remove the key",
    ),
    (
        "pinned_num_register_threads",
        "pinned host memory is not managed by gpuscope's device allocator; remove the key",
    ),
    (
        "pinned_use_background_threads",
        "pinned host memory is not managed by gpuscope's device allocator; remove the key",
    ),
];

impl AllocConfig {
    /// Reads `GPUSCOPE_ALLOC_CONF`; the defaults when it is unset or empty.
    pub fn from_env() -> Result<AllocConfig, ConfigError> {
        match std::env::var(ALLOC_CONF_VAR) {
            Ok(text) => parse(&text, ALLOC_CONF_VAR),
            Err(std::env::VarError::NotPresent) => Ok(AllocConfig::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError {
                origin: ALLOC_CONF_VAR.into(),
                item: String::new(),
                message: "the value is not valid UTF-8".into(),
                help: "set it to ASCII `key:value` pairs separated by commas".into(),
            }),
        }
    }

    /// Parses a configuration string; `source` names where it came from in errors.
    pub fn parse_from(text: &str, source: &str) -> Result<AllocConfig, ConfigError> {
        parse(text, source)
    }
}

impl FromStr for AllocConfig {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s, "allocator configuration")
    }
}

/// A bad allocator configuration: where, which item, what is wrong and what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message} (in `{item}`)\n  help: {help}")]
pub struct ConfigError {
    /// Where the configuration came from (e.g. `GPUSCOPE_ALLOC_CONF`).
    pub origin: String,
    /// The offending `key:value` item.
    pub item: String,
    /// What is wrong with it.
    pub message: String,
    /// What to write instead.
    pub help: String,
}

/// Splits on commas that are not inside `[...]`.
fn split_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

fn parse(text: &str, source: &str) -> Result<AllocConfig, ConfigError> {
    let mut config = AllocConfig::default();
    let mut seen: Vec<&str> = Vec::new();
    for raw in split_items(text) {
        let item = raw.trim();
        if item.is_empty() {
            continue;
        }
        let err = |message: String, help: String| ConfigError {
            origin: source.to_string(),
            item: item.to_string(),
            message,
            help,
        };
        let Some((key, value)) = item.split_once(':') else {
            return Err(err(
                "expected `key:value`".into(),
                format!(
                    "write e.g. `max_split_size_mb:128`; known keys: {}",
                    KNOWN_KEYS.join(", ")
                ),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if seen.contains(&key) {
            return Err(err(
                format!("key `{key}` is given more than once"),
                "keep one of them".into(),
            ));
        }
        seen.push(key);
        apply(&mut config, key, value).map_err(|(message, help)| err(message, help))?;
    }
    Ok(config)
}

type ItemError = (String, String);

fn apply(config: &mut AllocConfig, key: &str, value: &str) -> Result<(), ItemError> {
    match key {
        "max_split_size_mb" => {
            let mb = parse_uint(key, value)?;
            let min_mb = LARGE_BUFFER >> 20;
            if mb <= min_mb {
                return Err((
                    format!("`{key}` must be greater than {min_mb}, got {mb}"),
                    format!(
                        "use a value above {min_mb} MiB (the large-pool segment size), e.g. `{key}:128`"
                    ),
                ));
            }
            config.max_split_size = mb.saturating_mul(1 << 20);
        }
        "max_non_split_rounding_mb" => {
            config.max_non_split_rounding = parse_uint(key, value)?.saturating_mul(1 << 20);
        }
        "roundup_power2_divisions" => {
            config.roundup_power2_divisions = parse_divisions(value)?;
        }
        "garbage_collection_threshold" => {
            let t = parse_float(key, value)?;
            if !(t > 0.0 && t < 1.0) {
                return Err((
                    format!("`{key}` must be between 0 and 1 (exclusive), got {value}"),
                    format!(
                        "e.g. `{key}:0.8` releases free segments once 80% of the limit is reserved"
                    ),
                ));
            }
            config.garbage_collection_threshold = Some(t);
        }
        "expandable_segments" => config.expandable_segments = parse_bool(key, value)?,
        "share_across_streams" => config.share_across_streams = parse_bool(key, value)?,
        "fence_interval_us" => {
            config.fence_interval_us = parse_uint(key, value)? as u64;
        }
        "per_process_memory_fraction" => {
            let f = parse_float(key, value)?;
            if !(f > 0.0 && f <= 1.0) {
                return Err((
                    format!("`{key}` must be in (0, 1], got {value}"),
                    format!("e.g. `{key}:0.5` caps reserved memory at half the device"),
                ));
            }
            config.per_process_memory_fraction = f;
        }
        "memory_limit_mb" => {
            let mb = parse_uint(key, value)?;
            if mb == 0 {
                return Err((
                    format!("`{key}` must be at least 1"),
                    format!("e.g. `{key}:4096` caps reserved memory at 4 GiB"),
                ));
            }
            config.memory_limit = Some(mb.saturating_mul(1 << 20));
        }
        "max_chunk_size_mb" => {
            let mb = parse_uint(key, value)?;
            let page_mb = LARGE_BUFFER >> 20;
            if mb < page_mb {
                return Err((
                    format!("`{key}` must be at least {page_mb} (one 20 MiB page), got {mb}"),
                    format!(
                        "e.g. `{key}:{page_mb}` gives memory back page by page when the device runs out, as PyTorch's expandable segments do"
                    ),
                ));
            }
            config.max_chunk_size = Some(mb.saturating_mul(1 << 20));
        }
        "page_chunk_threshold" => {
            let t = parse_float(key, value)?;
            if !(0.0..=1.0).contains(&t) {
                return Err((
                    format!("`{key}` must be between 0 and 1, got {value}"),
                    format!(
                        "e.g. `{key}:0.5` maps growths past half the device page by page; `{key}:1` never does"
                    ),
                ));
            }
            config.page_chunk_threshold = t;
        }
        _ => return Err(unknown_key(key)),
    }
    Ok(())
}

fn unknown_key(key: &str) -> ItemError {
    if let Some((_, why)) = REMOVED_KEYS.iter().find(|(k, _)| *k == key) {
        return (
            format!("`{key}` is no longer a gpuscope option"),
            why.to_string(),
        );
    }
    if let Some((_, why)) = PYTORCH_ONLY_KEYS.iter().find(|(k, _)| *k == key) {
        return (
            format!("`{key}` is a PyTorch option gpuscope does not support"),
            why.to_string(),
        );
    }
    let suggestion = KNOWN_KEYS
        .iter()
        .map(|k| (strsim::levenshtein(k, key), k))
        .filter(|(d, k)| *d <= 3.max(k.len() / 4) || k.starts_with(key) || words_within(key, k))
        .min_by_key(|(d, _)| *d);
    let help = match suggestion {
        Some((_, k)) => format!("did you mean `{k}`? known keys: {}", KNOWN_KEYS.join(", ")),
        None => format!("known keys: {}", KNOWN_KEYS.join(", ")),
    };
    (format!("unknown key `{key}`"), help)
}

/// Whether `key` is two or more of `known`'s words, in its order (`max_chunk_mb` for
/// `max_chunk_size_mb`): a word left out is too far for the edit distance.
fn words_within(key: &str, known: &str) -> bool {
    let mut words = known.split('_');
    let mut n = 0;
    for w in key.split('_') {
        if !words.any(|k| k == w) {
            return false;
        }
        n += 1;
    }
    n >= 2
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ItemError> {
    match value {
        "True" | "true" | "1" => Ok(true),
        "False" | "false" | "0" => Ok(false),
        _ => Err((
            format!("`{key}` takes True or False, got `{value}`"),
            format!("write `{key}:True` or `{key}:False`"),
        )),
    }
}

fn parse_uint(key: &str, value: &str) -> Result<usize, ItemError> {
    value.parse::<usize>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => (
            format!("`{key}` is too large: `{value}` is above {}", usize::MAX),
            format!("write a value that fits the device, e.g. `{key}:128`"),
        ),
        _ => (
            format!("`{key}` takes a whole number, got `{value}`"),
            format!("write e.g. `{key}:128`"),
        ),
    })
}

fn parse_float(key: &str, value: &str) -> Result<f64, ItemError> {
    value.parse::<f64>().map_err(|_| {
        (
            format!("`{key}` takes a number, got `{value}`"),
            format!("write e.g. `{key}:0.8`"),
        )
    })
}

fn parse_division_count(value: &str) -> Result<usize, ItemError> {
    let n = value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| n.is_power_of_two());
    n.ok_or_else(|| {
        (
            format!("`roundup_power2_divisions` takes powers of two, got `{value}`"),
            "use 1, 2, 4, 8 or 16 (1 turns rounding off)".into(),
        )
    })
}

/// `4`, or `[256:1,512:2,>:8]`: each `MB:divisions` sets the interval of requests of
/// that size (in MiB, a power of two) and, for the first entry, all smaller ones; `>`
/// sets every interval after the last one named.
fn parse_divisions(value: &str) -> Result<[usize; ROUNDUP_INTERVALS], ItemError> {
    let mut table = [1; ROUNDUP_INTERVALS];
    let Some(list) = value.strip_prefix('[') else {
        table = [parse_division_count(value)?; ROUNDUP_INTERVALS];
        return Ok(table);
    };
    let list = list.strip_suffix(']').ok_or_else(|| {
        (
            format!("unterminated list `{value}`"),
            "close the list with `]`, e.g. `[256:1,512:2,>:8]`".to_string(),
        )
    })?;
    let mut last: Option<usize> = None;
    for entry in list.split(',') {
        let (size, count) = entry.split_once(':').ok_or_else(|| {
            (
                format!("list entry `{entry}` is not `MB:divisions`"),
                "write entries like `256:1` or `>:8`".to_string(),
            )
        })?;
        let count = parse_division_count(count)?;
        if size.trim() == ">" {
            let from = last.map_or(0, |i| i + 1);
            table[from..].iter_mut().for_each(|d| *d = count);
            continue;
        }
        let mb = size
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|m| m.is_power_of_two())
            .ok_or_else(|| {
                (
                    format!("list size `{size}` is not a power of two in MiB"),
                    "use sizes like 64, 256, 1024".to_string(),
                )
            })?;
        let index = roundup_interval(mb << 20);
        if last.is_some_and(|l| index <= l) {
            return Err((
                format!("list sizes must increase, `{size}` does not"),
                "order entries from small to large".to_string(),
            ));
        }
        let from = if last.is_none() { 0 } else { index };
        table[from..=index].iter_mut().for_each(|d| *d = count);
        last = Some(index);
    }
    Ok(table)
}
