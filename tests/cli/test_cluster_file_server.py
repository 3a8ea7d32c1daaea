"""``--cluster`` given an NCCL topology file (one server, whatever its name) says to pass it as
``--server``, which reads it."""

import pytest

from flowsolver.cli import main

# one socket, one PCIe switch holding a GPU (sm 90) and its 400 Gb/s InfiniBand NIC
_TOPO = ('<system version="1"><cpu numaid="0" vendor="GenuineIntel">'
         '<pci busid="0000:01:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">'
         '<pci busid="0000:02:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">'
         '<gpu dev="0" sm="90" rank="0"/></pci>'
         '<pci busid="0000:03:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">'
         '<nic><net name="mlx5_0" dev="0" speed="400000" port="1"/></nic></pci></pci></cpu></system>\n')


@pytest.mark.parametrize("name", ["topo.xml", "topo.txt", "topo.json"])
def test_an_nccl_topology_file_for_cluster_says_to_pass_it_as_server(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text(_TOPO)
    assert main(["collective", "--cluster", str(path), "-b", "1M", "-e", "1M"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"flowsolver: error: --cluster {str(path)!r}: an NCCL topology file")
    assert f"pass it as --server {path}" in err and "\n" not in err
    assert main(["collective", "--server", str(path), "--nodes", "2", "-b", "1M", "-e", "1M"]) == 0
