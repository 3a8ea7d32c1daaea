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
