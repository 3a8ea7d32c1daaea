"""from_simai's default file limit sized to the memory a graph takes (adv21b F3: 256 MiB by
default at ~80x its file, ~21 GB and ~17 minutes; 16 MiB now, ~1.3 GB)."""

import topologies as tp
from topologies.formats.simai import MAX_SIMAI_BYTES

from ..reader_checks import peak_memory, raises_clearly

MiB = 2**20
TOPO = "4 2 1 1 4 H100\n2 3\n0 2 2880Gbps 0.000025ms 0\n1 2 2880Gbps 0.000025ms 0\n" \
       "0 3 400Gbps 0.0005ms 0\n1 3 400Gbps 0.0005ms 0\n"


def test_the_default_is_16_mib():
    # 20.3 MB of fat tree (409,600 GPUs) took 1.62 GB: 16 MiB keeps a read near 1.3 GB
    assert MAX_SIMAI_BYTES == 16 * MiB
    assert 16 * MiB * 1.62e9 / 20.3e6 < 1.5e9


def test_a_file_one_byte_over_max_bytes_is_refused_naming_it(tmp_path):
    path = tmp_path / "topo"
    limit = len(TOPO) + 5
    path.write_text(TOPO + "\n" * 5)                       # blank lines: read past
    assert len(tp.gpus(tp.from_simai(path, max_bytes=limit))) == 2
    path.write_text(TOPO + "\n" * 6)
    raises_clearly(lambda p: tp.from_simai(p, max_bytes=limit), path, f"{limit + 1} bytes",
                   f"max_bytes={limit}", "pass a larger max_bytes")


def test_a_file_over_the_default_is_refused_on_its_size(tmp_path):
    path = tmp_path / "topo"
    path.write_text(TOPO + "\n" * (MAX_SIMAI_BYTES + 1 - len(TOPO)))
    peak = peak_memory(lambda: raises_clearly(tp.from_simai, path, f"max_bytes={MAX_SIMAI_BYTES}"))
    assert peak < 2 * MiB
