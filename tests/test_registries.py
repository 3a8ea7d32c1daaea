"""The registries users extend: a topology family (build, FAMILIES, sweeps and the command
line read it) and machine / workload readers (topologies.read and traces.read choose them by
content and suffix); each test's registrations are undone by the root conftest."""

import json

import pytest

import topologies as tp
from flowsolver import traces
from flowsolver._sweep import expand_grid
from flowsolver.cli import main
from flowsolver.cli._arguments import build_graph
from flowsolver.cli._parser import build_parser

BUILT_IN = ("rail_optimized", "fat_tree", "leaf_spine", "dragonfly", "torus", "rail_only")


def _ring(chips, open_ring=False, *, link):
    """A ring (or with open_ring a line) of ``chips`` GPUs: a 1-D torus without servers."""
    return tp.torus([chips], link=link, wrap=not open_ring)


def _register_toy():
    return tp.register_family("toy_ring", _ring, [
        tp.FamilyParameter("chips", int, 6, "chips on the ring (toy_ring; default %(default)s)"),
        tp.FamilyParameter("open_ring", bool, False, "a line, not a ring", optional=True, flag="--open")])


def test_a_registered_family_is_built_listed_swept_and_on_the_command_line(capsys):
    _register_toy()
    assert tuple(tp.FAMILIES)[:6] == BUILT_IN and tuple(tp.FAMILIES)[6:] == ("toy_ring",)
    assert tp.FAMILIES["toy_ring"] == ("chips", "open_ring")
    # a ring of n chips: n GPUs, n full-duplex cables = 2n directed edges; a line has n - 1
    g = tp.build("toy_ring", chips=5, link="ib_hdr")
    assert len(tp.gpus(g)) == 5 and g.number_of_edges() == 10
    assert {d["tech"] for _, _, d in g.edges(data=True)} == {"ib_hdr"}
    assert tp.build("toy_ring", chips=5, open_ring=True).number_of_edges() == 8
    with pytest.raises(ValueError, match=r"family 'toy_ring' needs parameter\(s\) \['chips'\]"):
        tp.build("toy_ring")
    # the command line: --family takes it, its flags carry its CLI defaults
    args = build_parser().parse_args(["topology", "--family", "toy_ring", "--open"])
    assert args.chips == 6 and build_graph(args).number_of_edges() == 2 * 5
    assert main(["topology", "--family", "toy_ring", "--chips", "7", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 7
    # sweeps take its size keys
    assert expand_grid({"family": "toy_ring", "chips": [3, 4]})[1]["chips"] == 4


def test_registrations_are_undone_between_tests():
    """Runs after the test above (file order): the root conftest removed its family."""
    assert tuple(tp.FAMILIES) == BUILT_IN and "toy_ring" not in tp.FAMILIES
    assert tp.reader_names() == ("node_link_json", "nccl_topology", "astra_network", "simai_topology")
    assert traces.reader_names() == ("chakra", "simai_workload")


def test_family_registration_refuses_what_would_break_build_or_the_command_line():
    _register_toy()
    with pytest.raises(ValueError, match="already registered; pass overwrite=True"):
        _register_toy()
    with pytest.raises(ValueError, match="'torus' is built in"):
        tp.register_family("torus", _ring, [])
    # one flag serves every family with the parameter: declared differently is an error
    with pytest.raises(ValueError, match="parameter 'nodes' is declared differently by family 'rail_optimized'"):
        tp.register_family("other", _ring, [tp.FamilyParameter("nodes", int, 16, "servers")])
    with pytest.raises(ValueError, match=r"\['link'\] are build\(\)'s own keywords"):
        tp.register_family("other", _ring, [tp.FamilyParameter("link", str, "ib_ndr")])
    with pytest.raises(ValueError, match="needs flag="):
        tp.FamilyParameter("wrap", bool, True)
    with pytest.raises(TypeError, match="builder must be callable"):
        tp.register_family("other", "torus", [])
    with pytest.raises(ValueError, match="family must be one of rail_optimized, .*toy_ring, got 'nope'"):
        tp.build("nope")
    with pytest.raises(TypeError):
        tp.FAMILIES["mine"] = ("n",)          # a read-only view


def _read_ring(path, *, max_bytes=64):
    words = open(path).read(max_bytes).split()
    if len(words) != 2 or words[0] != "ring":
        raise ValueError(f"{path}: expected 'ring N'")
    return tp.torus([int(words[1])])


def test_a_registered_machine_reader_is_chosen_by_content_then_suffix(tmp_path):
    tp.register_reader("ring_text", _read_ring, suffixes=(".ring",), sniff=lambda p, head: head.startswith(b"ring "))
    by_suffix, by_content, neither = tmp_path / "a.ring", tmp_path / "a.conf", tmp_path / "a.conf2"
    by_suffix.write_text("ring 4\n")
    by_content.write_text("ring 5\n")
    neither.write_text("circle 5\n")
    assert len(tp.gpus(tp.read(by_suffix))) == 4 and len(tp.gpus(tp.read(by_content))) == 5
    with pytest.raises(ValueError) as err:
        tp.read(neither)
    message = str(err.value)
    assert message.startswith(str(neither)) and "ring_text (.ring)" in message and "node_link_json (.json)" in message
    # content beats the suffix: a node-link JSON file named .ring is read as JSON
    tp.save(tp.torus([3]), tmp_path / "json.ring")
    assert tp.read(tmp_path / "json.ring").graph["generator"] == "torus"
    # kind= narrows the formats: no server-model format knows a ring
    with pytest.raises(ValueError, match="known formats: nccl_topology"):
        tp.read(by_content, kind="server")
    # the command line's --cluster goes through read()
    assert main(["topology", "--cluster", str(by_content), "--json"]) == 0


def test_the_built_in_machine_readers_are_chosen_as_the_command_line_chose_them(tmp_path):
    """Node-link JSON, ASTRA-sim YAML and a suffix-less SimAI file, each read by its own reader."""
    g = tp.fat_tree(4)
    tp.save(g, tmp_path / "ft.json")
    tp.to_simai(g, tmp_path / "ft")
    (tmp_path / "net.yml").write_text("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\n")
    assert tp.read(tmp_path / "ft.json").graph == tp.load(tmp_path / "ft.json").graph
    assert tp.read(tmp_path / "ft").graph == tp.from_simai(tmp_path / "ft").graph
    assert tp.read(tmp_path / "net.yml").graph == tp.from_astra_network(tmp_path / "net.yml").graph


def test_a_registered_workload_reader_is_chosen_by_traces_read(tmp_path):
    simai = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 2 "
             "checkpoints: 0 checkpoint_initiates: 0\n1\nlayer -1 10 NONE 0 10 NONE 0 10 NONE 0 0\n")

    def read_upper(path):          # a toy format: a SimAI workload written in capitals
        plain = tmp_path / "plain.txt"
        plain.write_text(open(path).read().replace("LAYER", "layer").replace("MODEL_PARALLEL_NPU_GROUP",
                                                                            "model_parallel_NPU_group"))
        return traces.read_simai_workload(plain)

    traces.register_reader("upper", read_upper, suffixes=(".upper",))
    (tmp_path / "w.upper").write_text(simai.replace("model_parallel_NPU_group", "MODEL_PARALLEL_NPU_GROUP"))
    (tmp_path / "w.workload").write_text(simai)       # SimAI's header: known by content
    assert traces.read(tmp_path / "w.upper").n_ranks == 2 == traces.read(tmp_path / "w.workload").n_ranks
    (tmp_path / "w.other").write_text("no workload\n")      # a file: not Chakra (a folder or a prefix)
    with pytest.raises(ValueError, match=r"known formats: chakra \(by content\); simai_workload \(.txt\); upper"):
        traces.read(tmp_path / "w.other")
    # a folder is a Chakra trace (its reader names what is missing)
    with pytest.raises(ValueError, match="no Chakra trace files"):
        traces.read(tmp_path)
