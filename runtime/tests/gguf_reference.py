"""Reference values from llama.cpp's own `gguf` Python package, for the GGUF reader's tests.

  gguf_reference.py write OUT.gguf
      writes a small GGUF with GGUFWriter: one tensor per type (F32, F16, BF16, Q8_0, Q4_0,
      Q4_1, Q5_0, Q5_1), quantized by gguf.quants.quantize, each followed by
      `<name>.expected`, an F32 tensor of gguf.quants.dequantize of its bytes; and one
      metadata entry per value type; and for the K-quants (Q4_K, Q5_K, Q6_K), for which the
      package has no quantizer, tensors of random blocks (random bytes, finite f16 scales)
      with their `.expected` values.
  gguf_reference.py dequant FILE.gguf OUT_DIR NAME...
      reads FILE with GGUFReader and writes OUT_DIR/NAME.f32: gguf.quants.dequantize of
      tensor NAME's bytes, as little-endian f32.
"""

import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]


def write(out):
    w = gguf.GGUFWriter(out, "reference")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo")
    w.add_uint64("test.u64", 2**40)
    w.add_int64("test.i64", -(2**40))
    w.add_float64("test.f64", 0.1)
    w.add_array("test.strings", ["a", "bc", ""])
    w.add_array("test.nested", [[1, 2], [3]])
    rng = np.random.default_rng(7)
    for ty in TYPES:
        data = rng.standard_normal((4, 128)).astype(np.float32)
        data[0, :32] = 0.0  # an all-zero block
        data[1, :32] *= 1000.0  # a block of large values
        name = ty.name.lower()
        q = gguf.quants.quantize(data, ty)
        w.add_tensor(name, q, raw_dtype=ty)
        expected = gguf.quants.dequantize(q, ty).astype(np.float32)
        w.add_tensor(name + ".expected", expected)
    for ty, scale_at in [(T.Q4_K, [0, 2]), (T.Q5_K, [0, 2]), (T.Q6_K, [208])]:
        block_bytes = gguf.constants.GGML_QUANT_SIZES[ty][1]
        blocks = rng.integers(0, 256, size=(6, block_bytes), dtype=np.uint8)
        for at in scale_at:
            scales = rng.uniform(-2.0, 2.0, size=6).astype(np.float16)
            blocks[:, at : at + 2] = scales.view(np.uint8).reshape(6, 2)
        q = blocks.reshape(3, 2 * block_bytes)
        name = ty.name.lower()
        w.add_tensor(name, q, raw_dtype=ty)
        w.add_tensor(name + ".expected", gguf.quants.dequantize(q, ty).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dequant(path, out_dir, names):
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    for name in names:
        t = tensors[name]
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        values = gguf.quants.dequantize(raw, t.tensor_type).astype("<f4")
        values.tofile(os.path.join(out_dir, name + ".f32"))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    elif sys.argv[1] == "dequant":
        dequant(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
