"""Training sets in the formats people have, read as a stream of rows (never held in memory whole).

A row is a plain dict: ``row`` (0-based record number), ``line`` (1-based line, for line-based files),
``id`` (BEIR ``_id``) and ``fields``: (role, index, text) for each text, the role one of query, positive,
negative, document, text. Columns are named with ``columns`` (role -> column names) or detected from
the common layouts (LAYOUTS). Every error names the file, the row and the fix.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.rules import SettingError

ROLES = ("query", "positive", "negative", "document", "text")
ROLE_FLAGS = {"query": "--query-column", "positive": "--positive-column", "negative": "--negative-column",
              "text": "--text-column"}
# run_audit's ``columns`` (role -> column names) is what these flags build
COLUMN_FLAGS = {"columns": "--query-column, --positive-column, --negative-column or --text-column"}
# (name, required columns, role -> columns), tried in order; "negative_*" stands for negative_1, negative_2, ...
LAYOUTS: tuple[tuple[str, tuple[str, ...], dict[str, tuple[str, ...]]], ...] = (
    ("FlagEmbedding (query, pos, neg)", ("query", "pos"), {"query": ("query",), "positive": ("pos",), "negative": ("neg",)}),
    ("sentence-transformers (anchor, positive, negative)", ("anchor", "positive"),
     {"query": ("anchor",), "positive": ("positive",), "negative": ("negative", "negative_*")}),
    ("query, positive, negative", ("query", "positive"),
     {"query": ("query",), "positive": ("positive",), "negative": ("negative", "negative_*")}),
    ("sentence-transformers pairs (sentence1, sentence2)", ("sentence1", "sentence2"),
     {"query": ("sentence1",), "positive": ("sentence2",)}),
    ("question, answer", ("question", "answer"), {"query": ("question",), "positive": ("answer",)}),
    ("query, answer", ("query", "answer"), {"query": ("query",), "positive": ("answer",)}),
    ("BEIR (_id, text)", ("_id", "text"), {"document": ("text",)}),
    ("text", ("text",), {"text": ("text",)}),
)
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz")
TEXT_SUFFIXES = (".txt", ".txt.gz")
SUPPORTED = ("JSON Lines (.jsonl, .json, .ndjson, optionally .gz), parquet (.parquet), plain text (.txt, one text a line), "
             "a folder saved by datasets (save_to_disk), or a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")


@dataclass(frozen=True)
class TrainingSource:
    """One stream of training rows: a file, or one split of a datasets folder."""

    path: Path
    label: str
    format: str  # jsonl | parquet | text | arrow (a datasets folder's split)
    layout: str
    roles: Mapping[str, tuple[str, ...]]
    id_column: str | None = None
    total_rows: int | None = None
    arrow_files: tuple[Path, ...] = field(default=())


def open_training(path: str | Path, columns: Mapping[str, Sequence[str]] | None = None) -> list[TrainingSource]:
    """The sources of ``path`` with their columns resolved; refuses missing, empty or unreadable input up front."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"training set {path}: no such file or folder; check the path (TRAIN: {SUPPORTED})")
    if path.is_dir():
        return _folder_sources(path, columns)
    return [_file_source(path, columns)]


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return next((s for s in (*JSONL_SUFFIXES, *TEXT_SUFFIXES, ".parquet") if name.endswith(s)), path.suffix.lower())


def _file_source(path: Path, columns: Mapping[str, Sequence[str]] | None, label: str | None = None) -> TrainingSource:
    suffix = _suffix(path)
    if suffix in TEXT_SUFFIXES:
        if columns:
            raise UserError(f"{path}: a plain text file has no columns, yet {_flags(columns)} was given; drop it")
        _first_line(path)
        return TrainingSource(path, label or str(path), "text", "plain text (one text a line)", {"text": ("line",)})
    if suffix in JSONL_SUFFIXES:
        first = _first_record(path)
        layout, roles = resolve_columns(path, list(first), columns)
        id_column = "_id" if layout.startswith("BEIR") else None
        roles = _beir_roles(path, roles) if id_column else roles
        return TrainingSource(path, label or str(path), "jsonl", layout, roles, id_column)
    if suffix == ".parquet":
        names, rows = _parquet_schema(path)
        layout, roles = resolve_columns(path, names, columns)
        return TrainingSource(path, label or str(path), "parquet", layout, roles, "_id" if layout.startswith("BEIR") else None, rows)
    raise UserError(f"{path}: unsupported training file type {suffix or '(no suffix)'!r}; TRAIN may be {SUPPORTED}")


def _beir_roles(path: Path, roles: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """BEIR queries files hold queries; corpus files documents (same columns, told apart by the file name)."""
    return {"query": roles["document"]} if path.name.lower().startswith("queries") else dict(roles)


def resolve_columns(path: Path, names: Sequence[str], columns: Mapping[str, Sequence[str]] | None
                    ) -> tuple[str, dict[str, tuple[str, ...]]]:
    """(layout, role -> columns present in ``names``) from the given ``columns`` or the first matching LAYOUT."""
    if columns:
        missing = [(role, name) for role, wanted in columns.items() for name in wanted if name not in names]
        if missing:
            role, name = missing[0]
            raise SettingError(f"{path}: no column {name!r} ({{columns}} {name}); its columns are {list(names)}",
                               field="columns", flags={"columns": ROLE_FLAGS.get(role, role)})
        return "columns given", {role: tuple(wanted) for role, wanted in columns.items() if wanted}
    for layout, required, roles in LAYOUTS:
        if all(name in names for name in required):
            return layout, {role: present for role, wanted in roles.items() if (present := _present(wanted, names))}
    known = "; ".join(f"{layout}" for layout, *_ in LAYOUTS)
    raise SettingError(f"{path}: no known training layout in its columns {list(names)} (known: {known}); name the columns "
                       "with {columns}", field="columns", flags=COLUMN_FLAGS)


def _present(wanted: tuple[str, ...], names: Sequence[str]) -> tuple[str, ...]:
    found: list[str] = []
    for pattern in wanted:
        if pattern.endswith("_*"):
            found += sorted((n for n in names if re.fullmatch(re.escape(pattern[:-1]) + r"\d+", n)), key=_numbered)
        elif pattern in names:
            found.append(pattern)
    return tuple(found)


def _numbered(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


def _flags(columns: Mapping[str, Sequence[str]]) -> str:
    return ", ".join(ROLE_FLAGS.get(role, role) for role in columns)


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.name.lower().endswith(".gz") else path.open(encoding="utf-8")


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of a UTF-8 text file, gzipped or not."""
    number = 0
    try:
        with _open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                yield number, line
    except (UnicodeDecodeError, OSError, EOFError) as error:
        raise UserError(f"{path}, line {number + 1}: not readable as UTF-8 text ({error}); convert the file to UTF-8 "
                        "(or gzip of UTF-8)") from None


def _empty(path: Path) -> UserError:
    return UserError(f"{path}: the file holds no rows (empty training set); check the path, or leave it out of TRAIN")


def _first_line(path: Path) -> str:
    for _, line in text_lines(path):
        if line.strip():
            return line
    raise _empty(path)


def _first_record(path: Path) -> dict:
    for number, raw in text_lines(path):
        if not raw.strip():
            continue
        if raw.lstrip().startswith("["):
            raise UserError(f"{path}: a JSON array, not JSON Lines; write one object a line (e.g. jq -c '.[]' "
                            f"{path.name} > {path.stem}.jsonl) and audit that")
        return _record(path, number, raw)
    raise _empty(path)


def _record(path: Path, number: int, raw: str) -> dict:
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UserError(f"{path}, line {number}: malformed JSON ({error}); fix or remove the line") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}, line {number}: expected a JSON object with text columns, got {type(record).__name__}")
    return record


def _parquet_schema(path: Path) -> tuple[list[str], int]:
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path)
    except Exception as error:
        raise UserError(f"{path}: not a readable parquet file ({error}); re-export it") from None
    if meta.metadata.num_rows == 0:
        raise _empty(path)
    return list(meta.schema_arrow.names), meta.metadata.num_rows


def _folder_sources(path: Path, columns: Mapping[str, Sequence[str]] | None) -> list[TrainingSource]:
    if (path / "dataset_dict.json").is_file():
        splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8")).get("splits", [])
        sources = [_arrow_source(path / split, columns, f"{path}[{split}]") for split in splits]
        if not any(source.total_rows for source in sources):
            raise _empty(path)
        return [source for source in sources if source.total_rows]  # an empty split has nothing to audit
    if (path / "state.json").is_file():
        return [_arrow_source(path, columns, str(path))]
    beir = [path / name for name in ("corpus.jsonl", "queries.jsonl") if (path / name).is_file()]
    if beir:
        return [_file_source(file, columns) for file in beir]
    raise UserError(f"{path}: a folder that is neither saved by datasets (state.json or dataset_dict.json) nor a BEIR "
                    "folder (corpus.jsonl, queries.jsonl); give the training file itself")


def _arrow_source(folder: Path, columns: Mapping[str, Sequence[str]] | None, label: str) -> TrainingSource:
    """One saved Dataset (a split of a DatasetDict: ``label`` names it); an empty one has total_rows 0."""
    import pyarrow as pa

    if not (folder / "state.json").is_file():
        raise UserError(f"{label}: no state.json in {folder}; save the dataset again with save_to_disk")
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    files = tuple(folder / item["filename"] for item in state.get("_data_files", []))
    rows = sum(_arrow_rows(file) for file in files)
    if rows == 0:
        if "[" not in label:
            raise _empty(folder)
        return TrainingSource(folder, label, "arrow", "empty split", {}, None, 0, files)
    with pa.memory_map(str(files[0])) as source:
        names = list(pa.ipc.open_stream(source).schema.names)
    layout, roles = resolve_columns(folder, names, columns)
    return TrainingSource(folder, label, "arrow", layout, roles, None, rows, files)


def _arrow_rows(file: Path) -> int:
    import pyarrow as pa

    with pa.memory_map(str(file)) as source:
        return sum(batch.num_rows for batch in pa.ipc.open_stream(source))


def read_rows(source: TrainingSource, batch_size: int = 1000) -> Iterator[list[dict]]:
    """The rows of ``source`` in batches of ``batch_size``."""
    readers = {"text": _text_rows, "jsonl": _jsonl_rows, "parquet": _parquet_rows, "arrow": _arrow_batches}
    batch: list[dict] = []
    for row in readers[source.format](source, batch_size):
        batch.append(row)
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _text_rows(source: TrainingSource, batch_size: int) -> Iterator[dict]:
    row = 0
    for number, line in text_lines(source.path):
        text = line.rstrip("\r\n")
        if text.strip():
            yield {"row": row, "line": number, "id": None, "fields": [("text", 0, text)]}
            row += 1


def _jsonl_rows(source: TrainingSource, batch_size: int) -> Iterator[dict]:
    row = 0
    for number, raw in text_lines(source.path):
        if raw.strip():
            yield _row(source, _record(source.path, number, raw), row, number)
            row += 1


def _parquet_rows(source: TrainingSource, batch_size: int) -> Iterator[dict]:
    import pyarrow.parquet as pq

    wanted = _columns_read(source)
    row = 0
    for batch in pq.ParquetFile(source.path).iter_batches(batch_size=batch_size, columns=wanted):
        for record in batch.to_pylist():
            yield _row(source, record, row, None)
            row += 1


def _arrow_batches(source: TrainingSource, batch_size: int) -> Iterator[dict]:
    import pyarrow as pa

    wanted, row = _columns_read(source), 0
    for file in source.arrow_files:
        with pa.memory_map(str(file)) as stream:
            for batch in pa.ipc.open_stream(stream):
                for record in batch.select(wanted).to_pylist():
                    yield _row(source, record, row, None)
                    row += 1


def _columns_read(source: TrainingSource) -> list[str]:
    names = [name for columns in source.roles.values() for name in columns]
    return list(dict.fromkeys(names + ([source.id_column] if source.id_column else [])))


def _row(source: TrainingSource, record: dict, row: int, line: int | None) -> dict:
    fields: list[tuple[str, int, str]] = []
    for role, names in source.roles.items():
        for name in names:
            fields += [(role, len(fields), text) for text in _texts(source, record, name, row, line)]
    ident = record.get(source.id_column) if source.id_column else None
    return {"row": row, "line": line, "id": None if ident is None else str(ident), "fields": _renumbered(fields)}


def _renumbered(fields: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """Index each text within its role (positive 0, positive 1, ...)."""
    seen: dict[str, int] = {}
    out = []
    for role, _, text in fields:
        out.append((role, seen.get(role, 0), text))
        seen[role] = seen.get(role, 0) + 1
    return out


def _texts(source: TrainingSource, record: dict, name: str, row: int, line: int | None) -> list[str]:
    value = record.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    where = f"line {line}" if line is not None else f"row {row}"
    raise SettingError(f"{source.label}, {where}: column {name!r} holds {type(value).__name__} {str(value)[:60]!r}, not a text "
                       "or a list of texts; name the text columns with {columns}", field="columns", flags=COLUMN_FLAGS)
