/* larder_codec: zstd and Brotli for the Elixir client, as a port program (a crash here cannot take the BEAM down).
 *
 * Reads requests from stdin and writes replies to stdout, each a 4-byte big-endian length then the message
 * ({packet, 4} on the Erlang side). Request: op ('c' compress, 'd' decompress), codec (3 zstd, 4 brotli), level
 * (i32 big-endian), max_size (u64 big-endian), then the data. Reply: a status byte (0 ok, 1 too_large,
 * 2 corrupt_payload, 3 error), then the output or a message. Decoding follows spec/FORMAT.md §3: a zstd frame must
 * record its content size, which is checked against max_size before anything is allocated, and must be exactly one
 * frame; Brotli is decoded in chunks and stopped as soon as the output passes max_size, and must be exactly one
 * stream. Exits when stdin closes. */
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define MAX_REQUEST (1u << 30)

static int read_all(unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(0, buf + got, n - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

static void write_all(const unsigned char *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(1, buf + done, n - done);
    if (w <= 0) exit(1);
    done += (size_t)w;
  }
}

static void reply(unsigned char status, const unsigned char *data, size_t n) {
  unsigned char head[5];
  uint32_t len = (uint32_t)(n + 1);
  head[0] = len >> 24; head[1] = len >> 16; head[2] = len >> 8; head[3] = len; head[4] = status;
  write_all(head, 5);
  if (n) write_all(data, n);
}

static void reply_text(unsigned char status, const char *text) { reply(status, (const unsigned char *)text, strlen(text)); }

static void zstd_compress(const unsigned char *in, size_t n, int level) {
  size_t bound = ZSTD_compressBound(n);
  unsigned char *out = malloc(bound ? bound : 1);
  if (!out) { reply_text(3, "out of memory"); return; }
  size_t w = ZSTD_compress(out, bound, in, n, level);
  if (ZSTD_isError(w)) reply_text(3, ZSTD_getErrorName(w)); else reply(0, out, w);
  free(out);
}

static void zstd_decompress(const unsigned char *in, size_t n, uint64_t max) {
  unsigned long long size = ZSTD_getFrameContentSize(in, n);
  if (size == ZSTD_CONTENTSIZE_ERROR) { reply_text(2, "not a zstd frame"); return; }
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) { reply_text(2, "zstd frame does not record its content size"); return; }
  if (size > max) { reply_text(1, "zstd content size exceeds the limit"); return; }
  size_t frame = ZSTD_findFrameCompressedSize(in, n);
  if (ZSTD_isError(frame)) { reply_text(2, "zstd frame is truncated or malformed"); return; }
  if (frame != n) { reply_text(2, "bytes after the zstd frame"); return; }
  unsigned char *out = malloc(size ? size : 1);
  if (!out) { reply_text(3, "out of memory"); return; }
  size_t got = ZSTD_decompress(out, size, in, n);
  if (ZSTD_isError(got)) reply_text(2, "zstd frame does not decode");
  else if (got != size) reply_text(2, "zstd frame decoded to another length than it declared");
  else reply(0, out, got);
  free(out);
}

static void brotli_compress(const unsigned char *in, size_t n, int quality) {
  size_t bound = BrotliEncoderMaxCompressedSize(n);
  if (bound == 0) bound = n + 1024;
  unsigned char *out = malloc(bound);
  if (!out) { reply_text(3, "out of memory"); return; }
  size_t w = bound;
  if (!BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, n, in, &w, out)) reply_text(3, "brotli compression failed");
  else reply(0, out, w);
  free(out);
}

static void brotli_decompress(const unsigned char *in, size_t n, uint64_t max) {
  BrotliDecoderState *s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
  if (!s) { reply_text(3, "cannot create a brotli decoder"); return; }
  size_t cap = 65536, used = 0;
  unsigned char *out = malloc(cap);
  const uint8_t *next_in = in;
  size_t avail_in = n;
  for (;;) {
    if (!out) { reply_text(3, "out of memory"); break; }
    uint8_t *next_out = out + used;
    size_t avail_out = cap - used;
    BrotliDecoderResult r = BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, NULL);
    used = cap - avail_out;
    if (used > max) { reply_text(1, "brotli output exceeds the limit"); break; }
    if (r == BROTLI_DECODER_RESULT_SUCCESS) {
      if (avail_in != 0) reply_text(2, "bytes after the brotli stream"); else reply(0, out, used);
      break;
    } else if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
      size_t grow = cap * 2;
      if (grow > max + 65536) grow = max + 65536;
      if (grow <= cap) { reply_text(1, "brotli output exceeds the limit"); break; }
      unsigned char *bigger = realloc(out, grow);
      if (!bigger) { reply_text(3, "out of memory"); break; }
      out = bigger; cap = grow;
    } else if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT) {
      reply_text(2, "brotli stream is truncated"); break;
    } else {
      reply_text(2, "brotli stream does not decode"); break;
    }
  }
  free(out);
  BrotliDecoderDestroyInstance(s);
}

int main(void) {
  unsigned char head[4];
  while (read_all(head, 4) == 0) {
    uint32_t len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
    if (len < 14 || len > MAX_REQUEST) return 1;
    unsigned char *msg = malloc(len);
    if (!msg || read_all(msg, len) != 0) return 1;
    int32_t level = (int32_t)((uint32_t)msg[2] << 24 | (uint32_t)msg[3] << 16 | (uint32_t)msg[4] << 8 | msg[5]);
    uint64_t max = 0;
    for (int i = 0; i < 8; i++) max = max << 8 | msg[6 + i];
    const unsigned char *data = msg + 14;
    size_t n = len - 14;
    if (msg[0] == 'c' && msg[1] == 3) zstd_compress(data, n, level);
    else if (msg[0] == 'd' && msg[1] == 3) zstd_decompress(data, n, max);
    else if (msg[0] == 'c' && msg[1] == 4) brotli_compress(data, n, level);
    else if (msg[0] == 'd' && msg[1] == 4) brotli_decompress(data, n, max);
    else reply_text(3, "unknown request");
    free(msg);
  }
  return 0;
}
