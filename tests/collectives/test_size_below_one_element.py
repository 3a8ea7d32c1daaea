"""A collective smaller than one element of its data type moves nothing (nccl-tests' count is
size / wordSize, 0 below one element): it is refused, naming size and the element's bytes
(adv22a: 1 byte of float was timed like 4)."""

import pytest

import flowsolver as fs
import topologies as tp


@pytest.fixture(scope="module")
def node():
    return tp.rail_optimized(nodes=1)


@pytest.mark.parametrize("size, dtype, element", [(1, "float", 4), (3, "float", 4), (1, "bfloat16", 2),
                                                  (7, "double", 8), (4, "int64", 8)])
def test_less_than_one_element_is_refused(node, size, dtype, element):
    with pytest.raises(ValueError, match=rf"size must hold at least one {dtype} element \({element} B\)"):
        fs.collective(node, "all_reduce", size, dtype=dtype)


@pytest.mark.parametrize("size, dtype", [(4, "float"), (1, "int8"), (2, "half"), (8, "double")])
def test_one_element_is_timed(node, size, dtype):
    assert fs.collective(node, "all_reduce", size, dtype=dtype).time > 0


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_to_all"])
def test_less_than_one_element_a_rank_is_refused_where_the_op_splits_the_size(node, op):
    # 8 ranks of one DGX H100: 8 x 4 B = 32 B at least (nccl-tests: count / nranks elements a
    # rank, 0 below; adv23 F3: a 4-byte all-gather was timed at 10.8 us)
    with pytest.raises(ValueError, match=rf"at least one float element \(4 B\) a rank for {op}.*at least 32 B"):
        fs.collective(node, op, 31)
    assert fs.collective(node, op, 32).time > 0
    with pytest.raises(ValueError, match=r"at least 8 B, got 7"):
        fs.collective(node, op, 7, ranks=[0, 1], dtype="int32")
    with pytest.raises(ValueError, match=r"a rank for"):
        fs.collective_variants([node, node], op, 16)
    with pytest.raises(ValueError, match=r"a rank for"):
        fs.concurrent(node, [{"op": op, "size": 16, "algorithm": "ring" if op != "all_to_all" else "direct"}])
