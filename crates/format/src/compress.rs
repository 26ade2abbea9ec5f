//! The compressors of spec/FORMAT.md §3, each in the wire form every language can read, and each decoder bounded by
//! a maximum output size that no size field in the input can raise.
//!
//! Per-call set-up dominates small values, so the zstd and snappy contexts are kept per thread and reused.

use std::cell::RefCell;
use std::io::{Read, Write};

use crate::codec_ids::Compressor;
use crate::error::{DecodeError, EncodeError, ErrorKind};

/// Default maximum decompressed size: 64 MiB.
pub const DEFAULT_MAX_SIZE: usize = 64 << 20;

/// The most an LZ4 block can expand: every extra length byte adds 255 bytes of output.
const LZ4_MAX_RATIO: u64 = 255;

/// Default compression level per codec (spec/FORMAT.md §3); `None` for codecs without levels.
pub fn default_level(compressor: Compressor) -> Option<i32> {
    match compressor {
        Compressor::Zstd => Some(3),
        Compressor::Brotli => Some(4),
        Compressor::Gzip => Some(6),
        Compressor::None | Compressor::Lz4 | Compressor::Snappy => None,
    }
}

/// Appends `input` compressed with `compressor` to `out`.
pub fn compress_into(
    compressor: Compressor,
    level: Option<i32>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let level = level.or(default_level(compressor));
    match compressor {
        Compressor::None => out.extend_from_slice(input),
        Compressor::Lz4 => lz4_compress(input, out)?,
        Compressor::Snappy => snappy_compress(input, out)?,
        Compressor::Zstd => zstd_compress(input, level.unwrap_or(3), out)?,
        Compressor::Brotli => {
            let quality = level.unwrap_or(4).clamp(0, 11) as u32;
            let mut writer = brotli::CompressorWriter::new(out, 4096, quality, 22);
            writer.write_all(input).map_err(compress_error)?;
            // into_inner finishes the stream (a flush alone leaves it open).
            writer.into_inner();
        }
        Compressor::Gzip => {
            let level = flate2::Compression::new(level.unwrap_or(6).clamp(0, 9) as u32);
            let mut encoder = flate2::write::GzEncoder::new(out, level);
            encoder.write_all(input).map_err(compress_error)?;
            encoder.finish().map_err(compress_error)?;
        }
    }
    Ok(())
}

/// `input` compressed with `compressor`, in a new buffer.
pub fn compress(compressor: Compressor, level: Option<i32>, input: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    compress_into(compressor, level, input, &mut out)?;
    Ok(out)
}

/// Decompresses `input`, refusing to produce more than `max_size` bytes.
pub fn decompress(compressor: Compressor, input: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    match compressor {
        Compressor::None => {
            check_size(input.len() as u64, max_size)?;
            Ok(input.to_vec())
        }
        Compressor::Lz4 => lz4_decompress(input, max_size),
        Compressor::Snappy => snappy_decompress(input, max_size),
        Compressor::Zstd => zstd_decompress(input, max_size),
        Compressor::Brotli => read_bounded(brotli::Decompressor::new(input, 4096), "brotli", max_size),
        Compressor::Gzip => read_bounded(flate2::read::GzDecoder::new(input), "gzip", max_size),
    }
}

fn lz4_compress(input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let len = u32::try_from(input.len())
        .map_err(|_| EncodeError::Compress(format!("lz4 input of {} bytes exceeds 4 GiB", input.len())))?;
    let start = out.len();
    out.extend_from_slice(&len.to_le_bytes());
    let body_at = out.len();
    out.resize(body_at + lz4_flex::block::get_maximum_output_size(input.len()), 0);
    let written = lz4_flex::block::compress_into(input, &mut out[body_at..]);
    match written {
        Ok(n) => {
            out.truncate(body_at + n);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(EncodeError::Compress(format!("lz4: {e}")))
        }
    }
}

fn lz4_decompress(input: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    if input.len() < 4 {
        return Err(corrupt(format!("lz4 payload of {} bytes has no 4-byte size prefix", input.len())));
    }
    let declared = u64::from(u32::from_le_bytes([input[0], input[1], input[2], input[3]]));
    check_size(declared, max_size)?;
    let block = &input[4..];
    if declared > LZ4_MAX_RATIO * block.len() as u64 + 16 {
        return Err(corrupt(format!(
            "lz4 size prefix claims {declared} bytes from a {}-byte block, more than LZ4 can expand",
            block.len()
        )));
    }
    let mut out = vec![0u8; declared as usize];
    let written = lz4_flex::block::decompress_into(block, &mut out).map_err(|e| corrupt(format!("lz4: {e}")))?;
    if written as u64 != declared {
        return Err(corrupt(format!("lz4 block decoded to {written} bytes, prefix declared {declared}")));
    }
    Ok(out)
}

thread_local! {
    static SNAPPY_ENCODER: RefCell<snap::raw::Encoder> = RefCell::new(snap::raw::Encoder::new());
    static ZSTD_COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn snappy_compress(input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = out.len();
    out.resize(start + snap::raw::max_compress_len(input.len()), 0);
    let written = SNAPPY_ENCODER.with(|enc| enc.borrow_mut().compress(input, &mut out[start..]));
    match written {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(EncodeError::Compress(format!("snappy: {e}")))
        }
    }
}

fn snappy_decompress(input: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    let declared = snap::raw::decompress_len(input).map_err(|e| corrupt(format!("snappy: {e}")))?;
    check_size(declared as u64, max_size)?;
    let mut out = vec![0u8; declared];
    let written = snap::raw::Decoder::new().decompress(input, &mut out).map_err(|e| corrupt(format!("snappy: {e}")))?;
    if written != declared {
        return Err(corrupt(format!("snappy block decoded to {written} bytes, preamble declared {declared}")));
    }
    Ok(out)
}

fn zstd_compress(input: &[u8], level: i32, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    ZSTD_COMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            let compressor = zstd::bulk::Compressor::new(level).map_err(compress_error)?;
            *slot = Some((level, compressor));
        }
        let Some((_, compressor)) = slot.as_mut() else {
            return Err(EncodeError::Compress("zstd context missing".into()));
        };
        let compressed = compressor.compress(input).map_err(compress_error)?;
        out.extend_from_slice(&compressed);
        Ok(())
    })
}

fn zstd_decompress(input: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    let declared = match zstd::zstd_safe::get_frame_content_size(input) {
        Ok(Some(size)) => size,
        Ok(None) => return Err(corrupt("zstd frame does not record its content size")),
        Err(_) => return Err(corrupt("not a zstd frame")),
    };
    check_size(declared, max_size)?;
    let mut out = Vec::with_capacity(declared as usize);
    let written = ZSTD_DECOMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| corrupt(format!("zstd: {e}")))?);
        }
        let Some(decompressor) = slot.as_mut() else {
            return Err(corrupt("zstd context missing"));
        };
        decompressor.decompress_to_buffer(input, &mut out).map_err(|e| corrupt(format!("zstd: {e}")))
    })?;
    if written as u64 != declared {
        return Err(corrupt(format!("zstd frame decoded to {written} bytes, header declared {declared}")));
    }
    Ok(out)
}

/// Reads a streaming decoder to its end, but never past `max_size` bytes.
fn read_bounded(reader: impl Read, codec: &str, max_size: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    reader.take(max_size as u64 + 1).read_to_end(&mut out).map_err(|e| corrupt(format!("{codec}: {e}")))?;
    if out.len() > max_size {
        return Err(DecodeError::new(
            ErrorKind::TooLarge,
            format!("{codec} payload decompresses to more than the {max_size}-byte limit"),
        ));
    }
    Ok(out)
}

fn check_size(size: u64, max_size: usize) -> Result<(), DecodeError> {
    if size > max_size as u64 {
        return Err(DecodeError::new(
            ErrorKind::TooLarge,
            format!("payload of {size} bytes exceeds the {max_size}-byte limit"),
        ));
    }
    Ok(())
}

fn corrupt(detail: impl Into<String>) -> DecodeError {
    DecodeError::new(ErrorKind::CorruptPayload, detail)
}

fn compress_error(e: impl std::fmt::Display) -> EncodeError {
    EncodeError::Compress(e.to_string())
}
