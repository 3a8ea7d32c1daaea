"""A Chakra ET encoder written from the protobuf wire-format specification and the field
numbers of et_def.proto, independent of flowsolver's reader and writer: the tests build
traces message by message with it."""

import gzip
import struct

# et_def.proto: NodeType and CollectiveCommType numbers
COMP, SEND, RECV, COLL, METADATA = 4, 5, 6, 7, 1
ALL_REDUCE, ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER = 0, 2, 6, 7


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def f_varint(field, n):
    return _key(field, 0) + varint(n) if n else b""


def f_bytes(field, data: bytes):
    return _key(field, 2) + varint(len(data)) + data


def f_string(field, text):
    return f_bytes(field, text.encode()) if text else b""


def f_double(field, x):
    return _key(field, 1) + struct.pack("<d", x)


def f_packed(field, values):
    return f_bytes(field, b"".join(varint(v) for v in values)) if values else b""


def attr(name, *, int64=None, uint64=None, string=None, boolean=None, double=None):
    """An AttributeProto: name = 1; double_val = 3, int64_val = 9, uint64_val = 13,
    bool_val = 27, string_val = 29."""
    body = f_string(1, name)
    if double is not None:
        body += f_double(3, double)
    if int64 is not None:
        body += _key(9, 0) + varint(int64)
    if uint64 is not None:
        body += _key(13, 0) + varint(uint64)
    if boolean is not None:
        body += _key(27, 0) + varint(int(boolean))
    if string is not None:
        body += f_bytes(29, string.encode())
    return body


def node(id, name, type, *, data_deps=(), ctrl_deps=(), duration_us=0, attrs=(), inputs=None):
    """A Node: id 1, name 2, type 3, ctrl_deps 4 and data_deps 5 (packed), duration_micros 7,
    inputs 8 (IOInfo.values 1), attr 10."""
    body = f_varint(1, id) + f_string(2, name) + f_varint(3, type) + f_packed(4, ctrl_deps) + \
        f_packed(5, data_deps) + f_varint(7, duration_us)
    if inputs is not None:
        body += f_bytes(8, f_string(1, inputs))
    for a in attrs:
        body += f_bytes(10, a)
    return body


def metadata(version="0.0.4"):
    """GlobalMetadata: version = 1."""
    return f_string(1, version)


def stream(messages) -> bytes:
    """Each message prefixed by its length as a varint."""
    return b"".join(varint(len(m)) + m for m in messages)


def write(path, messages, *, compress=False):
    data = stream(messages)
    path.write_bytes(gzip.compress(data) if compress else data)


def coll(id, name, comm_type, size, *, pg="", deps=()):
    attrs = [attr("comm_type", int64=comm_type), attr("comm_size", int64=size), attr("is_cpu_op", boolean=False)]
    if pg:
        attrs.append(attr("pg_name", string=pg))
    return node(id, name, COLL, data_deps=deps, attrs=attrs)


def comp(id, name, duration_us, *, deps=(), flops=None):
    attrs = [attr("is_cpu_op", boolean=False)] + ([attr("num_ops", int64=flops)] if flops is not None else [])
    return node(id, name, COMP, data_deps=deps, duration_us=duration_us, attrs=attrs)


def p2p(id, name, send, peer, size, *, tag=0, deps=()):
    attrs = [attr("comm_dst" if send else "comm_src", int64=peer), attr("comm_size", int64=size),
             attr("comm_tag", int64=tag)]
    return node(id, name, SEND if send else RECV, data_deps=deps, attrs=attrs)
