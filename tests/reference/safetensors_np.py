"""Read and write Hugging Face checkpoints (config.json + safetensors) with numpy only.

This module is part of brigade's independent reference implementation: it is written from the
published safetensors format description, not from brigade's C++ loader, so that the two can check
each other.

The safetensors layout: an 8-byte little-endian unsigned header length N, then N bytes of JSON
mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
the first byte after the header) plus an optional "__metadata__" object of strings, then the raw
little-endian tensor bytes.

Floating tensors are returned as float32 arrays. BF16 converts exactly by shifting its 16 bits into
the high half of a float32; F16 converts exactly through numpy's IEEE half type.
"""

import json
import os
import struct

import numpy as np

# Element size in bytes and numpy storage type of each dtype this module reads and writes.
_STORAGE = {
    "F64": (8, np.dtype("<f8")),
    "F32": (4, np.dtype("<f4")),
    "F16": (2, np.dtype("<f2")),
    "BF16": (2, np.dtype("<u2")),
}

# A header larger than this is not a checkpoint we produce or expect; it guards against reading a
# corrupt length field as gigabytes of JSON.
_MAX_HEADER_BYTES = 100 * 1024 * 1024

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


class CheckpointError(ValueError):
    """A checkpoint file or directory is malformed; the message names the file and the problem."""


def bf16_bits_to_f32(bits):
    """Exact conversion of bfloat16 bit patterns (uint16 array) to float32."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(values):
    """Round float32 values to the nearest bfloat16 (ties to even) and return the uint16 bits.

    NaN stays NaN (quiet), infinities stay infinite, and finite values too large for bfloat16
    round to infinity exactly as IEEE rounding prescribes.
    """
    f32 = np.ascontiguousarray(values, dtype=np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = ((bits + np.uint64(0x7FFF) + lsb) >> np.uint64(16)).astype(np.uint16)
    nan = np.isnan(f32)
    quiet_nan = ((bits >> np.uint64(16)) | np.uint64(0x0040)).astype(np.uint16)
    return np.where(nan, quiet_nan, rounded).astype(np.uint16)


def read_header(path):
    """Return (header dict without __metadata__, metadata dict, byte offset of the data area)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise CheckpointError(f"{path}: shorter than the 8-byte header length field")
        (header_bytes,) = struct.unpack("<Q", prefix)
        if header_bytes > _MAX_HEADER_BYTES or 8 + header_bytes > size:
            raise CheckpointError(
                f"{path}: header length {header_bytes} does not fit in a {size}-byte file")
        raw = f.read(header_bytes)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: header is not valid UTF-8 JSON ({e})") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + header_bytes


def _check_entry(path, name, entry, data_bytes):
    """Validate one header entry and return (dtype, shape, begin, end)."""
    try:
        dtype, shape, (begin, end) = entry["dtype"], list(entry["shape"]), entry["data_offsets"]
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: tensor {name!r} has a malformed header entry") from e
    if dtype not in _STORAGE:
        raise CheckpointError(
            f"{path}: tensor {name!r} has dtype {dtype}; this reader supports "
            f"{', '.join(sorted(_STORAGE))}")
    if any((not isinstance(d, int)) or d < 0 for d in shape):
        raise CheckpointError(f"{path}: tensor {name!r} has invalid shape {shape}")
    item_bytes = _STORAGE[dtype][0]
    want = int(np.prod(shape, dtype=np.int64)) * item_bytes
    if not (0 <= begin <= end <= data_bytes) or end - begin != want:
        raise CheckpointError(
            f"{path}: tensor {name!r} offsets [{begin}, {end}) do not hold {shape} {dtype} "
            f"({want} bytes) inside the {data_bytes}-byte data area")
    return dtype, shape, begin, end


def read_safetensors(path, raw=False):
    """Read every tensor of one .safetensors file.

    Returns {name: array}. Floating tensors become float32 (F64 stays float64) unless raw is True,
    in which case each value is (dtype string, stored array) with BF16 as its uint16 bits.
    """
    header, _, data_start = read_header(path)
    size = os.path.getsize(path)
    data_bytes = size - data_start
    spans = []
    tensors = {}
    with open(path, "rb") as f:
        f.seek(data_start)
        data = f.read()
    for name, entry in header.items():
        dtype, shape, begin, end = _check_entry(path, name, entry, data_bytes)
        spans.append((begin, end, name))
        stored = np.frombuffer(data, dtype=_STORAGE[dtype][1], count=(end - begin)
                               // _STORAGE[dtype][0], offset=begin).reshape(shape).copy()
        if raw:
            tensors[name] = (dtype, stored)
        elif dtype == "BF16":
            tensors[name] = bf16_bits_to_f32(stored)
        elif dtype == "F64":
            tensors[name] = stored.astype(np.float64)
        else:
            tensors[name] = stored.astype(np.float32)
    spans.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise CheckpointError(f"{path}: tensors {n0!r} and {n1!r} overlap")
    return tensors


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise CheckpointError(f"{model_dir}: no config.json") from e
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from e


def checkpoint_files(model_dir):
    """The safetensors files of a checkpoint directory, in order, and the index's weight map.

    A directory with model.safetensors.index.json is sharded: the index's weight_map names the
    file of every tensor. Otherwise the directory must hold model.safetensors.
    """
    index_path = os.path.join(model_dir, INDEX_NAME)
    if os.path.exists(index_path):
        with open(index_path, "r", encoding="utf-8") as f:
            index = json.load(f)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index_path}: no weight_map object")
        files = sorted(set(weight_map.values()))
        return [os.path.join(model_dir, name) for name in files], weight_map
    single = os.path.join(model_dir, SINGLE_NAME)
    if not os.path.exists(single):
        raise CheckpointError(f"{model_dir}: neither {SINGLE_NAME} nor {INDEX_NAME}")
    return [single], None


def load_checkpoint(model_dir):
    """Return (config dict, {tensor name: float32 array}) for a checkpoint directory."""
    config = read_config(model_dir)
    files, weight_map = checkpoint_files(model_dir)
    tensors = {}
    for path in files:
        for name, array in read_safetensors(path).items():
            if name in tensors:
                raise CheckpointError(f"{path}: tensor {name!r} also appears in another shard")
            if weight_map is not None and os.path.join(model_dir, weight_map.get(name, "")) != path:
                raise CheckpointError(
                    f"{path}: tensor {name!r} is not mapped to this file by {INDEX_NAME}")
            tensors[name] = array
    if weight_map is not None:
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise CheckpointError(f"{model_dir}: {INDEX_NAME} names tensors no shard holds: "
                                  f"{missing[:5]}")
    return config, tensors


def encode_tensor(array, dtype):
    """Return the little-endian bytes of array stored as dtype (F64, F32, F16 or BF16)."""
    if dtype == "BF16":
        return f32_to_bf16_bits(array).astype("<u2").tobytes()
    if dtype not in _STORAGE:
        raise ValueError(f"cannot write dtype {dtype}; use one of {', '.join(sorted(_STORAGE))}")
    return np.ascontiguousarray(array, dtype=_STORAGE[dtype][1]).tobytes()


def write_safetensors(path, tensors, dtype, metadata=None, dtypes=None):
    """Write {name: array} to one safetensors file, every tensor stored as dtype except those
    `dtypes` ({name: dtype}) names.

    Tensors are laid out in sorted name order; the header is padded with spaces to a multiple of
    8 bytes so that the data area is aligned, as the reference writer does.
    Returns the number of data bytes written.
    """
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        stored = (dtypes or {}).get(name, dtype)
        blob = encode_tensor(tensors[name], stored)
        shape = [int(d) for d in np.shape(tensors[name])]
        header[name] = {"dtype": stored, "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        chunks.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in chunks:
            f.write(blob)
    return offset


def write_checkpoint(model_dir, config, tensors, dtype, shards=1, dtypes=None):
    """Write config.json and the tensors as one file or as `shards` files plus an index; `dtypes`
    ({name: dtype}) stores those tensors in another dtype than `dtype`.

    Shards split the sorted tensor names into contiguous groups of about equal byte size, named
    model-0000i-of-0000n.safetensors as Hugging Face names them.
    """
    os.makedirs(model_dir, exist_ok=True)
    cfg = dict(config)
    cfg.setdefault("torch_dtype", {"F32": "float32", "BF16": "bfloat16", "F16": "float16",
                                   "F64": "float64"}[dtype])
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    if shards <= 1:
        write_safetensors(os.path.join(model_dir, SINGLE_NAME), tensors, dtype, {"format": "pt"},
                          dtypes)
        return
    names = sorted(tensors)
    if shards > len(names):
        raise ValueError(f"cannot split {len(names)} tensors into {shards} shards")
    sizes = [int(np.size(tensors[n])) for n in names]
    target = sum(sizes) / shards
    groups = [[] for _ in range(shards)]
    group, acc = 0, 0
    for i, (name, size) in enumerate(zip(names, sizes)):
        groups_after = shards - 1 - group
        if groups[group] and groups_after > 0 and (
                acc >= target * (group + 1) or len(names) - i == groups_after):
            group += 1
        groups[group].append(name)
        acc += size
    weight_map = {}
    total_bytes = 0
    for i, members in enumerate(groups):
        file_name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        part = {n: tensors[n] for n in members}
        total_bytes += write_safetensors(os.path.join(model_dir, file_name), part, dtype,
                                         {"format": "pt"}, dtypes)
        weight_map.update({n: file_name for n in members})
    index = {"metadata": {"total_size": total_bytes}, "weight_map": weight_map}
    with open(os.path.join(model_dir, INDEX_NAME), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=2, sort_keys=True)
        f.write("\n")
