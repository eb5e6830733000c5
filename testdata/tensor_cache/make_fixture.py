# Writes this directory's tensor cache the way TVM's tvmjs.dump_tensor_cache does
# (encode_format="f32-to-bf16"), independently of relaxvm. Run: python3 make_fixture.py
import hashlib
import json
import struct


def f32_to_bf16(x):
    """tvmjs's rule: round to nearest even below the largest bfloat16, else truncate."""
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    f = struct.unpack("<f", struct.pack("<I", b))[0]
    limit = struct.unpack("<f", struct.pack("<I", 0x7F7F0000))[0]
    if -limit < f < limit:
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    return b >> 16


x0 = struct.pack("<3i", 1, 2, 3)
x1 = b"".join(struct.pack("<H", f32_to_bf16(v)) for v in [0.1, -2.5, 3.14159, 65504.0, 1e-40, -0.0])
shard = x0 + x1
with open("params_shard_0.bin", "wb") as f:
    f.write(shard)
records = [
    {"name": "x_0", "shape": [3], "dtype": "int32", "format": "f32-to-bf16", "nbytes": 12, "byteOffset": 0},
    {"name": "x_1", "shape": [2, 3], "dtype": "float32", "format": "f32-to-bf16", "nbytes": 12, "byteOffset": 12},
]
index = {
    "metadata": {"ParamSize": 2},
    "records": [{
        "dataPath": "params_shard_0.bin",
        "format": "raw-shard",
        "nbytes": len(shard),
        "records": records,
        "md5sum": hashlib.md5(shard).hexdigest(),
    }],
}
with open("tensor-cache.json", "w") as f:
    json.dump(index, f, indent=4)
