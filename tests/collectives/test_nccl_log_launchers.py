"""Launcher prefixes on every line of an nccl-tests log (OpenMPI --tag-output, OpenMPI 5 --output
tag, MPICH mpiexec -l, pdsh, srun -l) read as the plain log; a table of nccl-tests -C 1 (cputime)
refused saying what it is. The logs are printed here in nccl-tests' format (src/util.cu)."""

import pytest

from flowsolver import nccl_tests

PLAIN = """# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid   1001 on      node1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1002 on      node1 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
node1:1001:1001 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE
     1048576        262144     float     sum      -1    20.00   52.43   52.43      0    19.00   55.19   55.19      0
     4194304       1048576     float     sum      -1    40.00  104.86  104.86      0    39.00  107.55  107.55      0
# Avg bus bandwidth    : 78.64
"""


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "[1,0]<stdout>: ", "[0] ", "node1: ", "0: "],
                         ids=["openmpi-tag-output", "openmpi5-output-tag", "mpich-l", "pdsh", "srun-l"])
def test_launcher_prefixes_are_read_as_the_plain_log(prefix):
    df = nccl_tests.read("".join(prefix + line + "\n" for line in PLAIN.splitlines()), op="all_reduce")
    assert list(df["time"]) == [20.0, 19.0, 40.0, 39.0]      # the rows' out-of-place, in-place times
    assert df.attrs["ranks"] == 2 and df.attrs["devices"][1] == ("node1", 1, "NVIDIA H100 80GB HBM3")


def test_a_cputime_table_is_refused_saying_what_it_is():
    # nccl-tests -C 1 (src/util.cu writeResultHeader: "cputime" for "time") prints the host's time
    cpu = PLAIN.replace("    time ", " cputime ")
    with pytest.raises(ValueError, match=r"'cputime' \(nccl-tests -C 1\).*-C 0"):
        nccl_tests.read(cpu, op="all_reduce")
