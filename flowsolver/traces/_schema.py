"""The Chakra execution-trace messages, built at run time from descriptors (no generated
code), and the file format: varint-length-prefixed messages, one ``GlobalMetadata`` then
``Node`` messages, optionally gzipped.

Schema followed: MLCommons Chakra ``schema/protobuf/et_def.proto`` (package
``ChakraProtoMsg``, trace version ``0.0.4``), as of mlcommons/chakra commit ``6dc63e14``.
We define the messages and fields a workload needs (``GlobalMetadata``, ``AttributeProto``
and its list messages, ``Node``, ``IOInfo``, the ``NodeType`` and ``CollectiveCommType``
enums) with the same names, numbers and types, so the bytes are the schema's; fields we do
not define (``Node.storage``, field 11) are kept by protobuf as unknown fields and ignored.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from functools import lru_cache

__all__ = ["SCHEMA_VERSION", "SCHEMA_SOURCE", "NODE_TYPES", "COLLECTIVE_TYPES", "messages", "read_stream",
           "write_stream", "TraceError", "MAX_FILE_BYTES", "MAX_NODES", "MAX_RANKS", "check_limit"]

#: the trace version our writer puts in GlobalMetadata (Chakra's converters write "0.0.4")
SCHEMA_VERSION = "0.0.4"
SCHEMA_SOURCE = "mlcommons/chakra schema/protobuf/et_def.proto @ 6dc63e147b9d115286626cc122459e44d9d08401"

#: NodeType enum (et_def.proto)
NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3, "COMP_NODE": 4,
              "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7, "STORAGE_NODE": 8,
              "BATCH_NODE": 9, "CHECKPOINT_NODE": 10}
#: CollectiveCommType enum (et_def.proto)
COLLECTIVE_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
                    "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}

# AttributeProto's oneof "value": (field name, number, scalar type or list message)
_SCALARS = [("double", "TYPE_DOUBLE"), ("float", "TYPE_FLOAT"), ("int32", "TYPE_INT32"), ("int64", "TYPE_INT64"),
            ("uint32", "TYPE_UINT32"), ("uint64", "TYPE_UINT64"), ("sint32", "TYPE_SINT32"),
            ("sint64", "TYPE_SINT64"), ("fixed32", "TYPE_FIXED32"), ("fixed64", "TYPE_FIXED64"),
            ("sfixed32", "TYPE_SFIXED32"), ("sfixed64", "TYPE_SFIXED64"), ("bool", "TYPE_BOOL"),
            ("string", "TYPE_STRING"), ("bytes", "TYPE_BYTES")]


class TraceError(ValueError):
    """A trace that cannot be read or replayed; the message names the file and the node."""


def _protobuf():
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise ImportError("reading or writing Chakra traces needs the protobuf runtime: "
                          "pip install 'flowsolver[traces]' (or pip install protobuf)") from None
    return descriptor_pb2, descriptor_pool, message_factory


def _file_descriptor(descriptor_pb2):
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="flowsolver_chakra_et_def.proto", package="ChakraProtoMsg",
                                            syntax="proto3")

    def message(name, fields, oneof=None):
        m = fd.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, number, ftype, label, type_name, in_oneof in fields:
            f = m.field.add(name=fname, number=number, type=getattr(F, ftype), label=getattr(F, label))
            if type_name:
                f.type_name = type_name
            if in_oneof:
                f.oneof_index = 0
        return m

    attr_fields = [("name", 1, "TYPE_STRING", "LABEL_OPTIONAL", "", False),
                   ("doc_string", 2, "TYPE_STRING", "LABEL_OPTIONAL", "", False)]
    for i, (kind, ftype) in enumerate(_SCALARS):
        title = kind.capitalize() + "List"
        attr_fields.append((f"{kind}_val", 3 + 2 * i, ftype, "LABEL_OPTIONAL", "", True))
        attr_fields.append((f"{kind}_list", 4 + 2 * i, "TYPE_MESSAGE", "LABEL_OPTIONAL", f".ChakraProtoMsg.{title}",
                            True))
    message("AttributeProto", attr_fields, oneof="value")
    for kind, ftype in _SCALARS:
        message(kind.capitalize() + "List", [("values", 1, ftype, "LABEL_REPEATED", "", False)])
    message("GlobalMetadata", [("version", 1, "TYPE_STRING", "LABEL_OPTIONAL", "", False),
                               ("attr", 2, "TYPE_MESSAGE", "LABEL_REPEATED", ".ChakraProtoMsg.AttributeProto", False)])
    message("IOInfo", [(n, i, "TYPE_STRING", "LABEL_OPTIONAL", "", False)
                       for i, n in enumerate(("values", "shapes", "types"), 1)])
    message("Node", [("id", 1, "TYPE_UINT64", "LABEL_OPTIONAL", "", False),
                     ("name", 2, "TYPE_STRING", "LABEL_OPTIONAL", "", False),
                     ("type", 3, "TYPE_ENUM", "LABEL_OPTIONAL", ".ChakraProtoMsg.NodeType", False),
                     ("ctrl_deps", 4, "TYPE_UINT64", "LABEL_REPEATED", "", False),
                     ("data_deps", 5, "TYPE_UINT64", "LABEL_REPEATED", "", False),
                     ("start_time_micros", 6, "TYPE_UINT64", "LABEL_OPTIONAL", "", False),
                     ("duration_micros", 7, "TYPE_UINT64", "LABEL_OPTIONAL", "", False),
                     ("inputs", 8, "TYPE_MESSAGE", "LABEL_OPTIONAL", ".ChakraProtoMsg.IOInfo", False),
                     ("outputs", 9, "TYPE_MESSAGE", "LABEL_OPTIONAL", ".ChakraProtoMsg.IOInfo", False),
                     ("attr", 10, "TYPE_MESSAGE", "LABEL_REPEATED", ".ChakraProtoMsg.AttributeProto", False)])
    for name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_TYPES)):
        enum = fd.enum_type.add(name=name)
        for key, number in values.items():
            enum.value.add(name=key, number=number)
    return fd


@lru_cache(maxsize=1)
def messages():
    """``(GlobalMetadata, Node, AttributeProto)`` message classes (needs ``protobuf``)."""
    descriptor_pb2, descriptor_pool, message_factory = _protobuf()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor(descriptor_pb2))
    if hasattr(message_factory, "GetMessageClass"):           # protobuf >= 4.22
        make = message_factory.GetMessageClass
    else:
        make = message_factory.MessageFactory(pool).GetPrototype
    get = lambda name: make(pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}"))  # noqa: E731
    return get("GlobalMetadata"), get("Node"), get("AttributeProto")


#: what one trace file may hold, inflated (bytes): the default of ``max_file_bytes``
MAX_FILE_BYTES = 2**30
#: nodes a workload may hold over all its ranks: the default of ``max_nodes``. A node takes
#: 0.6-0.9 kB while read (measured 2026-12-05: 2 million Chakra nodes raised the peak by 1.74 GB,
#: 3.1 million SimAI ones by 1.84 GB), so the default allows up to about 9 GB: lower it where less
MAX_NODES = 10_000_000
#: ranks a workload may have: the default of ``max_ranks``
MAX_RANKS = 2**20
_CHUNK = 2**20          # bytes read or inflated at a time


def check_limit(name: str, value) -> int:
    """``value`` of the limit keyword ``name`` as an int >= 1, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _chunks(path, limit: int):
    """The bytes of the file at ``path`` (inflated when it is gzipped, every member of it),
    at most ``_CHUNK`` at a time and at most ``limit`` in all: a file holding more is a
    :class:`TraceError` before more than ``limit + _CHUNK`` bytes were made."""
    with open(path, "rb") as fh:
        head = fh.read(2)
        if head != b"\x1f\x8b":                        # plain: its size says it all, but for a pipe or a device
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise TraceError(f"{path}: the file is {size} bytes, more than max_file_bytes={limit}")
            data, total = head, len(head)
            while data:
                yield data
                data = fh.read(_CHUNK)
                total += len(data)
                if total > limit:            # (a pipe, /dev/stdin or /dev/zero says size 0)
                    raise TraceError(f"{path}: the file holds more than max_file_bytes={limit} bytes")
            return
        total, z, raw = 0, None, head
        while True:
            if not raw:
                raw = fh.read(_CHUNK)
                if not raw:
                    if z is not None and not z.eof:
                        raise TraceError(f"{path}: not a readable gzip file (it ends inside its compressed data)")
                    return
            if z is None:                             # a member starts here, or zero padding (gzip allows it)
                raw = raw.lstrip(b"\x00")
                if not raw:
                    continue
                if raw[:2] != b"\x1f\x8b"[:len(raw[:2])]:
                    raise TraceError(f"{path}: not a readable gzip file (data after its end that is not another "
                                     "gzip member)")
                z = zlib.decompressobj(31)
            try:
                while True:
                    out = z.decompress(raw, _CHUNK)
                    total += len(out)
                    if total > limit:
                        raise TraceError(f"{path}: inflates to more than max_file_bytes={limit} bytes; pass "
                                         "max_file_bytes= to read it")
                    if out:
                        yield out
                    raw = z.unconsumed_tail
                    if not raw and (len(out) < _CHUNK or z.eof):
                        break
            except zlib.error as err:
                raise TraceError(f"{path}: not a readable gzip file ({err})") from None
            if z.eof:
                raw, z = z.unused_data, None


class _Stream:
    """Bytes taken from the front of a chunk iterator; the position is counted from the
    start of the (inflated) file."""

    def __init__(self, chunks):
        self.chunks, self.buf, self.pos, self.offset = chunks, b"", 0, 0

    def fill(self, need: int) -> bool:
        """At least ``need`` bytes ahead of the position (False where the file ends first)."""
        have = len(self.buf) - self.pos
        if have >= need:
            return True
        parts = [self.buf[self.pos:]]
        while have < need:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            parts.append(chunk)
            have += len(chunk)
        self.offset += self.pos
        self.buf, self.pos = b"".join(parts), 0
        return have >= need

    def varint(self):
        """(value or None, how it ends: "" read, "end" the file ends inside it, "long"
        more than 10 bytes)."""
        if len(self.buf) - self.pos < 10:
            self.fill(10)
        buf, pos = self.buf, self.pos
        if pos < len(buf) and buf[pos] < 0x80:          # one byte: most messages
            self.pos = pos + 1
            return buf[pos], ""
        value, shift = 0, 0
        while pos < len(buf):
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value, ""
            shift += 7
            if shift > 63:
                return None, "long"
        return None, "end"

    def take(self, n: int) -> bytes | None:
        pos = self.pos
        if len(self.buf) - pos < n:
            if not self.fill(n):
                return None
            pos = self.pos
        self.pos = pos + n
        return self.buf[pos:pos + n]

    def at_end(self) -> bool:
        return self.pos >= len(self.buf) and not self.fill(1)

    def where(self) -> int:
        return self.offset + self.pos


def read_stream(path, convert=None, memo=None, *, max_file_bytes: int = MAX_FILE_BYTES,
                max_nodes: int = MAX_NODES, nodes_before: int = 0):
    """``(metadata, nodes)`` of one Chakra ET file (plain or gzipped): its GlobalMetadata and
    its Node messages in file order, each ``convert(message)`` when ``convert`` is given.
    ``memo`` (a dict, shared between files) keeps what each distinct message's bytes became,
    so a node repeated byte for byte (as on the ranks of one parallel group) is decoded once.

    The file is read (and inflated) a chunk at a time, one message at a time: a file
    holding more than ``max_file_bytes`` bytes (inflated), a message longer than that, or
    more than ``max_nodes`` nodes (counting ``nodes_before`` read from other files) is a
    :class:`TraceError` before more is allocated. A truncated or undecodable message is a
    :class:`TraceError` naming the file, the message's index, the node before it and its
    byte offset."""
    GlobalMetadata, Node, _ = messages()
    from google.protobuf.message import DecodeError

    stream, out = _Stream(_chunks(path, max_file_bytes)), []
    metadata, last_id = None, None
    while not stream.at_end():
        start = stream.where()
        length, ended = stream.varint()
        if ended == "long":
            raise TraceError(f"{path}: {_what(metadata, out, last_id)} at byte {start} has a length prefix of more "
                             "than 10 bytes (not a Chakra trace, or a damaged one)")
        if length is not None and length > max_file_bytes:
            raise TraceError(f"{path}: {_what(metadata, out, last_id)} at byte {start} is {length} bytes, more than "
                             f"max_file_bytes={max_file_bytes}")
        body = None if length is None else stream.take(length)
        if body is None:
            raise TraceError(f"{path}: {_what(metadata, out, last_id)} at byte {start} is truncated (the file ends "
                             "inside it)")
        if metadata is not None and nodes_before + len(out) >= max_nodes:
            raise TraceError(f"{path}: more than max_nodes={max_nodes} nodes ({nodes_before} in the files before "
                             "this one); pass max_nodes= to read more")
        if memo is not None and metadata is not None and body in memo:
            item, last_id = memo[body]
            out.append(item)
            continue
        msg = GlobalMetadata() if metadata is None else Node()
        try:
            msg.ParseFromString(body)
        except DecodeError as err:
            raise TraceError(f"{path}: {_what(metadata, out, last_id)} at byte {start} cannot be decoded "
                             f"({err})") from None
        if metadata is None:
            metadata = msg
            continue
        item, last_id = (msg if convert is None else convert(msg)), msg.id
        if memo is not None:
            memo[body] = (item, last_id)
        out.append(item)
    if metadata is None:
        raise TraceError(f"{path}: empty file (a Chakra trace starts with a GlobalMetadata message)")
    return metadata, out


def _what(metadata, out, last_id) -> str:
    if metadata is None:
        return "GlobalMetadata"
    return f"node message {len(out)}" + (f" (after node {last_id})" if out else "")


def _prefixed(buffer, msg):
    body = msg.SerializeToString()
    n = len(body)
    while True:
        byte = n & 0x7F
        n >>= 7
        buffer.write(bytes([byte | (0x80 if n else 0)]))
        if not n:
            break
    buffer.write(body)


def write_stream(path, metadata, nodes, *, compress: bool = False) -> None:
    """Write one Chakra ET file: ``metadata`` then every node, each prefixed by its length
    as a varint; gzipped when ``compress``."""
    buffer = io.BytesIO()
    _prefixed(buffer, metadata)
    for node in nodes:
        _prefixed(buffer, node)
    data = buffer.getvalue()
    with open(path, "wb") as fh:
        fh.write(gzip.compress(data, mtime=0) if compress else data)
