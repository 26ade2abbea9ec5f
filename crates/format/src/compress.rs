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
        Compressor::Brotli => brotli_decompress(input, max_size),
        Compressor::Gzip => gzip_decompress(input, max_size),
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
    // Read the preamble ourselves so that an absurd length is reported as too large (FORMAT.md §3's order), even
    // one beyond what the snappy crate would parse.
    let mut declared: u64 = 0;
    let mut shift = 0;
    for (i, byte) in input.iter().enumerate() {
        if shift > 63 {
            return Err(corrupt("snappy length preamble is longer than 10 bytes"));
        }
        declared |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if i + 1 == input.len() {
            return Err(corrupt("snappy length preamble is cut short"));
        }
    }
    if input.is_empty() {
        return Err(corrupt("snappy payload is empty"));
    }
    check_size(declared, max_size)?;
    let declared = declared as usize;
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

/// One gzip member, read no further than `max_size` bytes of output, with nothing after it.
fn gzip_decompress(input: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = flate2::bufread::GzDecoder::new(input);
    let mut out = Vec::new();
    (&mut decoder).take(max_size as u64 + 1).read_to_end(&mut out).map_err(|e| corrupt(format!("gzip: {e}")))?;
    if out.len() > max_size {
        return Err(over_limit("gzip", max_size));
    }
    let rest = decoder.get_ref().len();
    if rest != 0 {
        return Err(corrupt(format!("gzip: {rest} bytes after the member")));
    }
    Ok(out)
}

/// One Brotli stream, decoded in chunks so output stops at `max_size`, with nothing after it.
fn brotli_decompress(input: &[u8], max_size: usize) -> Result<Vec<u8>, DecodeError> {
    use brotli::{BrotliDecompressStream, BrotliResult, BrotliState, HeapAlloc, HuffmanCode};
    let mut state = BrotliState::new(
        HeapAlloc::<u8>::new(0),
        HeapAlloc::<u32>::new(0),
        HeapAlloc::<HuffmanCode>::new(HuffmanCode { bits: 2, value: 1 }),
    );
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let (mut available_in, mut input_offset, mut total_out) = (input.len(), 0, 0);
    loop {
        let (mut available_out, mut output_offset) = (chunk.len(), 0);
        let result = BrotliDecompressStream(
            &mut available_in,
            &mut input_offset,
            input,
            &mut available_out,
            &mut output_offset,
            &mut chunk,
            &mut total_out,
            &mut state,
        );
        if out.len() + output_offset > max_size {
            return Err(over_limit("brotli", max_size));
        }
        out.extend_from_slice(&chunk[..output_offset]);
        match result {
            BrotliResult::ResultSuccess if available_in == 0 => return Ok(out),
            BrotliResult::ResultSuccess => {
                return Err(corrupt(format!("brotli: {available_in} bytes after the stream")))
            }
            BrotliResult::NeedsMoreOutput => {}
            BrotliResult::NeedsMoreInput => return Err(corrupt("brotli: stream is cut short")),
            BrotliResult::ResultFailure => return Err(corrupt("brotli: malformed stream")),
        }
    }
}

fn over_limit(codec: &str, max_size: usize) -> DecodeError {
    DecodeError::new(
        ErrorKind::TooLarge,
        format!("{codec} payload decompresses to more than the {max_size}-byte limit"),
    )
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
