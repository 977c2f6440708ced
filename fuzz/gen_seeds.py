"""fuzz/gen_seeds.py: writes the small seed inputs of the safetensors, IDX
and .npy fuzz targets into fuzz/seeds/ (committed; the IR target seeds from
tests/data/ir). Needs only the Python standard library:
    python3 fuzz/gen_seeds.py"""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(sub, name, data):
    d = os.path.join(HERE, "seeds", sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    header, blobs, off = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs += raw
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
write("safetensors", "two.safetensors",
      safetensors({"w": ("F32", [2, 2], f32(1, 2, 3, 4)), "b": ("F32", [2], f32(0.5, -1))},
                  {"format": "pt"}))
write("safetensors", "mixed.safetensors",
      safetensors({"i": ("I64", [3], struct.pack("<3q", 1, -2, 3)),
                   "d": ("F64", [], struct.pack("<d", 2.5)),
                   "e": ("F32", [0, 4], b"")}))

images = struct.pack(">IIII", 0x803, 2, 3, 3) + bytes(range(18))
labels = struct.pack(">II", 0x801, 2) + bytes([3, 7])
write("idx", "images-idx3-ubyte", images)
write("idx", "labels-idx1-ubyte", labels)
write("idx", "images-idx3-ubyte.gz", gzip.compress(images, mtime=0))


def npy(descr, shape, raw, fortran=False, version=(1, 0)):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %r, }" % (
        descr, "True" if fortran else "False", tuple(shape))
    pre = 10 if version[0] == 1 else 12
    d += " " * (-(pre + len(d) + 1) % 64) + "\n"
    ln = struct.pack("<H", len(d)) if version[0] == 1 else struct.pack("<I", len(d))
    return b"\x93NUMPY" + bytes(version) + ln + d.encode("latin1") + raw


write("npy", "f4.npy", npy("<f4", (2, 3), f32(1, 2, 3, 4, 5, 6)))
write("npy", "f8_fortran.npy", npy("<f8", (2, 2), struct.pack("<4d", 1, 2, 3, 4), fortran=True))
write("npy", "i8_v2.npy", npy("<i8", (3,), struct.pack("<3q", 1, 2, 3), version=(2, 0)))
write("npy", "b1_scalar.npy", npy("|b1", (), b"\x01"))
