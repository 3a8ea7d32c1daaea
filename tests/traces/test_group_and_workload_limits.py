"""Limits of their own for the small text files next to the traces (adv21b F3): the
process-group JSON of a Chakra trace (``comm_group.json`` and a metadata node's
``inputs.values``) was read under the 1 GiB of a trace file and parsed at ~24x its size
(~25 GB before the error), a SimAI workload under the same 1 GiB (/dev/zero: 2.24 GB before
the error). Each now has a limit of a few MiB, a parameter the error names; the tests set it
small and write a file one byte over it."""

import json

import pytest

from flowsolver.traces import TraceError, read_chakra, read_simai_workload
from flowsolver.traces._chakra import MAX_GROUP_BYTES
from flowsolver.traces._simai import MAX_WORKLOAD_BYTES

from .. import chakra_wire as cw
from ..reader_checks import peak_memory

MiB = 2**20
GROUPS = '{"1": [0, 1]}'                         # 13 bytes: ASTRA-sim's communicator-group file
SIMAI = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 ga: 1 all_gpus: 2\n1\n"
         "layer -1 556000 ALLREDUCE 1048576 1000 NONE 0 2000 NONE 0 100\n")


def _two_ranks(tmp_path, groups_text=None, metadata_inputs=None):
    extra = [] if metadata_inputs is None else [cw.node(0, "pg", cw.METADATA, inputs=metadata_inputs)]
    for r in range(2):
        cw.write(tmp_path / f"trace.{r}.et", [cw.metadata(), *extra, cw.coll(1, "ar", cw.ALL_REDUCE, 64, pg="1")])
    if groups_text is not None:
        (tmp_path / "comm_group.json").write_text(groups_text)
    return tmp_path


def _padded(text, size):
    """``text`` padded with spaces (JSON whitespace) to ``size`` bytes."""
    return text + " " * (size - len(text))


def test_the_defaults_are_a_few_mib():
    assert MAX_GROUP_BYTES == 4 * MiB and MAX_WORKLOAD_BYTES == 4 * MiB


@pytest.mark.parametrize("limit", [100, 4096])
def test_comm_group_json_one_byte_over_max_group_bytes_is_refused_naming_it(tmp_path, limit):
    _two_ranks(tmp_path, _padded(GROUPS, limit))
    assert read_chakra(tmp_path, max_group_bytes=limit).groups["1"] == (0, 1)        # at the limit: read
    (tmp_path / "comm_group.json").write_text(_padded(GROUPS, limit + 1))
    with pytest.raises(TraceError, match=rf"comm_group.json: the file is {limit + 1} bytes, more than "
                                         rf"max_group_bytes={limit} .*pass a larger max_group_bytes"):
        read_chakra(tmp_path, max_group_bytes=limit)
    # the trace files' own limit no longer covers it: 1 GiB of trace, not of group JSON
    with pytest.raises(TraceError, match="max_group_bytes"):
        read_chakra(tmp_path, max_group_bytes=limit, max_file_bytes=2**30)


def test_comm_group_json_over_the_default_is_refused_before_parsing(tmp_path):
    """One byte over 4 MiB of empty lists (the shape that parsed at ~24x): refused on its size,
    with next to nothing allocated (it took ~100 MB to parse, ~25 GB at 1 GiB)."""
    text = '{"1":[' + "[]," * ((MAX_GROUP_BYTES - 8) // 3) + "[]]}"
    _two_ranks(tmp_path, _padded(text, MAX_GROUP_BYTES + 1))
    def refused():
        with pytest.raises(TraceError, match=rf"more than max_group_bytes={MAX_GROUP_BYTES}"):
            read_chakra(tmp_path)
    assert peak_memory(refused) < 2 * MiB


def test_a_metadata_nodes_process_groups_over_max_group_bytes_are_refused(tmp_path):
    groups = json.dumps([{"pg_name": "1", "ranks": [0, 1]}])
    limit = 200
    _two_ranks(tmp_path, metadata_inputs=_padded(groups, limit))
    assert read_chakra(tmp_path, max_group_bytes=limit).groups["1"] == (0, 1)
    _two_ranks(tmp_path, metadata_inputs=_padded(groups, limit + 1))
    with pytest.raises(TraceError, match=rf"trace\.0\.et: node 0: metadata node's inputs.values holds more than "
                                         rf"max_group_bytes={limit} bytes .*pass a larger max_group_bytes"):
        read_chakra(tmp_path, max_group_bytes=limit)


def test_max_group_bytes_counts_utf8_bytes_not_characters(tmp_path):
    # 'é' is 2 bytes: 60 of them in a pg_name are 120 bytes in 60 characters
    groups = json.dumps([{"pg_name": "é" * 60, "ranks": [0, 1]}], ensure_ascii=False)
    _two_ranks(tmp_path, metadata_inputs=groups)
    size = len(groups.encode())
    assert len(groups) < size
    with pytest.raises(TraceError, match=rf"max_group_bytes={size - 1} "):
        read_chakra(tmp_path, max_group_bytes=size - 1)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4M"])
def test_max_group_bytes_must_be_a_positive_integer(tmp_path, bad):
    _two_ranks(tmp_path, GROUPS)
    with pytest.raises(ValueError, match=r"max_group_bytes must be an integer >= 1"):
        read_chakra(tmp_path, max_group_bytes=bad)


def test_a_simai_workload_one_byte_over_max_file_bytes_is_refused_naming_it(tmp_path):
    path = tmp_path / "w.txt"
    limit = len(SIMAI) + 10
    path.write_text(SIMAI + "\n" * 10)                      # blank lines: read past
    assert read_simai_workload(path, max_file_bytes=limit).n_ranks == 2
    path.write_text(SIMAI + "\n" * 11)
    with pytest.raises(TraceError, match=rf"w.txt: the file is {limit + 1} bytes, more than max_file_bytes={limit} "
                                         r".*pass a larger max_file_bytes to read_simai_workload"):
        read_simai_workload(path, max_file_bytes=limit)


def test_a_simai_workload_over_the_default_is_refused_on_its_size(tmp_path):
    """4 MiB + 1 byte: refused before it is read (under the 1 GiB default /dev/zero took 2.24 GB)."""
    path = tmp_path / "w.txt"
    path.write_text(SIMAI + "\n" * (MAX_WORKLOAD_BYTES + 1 - len(SIMAI)))
    def refused():
        with pytest.raises(TraceError, match=rf"more than max_file_bytes={MAX_WORKLOAD_BYTES} "):
            read_simai_workload(path)
    assert peak_memory(refused) < 2 * MiB
