"""TensorBoard event files read independently of tfx: TFRecord framing with both masked CRC32Cs checked, and
the protobuf wire format's fields, for test_observe.sh's checks."""
import struct


def crc32c(b):  # CRC32C (Castagnoli); each TFRecord stores it masked, for the length and for the data
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8): c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF
def masked(b): c = crc32c(b); return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
def record(data, i):  # the payload at offset i and the next offset, both masked CRCs checked
    (n,) = struct.unpack("<Q", data[i:i + 8])
    assert struct.unpack("<I", data[i + 8:i + 12])[0] == masked(data[i:i + 8]), "length crc at offset %d" % i
    payload = data[i + 12:i + 12 + n]
    assert len(payload) == n and struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] == masked(payload), "data crc at offset %d" % i
    return payload, i + 16 + n
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i); f, t = key >> 3, key & 7
        if t == 0: v, i = varint(b, i)
        elif t == 1: v = b[i:i + 8]; i += 8
        elif t == 5: v = b[i:i + 4]; i += 4
        elif t == 2: n, i = varint(b, i); v = b[i:i + n]; i += n
        else: raise ValueError(t)
        yield f, v
