"""A decompression bomb: a small gzip body that inflates to a huge HTML page.

What a hostile or broken site serves as ``Content-Encoding: gzip`` with an honest ``Content-Length`` of the
compressed bytes: about 1 MB on the wire for each GiB a client inflates. A crawler that limits only the
bytes it receives, or waits for the page to finish loading, spends that gigabyte of memory and minutes of
CPU on one page; one that counts the decoded bytes stops at its body limit.

Compressing a GiB takes zlib about ten seconds, so the stream is assembled instead: a deflate block of
spaces ended by a full flush (which empties the compressor's history) compresses to the same bytes every
time, so it is compressed once and repeated, and the gzip trailer's CRC-32 is computed over the repeats.
"""

from __future__ import annotations

import functools
import struct
import zlib
from typing import Final

#: Inflated size of the sandbox's bomb: 1 GiB.
BOMB_BYTES: Final = 1 << 30
#: The start of the inflated page; the rest is spaces inside its body.
PREFIX: Final = b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>bomb</title></head><body>"
_BLOCK: Final = 1 << 20
_GZIP_HEADER: Final = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, no mtime, max compression


@functools.cache
def gzip_bomb(size: int = BOMB_BYTES) -> bytes:
    """A gzip member that inflates to ``size`` bytes of HTML: ``PREFIX`` and then spaces (cached)."""
    if size < len(PREFIX):
        raise ValueError(f"a bomb must inflate to at least {len(PREFIX)} bytes")
    repeats, rest = divmod(size - len(PREFIX), _BLOCK)
    block = b" " * _BLOCK
    raw = -zlib.MAX_WBITS  # a bare deflate stream: the gzip header and trailer are written here
    head = zlib.compressobj(9, zlib.DEFLATED, raw)
    start = head.compress(PREFIX) + head.flush(zlib.Z_FULL_FLUSH)
    repeated = zlib.compressobj(9, zlib.DEFLATED, raw)
    unit = repeated.compress(block) + repeated.flush(zlib.Z_FULL_FLUSH)
    tail = zlib.compressobj(9, zlib.DEFLATED, raw)
    end = tail.compress(b" " * rest) + tail.flush()
    crc = zlib.crc32(PREFIX)
    for _ in range(repeats):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(b" " * rest, crc)
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, start, unit * repeats, end, trailer))
