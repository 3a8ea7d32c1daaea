"""Checks behind :func:`flowsolver.nccl_tests.read`: the size limit, a log file's bytes
decoded (gzip, UTF-16, a BOM), the rank count its several witnesses state reconciled, and each
row's size checked against its element count."""

from __future__ import annotations

import codecs
import gzip
import io
import math
import os
import zlib

#: bytes per element of nccl-tests' type names (src/common.cu test_typenames; "char" and "int"
#: are the names nccl-tests printed before NCCL 2's unsigned and 8-bit float types)
TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8, "uint64": 8,
              "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
#: ops whose printed size is the count x nranks elements (nccl-tests' getCollByteCount: all_gather
#: and reduce_scatter print the full buffer, the count per rank; alltoall the count sent to each peer)
PER_RANK_COUNT = ("all_gather", "reduce_scatter", "all_to_all")
#: busbw = algbw x SCALE (p - 1) / p (nccl-tests' PERFORMANCE.md); other ops' busbw is their algbw
BUSBW_SCALE = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}
#: NVIDIA's device names (``cudaDeviceProp.name``, which nccl-tests' device list prints, src/util.cu)
#: -> (the GPU types of topologies/gpu_types.py and collectives' GPU_GENERATION of that part, or of
#: one with its links: the A100 SXM4's NVLink 3 is one for 40 and 80 GB, the H100 SXM5's for HBM3 and
#: HBM2e; its generation); the first pattern found in the name wins (GH200 before H200, GB200 before B200,
#: H200 NVL before H200). The H100 NVL and H200 NVL are PCIe cards joined by 2- or 4-way NVLink bridges, no
#: NVSwitch (NVIDIA H100 / H200 product pages: H200 NVL up to 600 W against the SXM's 700 W); the catalogue
#: has no H200 NVL, so both read as the PCIe Hopper part, whose links (PCIe Gen5, no NVSwitch) they share.
#: Names as NVIDIA's drivers report them: "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB",
#: "NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-40GB", "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H100
#: PCIe", "NVIDIA H100 NVL", "NVIDIA H800", "NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA B200",
#: "NVIDIA GB200", "Tesla V100-SXM2-32GB"; a bare "NVIDIA H100" names the generation only
DEVICE_GPUS = (("GH200", ("gh200",), "hopper"), ("GB300", ("gb300",), "blackwell"), ("GB200", ("gb200",), "blackwell"),
               ("B300", ("b300",), "blackwell"), ("B200", ("b200",), "blackwell"),
               ("H200 NVL", ("h100_pcie",), "hopper"), ("H200", ("h200",), "hopper"),
               ("H800", ("h800",), "hopper"), ("H100 80GB HBM3", ("h100_sxm", "h100_sxm_hbm2e"), "hopper"),
               ("H100 PCIe", ("h100_pcie",), "hopper"), ("H100 NVL", ("h100_pcie",), "hopper"),
               ("H100", (), "hopper"), ("A100-SXM4", ("a100_sxm", "a100_80gb", "a100_40gb"), "ampere"),
               ("A100 80GB PCIe", ("a100_pcie",), "ampere"), ("A100-PCIE", ("a100_pcie",), "ampere"),
               ("A100", (), "ampere"), ("V100", ("v100",), "volta"))
_PRINTED = 0.0050001        # nccl-tests prints algbw and busbw (GB/s) to 2 decimals (a hair over half a unit)
_PACKED = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}


def decoded(data: bytes, source: str, max_bytes: int) -> str:
    """The text of a log file's bytes: gunzipped (at most ``max_bytes`` once unpacked), UTF-16 or
    UTF-32 decoded by its byte-order mark (or its NUL bytes: PowerShell's ``>`` writes UTF-16),
    a UTF-8 BOM dropped; ValueError naming what the file is where it is no text.

    >>> decoded("# size count".encode("utf-16"), "log", 100)
    '# size count'
    >>> decoded(b"BZh91AY", "log.bz2", 100)
    Traceback (most recent call last):
    ...
    ValueError: log.bz2: a bzip2 file, not a text log: unpack it first
    """
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
                data = f.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{source}: a gzip file that does not unpack ({e})") from None
        if len(data) > max_bytes:
            raise ValueError(f"{source}: the gzip file unpacks to more than {max_bytes} bytes, the log size limit"
                             " (FLOWSOLVER_LOG_MAX_BYTES)")
    for magic, kind in _PACKED.items():
        if data.startswith(magic):
            raise ValueError(f"{source}: a {kind} file, not a text log: unpack it first")
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    if b"\x00" in data[:4096]:
        head = data[:4096]
        even, odd = head[0::2].count(0), head[1::2].count(0)
        if odd > 0.9 * len(head[1::2]) and even == 0:
            return data.decode("utf-16-le", errors="replace")
        if even > 0.9 * len(head[0::2]) and odd == 0:
            return data.decode("utf-16-be", errors="replace")
        data = data.rstrip(b"\x00")                # a text log a crash padded with NULs: the text
        if b"\x00" in data:
            raise ValueError(f"{source}: a binary file (NUL bytes among the first 4 KiB), not an nccl-tests text log")
    return data.decode("utf-8", errors="replace")


def limit(max_bytes, default):
    """The largest log read (bytes): ``max_bytes``, else FLOWSOLVER_LOG_MAX_BYTES, else ``default``.

    >>> limit(None, 2**24), limit(1000, 2**24)
    (16777216, 1000)
    """
    if max_bytes is None:
        given = os.environ.get("FLOWSOLVER_LOG_MAX_BYTES", "").strip()
        if not given:
            return default
        if not (given.isascii() and given.isdigit() and int(given) >= 1):
            raise ValueError(f"FLOWSOLVER_LOG_MAX_BYTES must be an integer >= 1 (bytes), got {given!r}")
        return int(given)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be an integer >= 1, got {max_bytes!r}")
    return max_bytes


def busbw_range(df, op):
    """(lo, hi): the rank counts ``p`` that every row's busbw / algbw ratio allows (nccl-tests
    prints ``busbw = algbw x s (p - 1) / p``, both to 2 decimals); None where the op's ratio is
    1 whatever ``p`` or the rows disagree among themselves.

    >>> busbw_range(dict(algbw=[214.75], busbw=[402.66]), "all_reduce")    # 2 x 15 / 16
    (16, 16)
    """
    scale = BUSBW_SCALE.get(op)
    if scale is None:
        return None
    lo, hi = 1.0, math.inf
    for a, b in zip(df["algbw"], df["busbw"]):
        if not (a > _PRINTED and b >= 0):          # NaN, or printed as 0.00
            continue
        f_lo, f_hi = max(b - _PRINTED, 0.0) / (a + _PRINTED), (b + _PRINTED) / (a - _PRINTED)
        lo = max(lo, scale / (scale - f_lo) if f_lo < scale else math.inf)
        hi = min(hi, scale / (scale - f_hi) if f_hi < scale else math.inf)
    if lo > hi + 1e-9:
        return None
    return math.ceil(lo - 1e-9), math.floor(hi + 1e-9) if hi < math.inf else math.inf


def size_ratio(rows, names, op, source):
    """The one integer ``size / (count x type bytes)`` of the table's rows (1, or the rank count
    for all-gather, reduce-scatter, all-to-all: nccl-tests prints ``max(send, receive bytes)``
    and the count per rank, src/common.cu), None where no row tells; ValueError naming the
    line where a row's size is not its count's bytes (a damaged row).

    >>> size_ratio([(5, ["1048576", "16384", "float"])], ["size", "count", "type"], "all_gather", "log")
    16
    """
    if "type" not in names:
        return None
    at, ratio = names.index("type"), None
    for no, tokens in rows:
        width = TYPE_BYTES.get(tokens[at])
        if width is None:
            continue
        size, count = int(tokens[0]), int(tokens[1])
        k = size / (count * width) if count else (1 if size == 0 else math.inf)
        bad = (k != int(k) if math.isfinite(k) else True) or (op is not None and op not in PER_RANK_COUNT and k != 1)
        if not bad and ratio is not None and count and k != ratio:
            bad = True
        if bad:
            each = "" if op is None or op not in PER_RANK_COUNT else " x the rank count"
            raise ValueError(f"{source}:{no}: the row's size {size} B is not its count {count} x {width} B "
                             f"({tokens[at]}){each}: a damaged row (row {' '.join(tokens)[:120]!r})")
        if count:
            ratio = int(k)
    return ratio


def reconciled_ranks(devices, nranks, ratio, sizes, op, source):
    """(rank count, where from) of the log's witnesses, or (None, None) where none says;
    ValueError giving each figure where they disagree.

    The witnesses: the device list (its highest rank + 1: a lower bound, the list can be cut
    short by hand or by ``grep``), NCCL INFO's ``nranks`` (one value), busbw / algbw (a range,
    ``ratio``: :func:`busbw_range`) and, for all-gather, reduce-scatter and all-to-all,
    ``size / (count x type bytes)`` (``sizes``). NCCL's ``nranks``, the ratio (where it
    allows one count) and the sizes must agree; the count they give wins over a device list
    naming fewer ranks where the list is evidently cut short (ranks missing between its
    first and last) or two of them agree; otherwise a shorter list, a list naming a rank past
    their count, or a ratio range excluding the count is a ValueError. Without them the device
    list's count stands, checked against the ratio range.

    >>> reconciled_ranks({0: (), 7: (), 8: (), 15: ()}, None, (16, 16), None, "all_reduce", "log")
    (16, 'busbw / algbw (its device list is cut short)')
    """
    said = {}
    if nranks is not None:
        said["NCCL INFO nranks"] = nranks
    if ratio is not None and ratio[0] == ratio[1]:
        said["busbw / algbw"] = ratio[0]
    if sizes is not None and op in PER_RANK_COUNT:
        said["size / (count x type bytes)"] = sizes
    listed = max(devices) + 1 if devices else None
    figures = [f"its device list names ranks up to {listed - 1} ({len(devices)} listed)"] if devices else []
    figures += [f"{k} says {v}" for k, v in said.items()]
    if ratio is not None and ratio[0] != ratio[1] and ratio != (1, math.inf):
        figures.append(f"busbw / algbw allows {ratio[0]} to {ratio[1]}")
    values = set(said.values())
    refuse = len(values) > 1                                  # the exact witnesses disagree
    count = min(values) if len(values) == 1 else None
    if count is not None and listed is not None and listed != count:
        partial = len(devices) < listed or len(said) > 1
        refuse = refuse or listed > count or not partial
    if count is None and not refuse:
        count = listed
    if count is not None and ratio is not None and not ratio[0] <= count <= ratio[1]:
        refuse = True
    if refuse:
        raise ValueError(f"{source}: the log's rank counts disagree ({'; '.join(figures)}): is the device list cut "
                         "short, or the table from another run? Mend the log")
    if count is None:
        return None, None
    if said:
        return count, " and ".join(said) + (" (its device list is cut short)" if 0 < len(devices) < count else "")
    return count, "its device list"


def repeated_sizes(df, source) -> str | None:
    """What a RuntimeWarning says of a table that gives a size more than once for one type,
    reduction and root (None where none repeats). nccl-tests prints each size once per type,
    reduction and root it loops over (``-d all``, ``-o all``, ``-r -1``: src/reduce.cu's loops), so
    those repeat it rightly; a repeat within one is ``-N`` (``--run_cycles``: src/common.cu's
    TimeTest prints the whole size range again each cycle, with no line of its own between
    cycles) or rows of two runs run together, which a whole table repeated in order cannot tell
    apart from cycles. Every row is kept either way: the warning says what the rows are."""
    if df.empty or "size" not in df:
        return None
    one = df[df["placement"] == df["placement"].iloc[0]] if "placement" in df else df   # a data line once
    keys = [c for c in ("type", "redop", "root") if c in one]
    groups = [s for _, s in one.groupby(keys, sort=False, dropna=False)["size"]] if keys else [one["size"]]
    repeated, cycles = set(), set()
    for sizes in groups:
        seq = [int(v) for v in sizes]
        distinct = list(dict.fromkeys(seq))
        if len(seq) > len(distinct):
            seen = set()
            repeated |= {v for v in seq if v in seen or seen.add(v)}
            k = len(seq) // len(distinct)
            cycles.add(k if seq == distinct * k else None)
    repeated = sorted(repeated)
    if not repeated:
        return None
    named = ", ".join(map(str, repeated[:6])) + (f", ... ({len(repeated)} sizes)" if len(repeated) > 6 else "")
    if len(cycles) == 1 and (k := next(iter(cycles))) is not None:
        return (f"{source}: the table gives its sizes ({named}) {k} times each, in order: nccl-tests -N {k} "
                f"(--run_cycles) prints its cycles so, marking no cycle's start, and two runs' tables run together "
                f"read the same; every row is kept (one per data line and placement), so a comparison or a fit "
                f"takes all {k} of each size")
    return (f"{source}: the table gives sizes {named} more than once for one type, reduction and root, and not as "
            f"whole cycles of the table (nccl-tests -N repeats it in order): rows of two runs run together? Every "
            f"row is kept (one per data line and placement), so a comparison or a fit mixes them: read each run's "
            f"part on its own")


def device_gpu(name: str):
    """``(GPU types, generation)`` of an NVIDIA device name as nccl-tests prints it (:data:`DEVICE_GPUS`;
    no types where the name gives only the generation), or None for a name not known here.

    >>> device_gpu("NVIDIA A100-SXM4-40GB"), device_gpu("NVIDIA H100 PCIe"), device_gpu("AMD MI300X")
    ((('a100_sxm', 'a100_80gb', 'a100_40gb'), 'ampere'), (('h100_pcie',), 'hopper'), None)
    """
    upper = name.upper()
    return next(((types, generation) for key, types, generation in DEVICE_GPUS if key.upper() in upper), None)
