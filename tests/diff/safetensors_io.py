"""The .safetensors files of the dumps, written and read without the safetensors library: an 8-byte
little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then the
tensors' bytes. bfloat16 is kept as its uint16 bits, since numpy has no bfloat16.
"""

import json
import struct

import numpy as np

SAFETENSORS_DTYPE = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}


def write_safetensors(path, tensors, dtype):
    """A .safetensors file: 8-byte little-endian header length, JSON header, the tensors' bytes."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, a in tensors.items():
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPE[dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the safetensors library writes it
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = raw[8 + length:]
    kinds = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "BF16": np.uint16}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        lo, hi = entry["data_offsets"]
        a = np.frombuffer(data[lo:hi], dtype=kinds[entry["dtype"]]).reshape(entry["shape"])
        out[name] = bf16_bits_to_float(a) if entry["dtype"] == "BF16" else a.astype(np.float64)
    return out


def bf16_bits_to_float(a):
    return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
