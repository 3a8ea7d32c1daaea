"""``--model``: a preset's name, or a model file of its shape (JSON or TOML)."""

from __future__ import annotations

from pathlib import Path

from ._arguments import CliError

#: the most a --model file may hold: its fields fit in a few hundred bytes
_MODEL_FILE_BYTES = 1 << 20


def model_of(value: str):
    """``--model``: a preset name as it is, or a ``.json`` / ``.toml`` file of the model's shape
    (the fields of :class:`flowsolver.ModelSpec`; ``name`` defaults to the file's stem) read
    into a ModelSpec.

    >>> import json, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "mine.json")
    >>> with open(path, "w") as fh:
    ...     json.dump(dict(layers=2, hidden=1024, ffn=4096, heads=8, kv_heads=8, vocab=32000), fh)
    >>> m = model_of(path)
    >>> m.name, m.layers, m.seq_len              # seq_len: the ModelSpec default
    ('mine', 2, 8192)
    """
    import dataclasses

    from ..training import MODELS, ModelSpec

    if value in MODELS:
        return value
    path = Path(value)
    if path.suffix.lower() not in (".json", ".toml"):
        raise CliError(f"--model: {value!r} is no preset ({', '.join(MODELS)}) and no .json or .toml model file")
    if not path.is_file():
        raise CliError(f"--model {value!r}: no such file")
    if path.stat().st_size > _MODEL_FILE_BYTES:
        raise CliError(f"--model {value!r}: {path.stat().st_size:,} bytes; a model file is a few fields "
                       f"(at most {_MODEL_FILE_BYTES:,} bytes)")
    try:
        if path.suffix.lower() == ".json":
            import json

            from topologies.formats import unique_keys

            fields = json.loads(path.read_text(), object_pairs_hook=unique_keys)
        else:
            import tomllib

            fields = tomllib.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:     # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise CliError(f"--model {value!r}: not valid {path.suffix[1:].upper()}: {str(err).splitlines()[0]}") \
            from None
    except RecursionError:
        raise CliError(f"--model {value!r}: nested too deep to read; a model file is one table of fields") from None
    known = [f.name for f in dataclasses.fields(ModelSpec)]
    required = [f.name for f in dataclasses.fields(ModelSpec)
                if f.default is dataclasses.MISSING and f.name != "name"]
    if not isinstance(fields, dict):
        raise CliError(f"--model {value!r}: the file must hold one table of fields ({', '.join(known)})")
    unknown = sorted(set(fields) - set(known))
    missing = [k for k in required if k not in fields]
    if unknown or missing:
        raise CliError(f"--model {value!r}: " + "; ".join(
            ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])
            + ([f"missing field(s) {', '.join(missing)}"] if missing else [])) + f" (fields: {', '.join(known)})")
    try:
        return ModelSpec(**{"name": path.stem, **fields})
    except (ValueError, TypeError) as err:
        # ModelSpec's own message names its field (seq_len, context): said as the file's field, in
        # the command line's words as they are (a "seq_len" of the file is no --seq-len the user gave)
        import re

        raise CliError(f"--model {value!r}: the file's " + re.sub(r"^ModelSpec '[^']*': ", "", str(err))) from None
