//! Bounded decompression of a record batch's records section, and compression for the one
//! path that rewrites batches.
//!
//! Produce and Fetch never decompress (batches stay as the client sent them). Only the rare
//! paths that must see individual records inside a compressed batch call this: ListOffsets by
//! timestamp, as Kafka's `LogSegment.findOffsetByTimestamp` does, and the log cleaner. Every
//! decoder reads through a limit, so a small batch that inflates to gigabytes (a
//! "decompression bomb") is refused instead of exhausting memory. The log cleaner recompresses
//! a batch it rewrites with the batch's own codec ([`compress`]), as Kafka's does.
//!
//! Formats, as Kafka writes and reads them:
//! - gzip: RFC 1952 (Java's `GZIPOutputStream`).
//! - snappy: either a raw snappy block (librdkafka) or the xerial framing the Java client
//!   uses: the 8-byte magic `\x82SNAPPY\0`, two big-endian int32 versions, then blocks of a
//!   big-endian int32 compressed length followed by a raw snappy block.
//! - lz4: the LZ4 frame format (magic v2 batches use the standard frame header checksum).
//! - zstd: a zstd frame.

use std::io::Read;

use thiserror::Error;

/// The compression codec in attribute bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// Codec ids 5-7 are not assigned by Kafka; validation rejects them.
    Unknown(u8),
}

impl Compression {
    /// The codec's id in attribute bits 0-2.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
            Compression::Unknown(id) => id,
        }
    }
}

/// Why a records section could not be decompressed.
#[derive(Debug, Error)]
pub enum DecompressError {
    /// The data does not decode with its codec.
    #[error("{codec:?} data is corrupt: {source}")]
    Corrupt {
        codec: Compression,
        #[source]
        source: std::io::Error,
    },
    /// The output would exceed the caller's limit.
    #[error("{codec:?} data inflates past the {limit}-byte limit")]
    TooLarge { codec: Compression, limit: usize },
    /// A codec Kafka does not define.
    #[error("unknown compression codec {0:?}")]
    Unknown(Compression),
}

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// Decompresses `input` (the bytes after the batch header) into at most `limit` bytes.
///
/// # Errors
///
/// [`DecompressError`] when the data is corrupt, too large, or of an unknown codec.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    let corrupt = |source: std::io::Error| DecompressError::Corrupt { codec, source };
    match codec {
        Compression::None => bounded_copy(codec, input, limit),
        Compression::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(input), limit),
        Compression::Lz4 => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(input), limit),
        Compression::Zstd => read_bounded(
            codec,
            zstd::stream::read::Decoder::new(input).map_err(corrupt)?,
            limit,
        ),
        Compression::Snappy => {
            if input.starts_with(XERIAL_MAGIC) {
                let mut out = Vec::new();
                let mut rest = input.get(XERIAL_HEADER_LEN..).unwrap_or_default();
                while !rest.is_empty() {
                    let Some((len, tail)) = rest.split_first_chunk::<4>() else {
                        return Err(corrupt(std::io::ErrorKind::UnexpectedEof.into()));
                    };
                    let len = u32::from_be_bytes(*len) as usize;
                    let block = tail
                        .get(..len)
                        .ok_or_else(|| corrupt(std::io::ErrorKind::UnexpectedEof.into()))?;
                    snappy_block(block, limit - out.len(), &mut out)?;
                    rest = &tail[len..];
                }
                Ok(out)
            } else {
                let mut out = Vec::new();
                snappy_block(input, limit, &mut out)?;
                Ok(out)
            }
        }
        Compression::Unknown(_) => Err(DecompressError::Unknown(codec)),
    }
}

/// A streaming decoder of a records section: the bytes come out as they decompress, so a
/// caller that only walks them (produce validation) holds no more than the decoder's window.
/// Snappy has no streaming form in the framings Kafka uses (raw blocks, or xerial's blocks
/// of at most a few tens of KiB), so it is decompressed whole, within `snappy_limit` bytes.
///
/// # Errors
///
/// [`DecompressError`] for an unknown codec, a corrupt snappy input or zstd header, or a
/// snappy input past the limit. Errors of the other codecs surface from the reader's reads.
pub fn reader<'a>(
    codec: Compression,
    input: &'a [u8],
    snappy_limit: usize,
) -> Result<Box<dyn Read + 'a>, DecompressError> {
    Ok(match codec {
        Compression::None => Box::new(input),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(input)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(input)
                .map_err(|source| DecompressError::Corrupt { codec, source })?,
        ),
        Compression::Snappy => Box::new(std::io::Cursor::new(decompress(
            codec,
            input,
            snappy_limit,
        )?)),
        Compression::Unknown(_) => return Err(DecompressError::Unknown(codec)),
    })
}

/// The largest uncompressed block of the xerial snappy framing Kafka's Java client writes
/// (its `SnappyOutputStream` default).
const XERIAL_BLOCK: usize = 32 * 1024;

/// Compresses a records section with `codec` in the format Kafka's broker writes when it
/// recompresses: gzip, the xerial snappy framing, an LZ4 frame, a zstd frame. `None` copies.
///
/// # Errors
///
/// [`DecompressError::Unknown`] for a codec Kafka does not define; an encoder's I/O error
/// (none is expected writing to memory) as [`DecompressError::Corrupt`].
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, DecompressError> {
    use std::io::Write;
    let failed = |source: std::io::Error| DecompressError::Corrupt { codec, source };
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(input).map_err(failed)?;
            e.finish().map_err(failed)
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(input).map_err(failed)?;
            e.finish().map_err(|e| failed(std::io::Error::other(e)))
        }
        Compression::Zstd => zstd::stream::encode_all(input, 3).map_err(failed),
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for chunk in input.chunks(XERIAL_BLOCK) {
                let block = encoder
                    .compress_vec(chunk)
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                let len =
                    u32::try_from(block.len()).map_err(|e| failed(std::io::Error::other(e)))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Compression::Unknown(_) => Err(DecompressError::Unknown(codec)),
    }
}

/// Appends one raw snappy block, checking its declared length against `room` first.
fn snappy_block(block: &[u8], room: usize, out: &mut Vec<u8>) -> Result<(), DecompressError> {
    let codec = Compression::Snappy;
    let corrupt = |e: snap::Error| DecompressError::Corrupt {
        codec,
        source: std::io::Error::other(e),
    };
    let len = snap::raw::decompress_len(block).map_err(corrupt)?;
    if len > room {
        return Err(DecompressError::TooLarge { codec, limit: room });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(corrupt)?;
    out.truncate(start + n);
    Ok(())
}

fn bounded_copy(
    codec: Compression,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    if input.len() > limit {
        return Err(DecompressError::TooLarge { codec, limit });
    }
    Ok(input.to_vec())
}

fn read_bounded(
    codec: Compression,
    reader: impl Read,
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|source| DecompressError::Corrupt { codec, source })?;
    if out.len() > limit {
        return Err(DecompressError::TooLarge { codec, limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn compress_writes_what_decompress_reads() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 13).to_be_bytes())
            .collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &packed, data.len()).unwrap(),
                data,
                "{codec:?}"
            );
            if codec != Compression::None {
                assert!(packed.len() < data.len() / 4, "{codec:?} compresses");
            }
        }
        assert!(compress(Compression::Unknown(6), &data).is_err());
    }

    #[test]
    fn each_codec_round_trips_and_is_bounded() {
        let data: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data).unwrap();
        let gz = gz.finish().unwrap();
        let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz.write_all(&data).unwrap();
        let lz = lz.finish().unwrap();
        let zs = zstd::stream::encode_all(&data[..], 3).unwrap();
        let raw_snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&1i32.to_be_bytes());
        xerial.extend_from_slice(&1i32.to_be_bytes());
        for chunk in data.chunks(7000) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        for (codec, input) in [
            (Compression::Gzip, &gz),
            (Compression::Lz4, &lz),
            (Compression::Zstd, &zs),
            (Compression::Snappy, &raw_snappy),
            (Compression::Snappy, &xerial),
        ] {
            assert_eq!(
                decompress(codec, input, data.len()).unwrap(),
                data,
                "{codec:?}"
            );
            assert!(
                matches!(
                    decompress(codec, input, data.len() - 1),
                    Err(DecompressError::TooLarge { .. })
                ),
                "{codec:?} must respect the limit"
            );
            assert!(
                decompress(codec, &input[..input.len() / 2], data.len()).is_err(),
                "{codec:?} truncated"
            );
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [
            Compression::Gzip,
            Compression::Lz4,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            assert!(
                decompress(codec, b"\x82SNAPPY\x00garbage-garbage", 1 << 20).is_err(),
                "{codec:?}"
            );
        }
    }
}
