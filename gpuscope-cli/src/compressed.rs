//! Compressed inputs: `gpuscope replay` and `gpuscope view` read gzip-compressed traces
//! and snapshots (`trace.csv.gz`, `snapshot.pickle.gz`) as the file inside, and name
//! the other common formats, with the command that decompresses them, instead of
//! calling them binary data.

use std::io::Read;

/// Formats recognised by their first bytes that this command does not decompress, and
/// how to decompress each.
const OTHER_FORMATS: [(&[u8], &str, &str); 5] = [
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
    (b"\xfd7zXZ\x00", "xz", "xz -dk"),
    (b"BZh", "bzip2", "bunzip2 -k"),
    (b"PK\x03\x04", "a zip archive", "unzip"),
    (b"\x04\x22\x4d\x18", "lz4", "lz4 -d"),
];

/// Why a compressed input could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompressedError {
    /// Compressed in a format this command does not read.
    #[error(
        "{format}-compressed: decompress it first (`{command} FILE`), or compress it with gzip, which gpuscope reads"
    )]
    Unsupported {
        /// The format.
        format: &'static str,
        /// The command that decompresses it.
        command: &'static str,
    },
    /// The gzip stream is damaged or cut short.
    #[error(
        "gzip-compressed, but the compressed data is damaged or cut short ({message}) after {decompressed} bytes: is the file complete?"
    )]
    Corrupt {
        /// What the decoder said.
        message: String,
        /// How many bytes were decompressed before it.
        decompressed: usize,
    },
    /// Decompressed, the input is larger than the limit (the caller says how to raise it).
    #[error(
        "gzip-compressed, and more than {} decompressed, the most this command reads",
        gpuscope_runtime::format_bytes(*limit as usize)
    )]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
}

/// `bytes` as the file they hold: decompressed when gzip-compressed (at most `limit`
/// bytes of output), unchanged when not compressed.
pub fn decompress(bytes: Vec<u8>, limit: u64) -> Result<Vec<u8>, CompressedError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return gunzip(&bytes, limit);
    }
    if let Some(&(_, format, command)) = OTHER_FORMATS
        .iter()
        .find(|(magic, _, _)| bytes.starts_with(magic))
    {
        return Err(CompressedError::Unsupported { format, command });
    }
    Ok(bytes)
}

fn gunzip(bytes: &[u8], limit: u64) -> Result<Vec<u8>, CompressedError> {
    // Every member, as `gunzip` does (`cat a.gz b.gz` is one valid file); one byte past
    // the limit tells a file of exactly the limit from a larger one.
    let mut out = Vec::new();
    let mut reader = flate2::read::MultiGzDecoder::new(bytes).take(limit.saturating_add(1));
    reader
        .read_to_end(&mut out)
        .map_err(|e| CompressedError::Corrupt {
            message: e.to_string(),
            decompressed: out.len(),
        })?;
    if out.len() as u64 > limit {
        return Err(CompressedError::TooLarge { limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_is_read_as_the_file_inside_and_plain_files_pass_through() {
        let text = b"op,id,size,stream\na,0,512,0\nf,0,0,0\n".repeat(100);
        assert_eq!(decompress(gzip(&text), 1 << 20).unwrap(), text);
        assert_eq!(decompress(text.clone(), 1 << 20).unwrap(), text);
        assert_eq!(decompress(Vec::new(), 1 << 20).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn concatenated_members_are_read_whole() {
        let mut both = gzip(b"op,id,size,stream\n");
        both.extend(gzip(b"a,0,512,0\n"));
        assert_eq!(
            decompress(both, 1 << 20).unwrap(),
            b"op,id,size,stream\na,0,512,0\n"
        );
    }

    #[test]
    fn the_limit_applies_to_the_decompressed_size() {
        // 4 MiB of zeros compress to a few KiB: a decompression bomb in miniature.
        let bomb = gzip(&vec![0u8; 4 << 20]);
        assert!(bomb.len() < 64 << 10);
        assert_eq!(
            decompress(bomb.clone(), 1 << 20),
            Err(CompressedError::TooLarge { limit: 1 << 20 })
        );
        assert_eq!(decompress(bomb, 4 << 20).unwrap().len(), 4 << 20);
    }

    #[test]
    fn a_cut_or_damaged_file_is_an_error_not_a_short_read() {
        let whole = gzip(&b"a,0,512,0\n".repeat(1000));
        let cut = whole[..whole.len() / 2].to_vec();
        let e = decompress(cut, 1 << 20).unwrap_err();
        assert!(matches!(e, CompressedError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("is the file complete?"), "{e}");
        let mut damaged = whole.clone();
        let n = damaged.len();
        damaged[n - 6] ^= 0xff; // the CRC and length trailer
        assert!(matches!(
            decompress(damaged, 1 << 20),
            Err(CompressedError::Corrupt { .. })
        ));
    }

    #[test]
    fn other_formats_are_named_with_the_command_that_decompresses_them() {
        for (magic, format, command) in OTHER_FORMATS {
            let mut bytes = magic.to_vec();
            bytes.extend_from_slice(b"rest of the file");
            let e = decompress(bytes, 1 << 20).unwrap_err();
            assert_eq!(e, CompressedError::Unsupported { format, command });
            assert!(e.to_string().contains(command), "{e}");
        }
    }
}
